// SPDX-License-Identifier: GPL-3.0-or-later
#include "storage/server_keys.h"

#include <qt6keychain/keychain.h>

namespace tokenscope::ui {

namespace {

// An error that means "no keyring here" rather than "no entry".
bool keyring_missing(QKeychain::Error e)
{
    return e != QKeychain::NoError && e != QKeychain::EntryNotFound;
}

} // namespace

ServerKeys::ServerKeys(QObject* parent) : QObject(parent) {}

ServerKeys& ServerKeys::instance()
{
    static ServerKeys* keys = new ServerKeys; // lives as long as the process, like the keys it holds
    return *keys;
}

QString ServerKeys::service()
{
    return QStringLiteral("org.tokenscope.Tokenscope");
}

QString ServerKeys::keyringNote() const
{
    if (m_keyring)
        return tr("Kept in the desktop keyring once the server accepts it; never in settings or logs.");
    return tr("No keyring service answered (%1): the key is kept in memory for this session only, never in "
              "settings or logs.")
        .arg(m_reason);
}

void ServerKeys::keyringFailed(const QString& reason)
{
    m_keyring = false;
    m_reason = reason.isEmpty() ? tr("no reason given") : reason;
}

void ServerKeys::store(const QString& url, const QString& key)
{
    if (key.isEmpty())
        m_session.remove(url);
    else
        m_session.insert(url, key);
    QKeychain::Job* job = nullptr;
    if (key.isEmpty()) {
        auto* del = new QKeychain::DeletePasswordJob(service(), this);
        del->setKey(url);
        job = del;
    } else {
        auto* write = new QKeychain::WritePasswordJob(service(), this);
        write->setKey(url);
        write->setTextData(key);
        job = write;
    }
    job->setAutoDelete(true);
    job->setInsecureFallback(false); // never a plain-text copy in the settings file
    connect(job, &QKeychain::Job::finished, this, [this, url, erase = key.isEmpty()](QKeychain::Job* j) {
        const bool missing = keyring_missing(j->error()) && !(erase && j->error() == QKeychain::EntryNotFound);
        if (missing)
            keyringFailed(j->errorString());
        else
            m_keyring = true;
        emit stored(url, !missing);
    });
    job->start();
}

void ServerKeys::fetch(const QString& url)
{
    if (const auto it = m_session.constFind(url); it != m_session.constEnd()) {
        const QString key = *it;
        // Asynchronous like the keyring's answer, so callers handle one path.
        QMetaObject::invokeMethod(
            this, [this, url, key] { emit fetched(url, key); }, Qt::QueuedConnection);
        return;
    }
    auto* job = new QKeychain::ReadPasswordJob(service(), this);
    job->setKey(url);
    job->setAutoDelete(true);
    job->setInsecureFallback(false);
    connect(job, &QKeychain::Job::finished, this, [this, url](QKeychain::Job* j) {
        QString key;
        if (j->error() == QKeychain::NoError) {
            m_keyring = true;
            key = static_cast<QKeychain::ReadPasswordJob*>(j)->textData();
        } else if (keyring_missing(j->error())) {
            keyringFailed(j->errorString());
        } else {
            m_keyring = true; // the keyring answered: no key for this server
        }
        emit fetched(url, key);
    });
    job->start();
}

} // namespace tokenscope::ui
