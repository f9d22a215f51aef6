// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QHash>
#include <QObject>
#include <QString>

namespace tokenscope::ui {

// API keys of servers, kept in the desktop keyring (the Secret Service — GNOME Keyring, KWallet —
// through QtKeychain) under the application id and the server's URL, never in settings or logs.
// Where no keyring service answers, a key lives in memory for this session only and keyringNote()
// says so with the keyring's reason. Every keyring call is asynchronous: answers come as signals.
class ServerKeys : public QObject {
    Q_OBJECT
public:
    explicit ServerKeys(QObject* parent = nullptr);
    // The process's store (the session's in-memory keys are shared by every dialog).
    static ServerKeys& instance();

    // Keeps `key` for `url` (an empty key forgets it). → stored.
    void store(const QString& url, const QString& key);
    // Looks the key for `url` up: this session's first, then the keyring. → fetched.
    void fetch(const QString& url);

    // Whether the keyring answered the last call (true until a call says otherwise).
    bool keyringAvailable() const { return m_keyring; }
    // One sentence on where keys are kept, for the connect dialog.
    QString keyringNote() const;

    // The keyring's service name for our entries.
    static QString service();

signals:
    // in_keyring: written to the keyring; otherwise kept in memory (keyringNote() says why).
    void stored(const QString& url, bool in_keyring);
    // key empty: none known for this URL.
    void fetched(const QString& url, const QString& key);

private:
    void keyringFailed(const QString& reason);

    QHash<QString, QString> m_session; // url → key, for this process only
    bool m_keyring = true;
    QString m_reason;
};

} // namespace tokenscope::ui
