// SPDX-License-Identifier: GPL-3.0-or-later
// API keys of servers: kept in the desktop keyring when one answers, otherwise in memory for the
// session with a note that says so; never in the settings file. ctest runs this suite twice:
// test_server_keys_keyring inside a private D-Bus session with a GNOME keyring daemon
// (tests/scripts/with_keyring.sh; TOKENSCOPE_EXPECT_KEYRING=1), and test_server_keys with no session
// bus at all, as on a machine without a desktop.
#include "signal_wait.h"
#include "storage/server_keys.h"
#include "widgets/connect_server_dialog.h"

#include <QFile>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTest>

using namespace tokenscope::ui;

namespace {

const QString kUrl = "http://127.0.0.1:18999";
const QString kKey = "sk-tokenscope-test-0f3a9c";

bool expect_keyring()
{
    return qEnvironmentVariable("TOKENSCOPE_EXPECT_KEYRING") == "1";
}

// Stores `key` for `url` in `keys` and returns whether it reached the keyring.
bool store(ServerKeys& keys, const QString& url, const QString& key)
{
    QSignalSpy stored(&keys, &ServerKeys::stored);
    keys.store(url, key);
    if (!testsupport::seen(stored, 1, 60000))
        return false;
    return stored.first().at(1).toBool();
}

QString fetch(ServerKeys& keys, const QString& url)
{
    QSignalSpy fetched(&keys, &ServerKeys::fetched);
    keys.fetch(url);
    if (!testsupport::seen(fetched, 1, 60000))
        return "(no answer)";
    return fetched.first().at(1).toString();
}

bool settings_hold(const QString& text)
{
    QSettings settings;
    settings.sync();
    QFile file(settings.fileName());
    return file.open(QIODevice::ReadOnly) && file.readAll().contains(text.toUtf8());
}

} // namespace

class TestServerKeys : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void keptWhereTheKeyringSays();
    void forgettingAKey();
    void dialogOffersTheKeptKey();
};

void TestServerKeys::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true); // settings in a test location, never the user's
    QCoreApplication::setOrganizationName("Tokenscope");
    QCoreApplication::setApplicationName("test_server_keys");
    QSettings().clear();
    qInfo("keyring expected: %s; D-Bus session: %s", expect_keyring() ? "yes" : "no",
          qPrintable(qEnvironmentVariable("DBUS_SESSION_BUS_ADDRESS", "(none)")));
}

void TestServerKeys::keptWhereTheKeyringSays()
{
    ServerKeys keys;
    QCOMPARE(store(keys, kUrl, kKey), expect_keyring());
    QCOMPARE(keys.keyringAvailable(), expect_keyring());
    qInfo("note: %s", qPrintable(keys.keyringNote()));
    if (expect_keyring()) {
        QVERIFY(keys.keyringNote().contains("desktop keyring"));
    } else {
        QVERIFY(keys.keyringNote().contains("No keyring service answered"));
        QVERIFY(keys.keyringNote().contains("in memory for this session"));
    }
    // This session finds it either way.
    QCOMPARE(fetch(keys, kUrl), kKey);
    // Another process (a store with no memory of this session) finds it only in a keyring.
    ServerKeys other;
    QCOMPARE(fetch(other, kUrl), expect_keyring() ? kKey : QString());
    QCOMPARE(fetch(other, kUrl + "/elsewhere"), QString());
    QVERIFY(!settings_hold(kKey));
}

void TestServerKeys::forgettingAKey()
{
    ServerKeys keys;
    QCOMPARE(store(keys, kUrl + "/forget", kKey), expect_keyring());
    QCOMPARE(fetch(keys, kUrl + "/forget"), kKey);
    store(keys, kUrl + "/forget", QString());
    QCOMPARE(fetch(keys, kUrl + "/forget"), QString());
    ServerKeys other;
    QCOMPARE(fetch(other, kUrl + "/forget"), QString());
}

void TestServerKeys::dialogOffersTheKeptKey()
{
    const QString url = "http://127.0.0.1:18998";
    store(ServerKeys::instance(), url, kKey);
    ConnectServerDialog::rememberServer(url);
    {
        ConnectServerDialog dialog; // opens on the most recent server
        QTRY_COMPARE_WITH_TIMEOUT(dialog.apiKey(), kKey, 30000);
        QVERIFY(dialog.keyNote().contains("The key kept for this server"));
        QCOMPARE(dialog.keyNote().contains("desktop keyring"), expect_keyring());
        // another server: the filled-in key goes with the URL it belongs to
        dialog.setUrl("http://127.0.0.1:18997");
        QTRY_COMPARE_WITH_TIMEOUT(dialog.apiKey(), QString(), 30000);
    }
    {
        // a key typed before the kept one's answer arrives stays
        QSignalSpy fetched(&ServerKeys::instance(), &ServerKeys::fetched);
        ConnectServerDialog dialog;
        dialog.setApiKey("typed-by-hand");
        QVERIFY(testsupport::seen(fetched, 1, 30000));
        QCOMPARE(fetched.first().at(1).toString(), kKey);
        QCoreApplication::processEvents();
        QCOMPARE(dialog.apiKey(), QString("typed-by-hand"));
    }
    QVERIFY(ConnectServerDialog::recentServers().contains(url));
    QVERIFY(!settings_hold(kKey));
}

QTEST_MAIN(TestServerKeys)
#include "test_server_keys.moc"
