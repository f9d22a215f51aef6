// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "remote/remote_client.h"

#include <QDialog>

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace tokenscope::ui {

// File → Connect to server…: the URL (recent servers offered), an optional API key, the model
// (listed from the server once it answers) and the time-out. Connect probes the server with its own
// client, so a wrong URL or key is said here, in the dialog, and nothing changes in the window until
// a server has answered. The key a server accepted is kept in the desktop keyring (ServerKeys) and
// offered again for that URL; where no keyring answers it is kept in memory for the session, and the
// note under the field says which. It is never written to settings or logs.
class ConnectServerDialog : public QDialog {
    Q_OBJECT
public:
    explicit ConnectServerDialog(QWidget* parent = nullptr);
    // What to connect to (valid once the dialog was accepted).
    remote::Endpoint endpoint() const;
    // For tests and scripts: fill the form.
    void setUrl(const QString& url);
    void setApiKey(const QString& key);
    QString status() const;
    QString keyNote() const; // where the key is kept (the keyring, or memory and why)
    QString apiKey() const;
    void check(); // what Connect does

    // Recent servers (the URL only; never the key).
    static QStringList recentServers();
    static void rememberServer(const QString& url);

private:
    void onProbed(std::shared_ptr<const remote::ServerInfo> server);
    void onFailed(const QString& message);
    QString serverUrl() const; // the URL field as the key is filed under
    void fetchKey();
    void showKeyNote();

    remote::Client* m_client;
    QComboBox* m_url = nullptr;
    QLineEdit* m_key = nullptr;
    QLabel* m_key_note = nullptr;
    bool m_key_filled = false; // the key field holds a kept key, not one typed
    QComboBox* m_model = nullptr;
    QSpinBox* m_timeout = nullptr;
    QLabel* m_status = nullptr;
    QPushButton* m_connect = nullptr;
    quint64 m_probe = 0;
};

} // namespace tokenscope::ui
