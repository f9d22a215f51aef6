// SPDX-License-Identifier: GPL-3.0-or-later
// The user's data when disks and databases fail (each case is a scenario that lost data silently
// before): a damaged conversation database (random bytes, one overwritten page, truncated) is kept
// aside and a fresh one started with a notice; a read-only database file or folder and a disk full
// at start or mid-session keep every message in memory, in order (never a reply without its user
// turn), say so in the chat panel, and write it all once the disk takes it again; exports and
// `trace --json` on a full disk fail with the reason and leave the old file intact; no writer
// follows a planted symbolic link; the screenshot mode's database is not at a fixed shared path;
// warnings reach the log file at once.
//
// Read-only files and full disks are made with a read-only bind mount and a small tmpfs, which need
// root (CI runs as root, which also ignores permission bits, so chmod would prove nothing there);
// without root those cases skip with that reason.
#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "panels/attention_panel.h"
#include "panels/chat_panel.h"
#include "storage/atomic_save.h"
#include "storage/conversation_store.h"
#include "test_paths.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QProcess>
#include <QRandomGenerator>
#include <QSignalSpy>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <unistd.h>

using namespace tokenscope::ui;

namespace {

bool is_root()
{
    return ::geteuid() == 0;
}

#define REQUIRE_ROOT()                                                                                                 \
    if (!is_root())                                                                                                    \
        QSKIP("needs root to mount a small tmpfs or a read-only bind mount (CI runs as root)");

bool run(const QString& program, const QStringList& args, QString* output = nullptr)
{
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(program, args);
    p.waitForFinished(60000);
    if (output)
        *output = QString::fromUtf8(p.readAll());
    return p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
}

// Mounts made by a test, undone (in reverse) when it ends, whatever happens.
class Mounts {
public:
    ~Mounts()
    {
        for (auto it = m_points.rbegin(); it != m_points.rend(); ++it)
            run("umount", {*it});
    }
    bool tmpfs(const QString& dir, const QString& size)
    {
        QDir().mkpath(dir);
        return add(dir, run("mount", {"-t", "tmpfs", "-o", "size=" + size + ",mode=0755", "tokenscope-test", dir}));
    }
    bool readOnly(const QString& path) // a file or a folder
    {
        return add(path, run("mount", {"--bind", path, path}) && run("mount", {"-o", "remount,bind,ro", path}));
    }
    void undo(const QString& path)
    {
        run("umount", {path});
        m_points.removeAll(path);
    }

private:
    bool add(const QString& p, bool ok)
    {
        if (ok)
            m_points << p;
        return ok;
    }
    QStringList m_points;
};

// Fills the file system holding `dir` until a write fails.
void fill(const QString& dir)
{
    QFile f(dir + "/filler");
    f.open(QIODevice::WriteOnly);
    const QByteArray chunk(4096, 'x');
    while (f.write(chunk) == chunk.size() && f.flush()) {
    }
    f.close();
}

QByteArray read_all(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

void write_all(const QString& path, const QByteArray& bytes)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    QCOMPARE(f.write(bytes), bytes.size());
}

// The messages of the latest conversation as an independent connection reads them: role:content.
QStringList stored_messages(const QString& path)
{
    QStringList out;
    {
        QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", "peek");
        db.setDatabaseName(path);
        db.setConnectOptions("QSQLITE_OPEN_READONLY");
        if (db.open()) {
            QSqlQuery q(db);
            q.exec("SELECT role, content FROM messages WHERE conversation_id = (SELECT MAX(id) FROM conversations) "
                   "ORDER BY seq");
            while (q.next())
                out << q.value(0).toString() + ":" + q.value(1).toString().left(40);
        }
        db.close();
    }
    QSqlDatabase::removeDatabase("peek");
    return out;
}

// A database with one conversation of `n` messages (user/assistant alternating).
void make_database(const QString& path, int n, int size = 20)
{
    ConversationStore store(path, "make");
    QVERIFY(store.ok());
    const qint64 id = store.createConversation("system", "model.gguf");
    for (int i = 0; i < n; ++i)
        QVERIFY(
            store.appendMessage(id, i % 2 ? "assistant" : "user", QString("message %1 ").arg(i) + QString(size, 'm')));
}

QStringList temp_files_in(const QString& dir)
{
    return QDir(dir).entryList({"*.tmp*", ".*.tmp*"}, QDir::Files | QDir::Hidden);
}

} // namespace

class TestStorageFaults : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void damagedDatabaseIsKeptAside_data();
    void damagedDatabaseIsKeptAside();
    void readOnlyDatabaseFileKeepsMessages();
    void readOnlyFolderKeepsMessages();
    void diskFullAtStart();
    void diskFullMidSessionKeepsTheOrder();
    void chatPanelSaysWhatIsNotSaved();
    void chatPanelNamesTheDamagedFile();
    void attentionExportOnAFullDisk();
    void exportsOnAFullDiskFailAndKeepTheOldFile();
    void traceOnAFullDiskFails();
    void plantedSymlinksAreNotFollowed();
    void screenshotDatabaseIsPrivate();
    void warningsReachTheLogAtOnce();

private:
    QTemporaryDir m_dir;
};

void TestStorageFaults::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(m_dir.isValid());
}

void TestStorageFaults::damagedDatabaseIsKeptAside_data()
{
    QTest::addColumn<QString>("damage");
    QTest::newRow("random bytes") << "random";
    QTest::newRow("one overwritten page") << "page";
    QTest::newRow("truncated") << "truncated";
}

void TestStorageFaults::damagedDatabaseIsKeptAside()
{
    QFETCH(QString, damage);
    const QString dir = m_dir.filePath("damaged-" + damage);
    QDir().mkpath(dir);
    const QString path = dir + "/conversations.sqlite";
    if (damage == "random") {
        QByteArray junk(64 * 1024, 0);
        for (auto& c : junk)
            c = char(QRandomGenerator::global()->bounded(256));
        write_all(path, junk);
    } else {
        make_database(path, 120, 300); // several pages
        QByteArray bytes = read_all(path);
        QVERIFY(bytes.size() > 8 * 4096);
        if (damage == "page") {
            for (int i = 2 * 4096; i < 3 * 4096; ++i)
                bytes[i] = char(QRandomGenerator::global()->bounded(256));
        } else {
            bytes.truncate(bytes.size() / 2);
        }
        write_all(path, bytes);
    }
    const QByteArray damaged = read_all(path);
    {
        ConversationStore store(path, "damaged");
        QVERIFY2(store.notice().contains("kept as"), qPrintable(store.notice()));
        QVERIFY(store.ok());
        const QStringList aside = QDir(dir).entryList({"conversations.sqlite.damaged-*"}, QDir::Files);
        QCOMPARE(aside.size(), 1);
        QCOMPARE(read_all(dir + "/" + aside[0]), damaged); // kept as it was, never deleted
        QVERIFY(store.notice().contains(aside[0]));
        const qint64 id = store.createConversation({}, "m.gguf");
        QVERIFY(store.appendMessage(id, "user", "after the damage"));
    }
    QCOMPARE(stored_messages(path), QStringList{"user:after the damage"});
}

void TestStorageFaults::readOnlyDatabaseFileKeepsMessages()
{
    REQUIRE_ROOT();
    const QString dir = m_dir.filePath("ro-file");
    QDir().mkpath(dir);
    const QString path = dir + "/conversations.sqlite";
    make_database(path, 2);
    Mounts mounts;
    QVERIFY(mounts.readOnly(path));
    ConversationStore store(path, "ro-file");
    // The previous conversation is still shown…
    const auto previous = store.latest();
    QVERIFY(previous);
    QCOMPARE(previous->messages.size(), 2);
    // …and what cannot be written is said, and kept.
    QVERIFY(!store.problem().isEmpty());
    QVERIFY(!store.appendMessage(previous->id, "user", "written while read-only"));
    QVERIFY(!store.appendMessage(previous->id, "assistant", "its reply"));
    QCOMPARE(store.unsavedCount(), 2);
    QVERIFY2(store.problem().contains("Not saved") && store.problem().contains("readonly"),
             qPrintable(store.problem()));
    QVERIFY2(store.problem().contains("2 changes are kept"), qPrintable(store.problem())); // not "change(s)"
    mounts.undo(path);
    QVERIFY(store.retry());
    QCOMPARE(store.problem(), QString());
    QCOMPARE(stored_messages(path).mid(2), (QStringList{"user:written while read-only", "assistant:its reply"}));
}

void TestStorageFaults::readOnlyFolderKeepsMessages()
{
    REQUIRE_ROOT();
    const QString dir = m_dir.filePath("ro-folder");
    QDir().mkpath(dir);
    const QString path = dir + "/conversations.sqlite";
    make_database(path, 2);
    Mounts mounts;
    QVERIFY(mounts.readOnly(dir));
    ConversationStore store(path, "ro-folder");
    QVERIFY(!store.problem().isEmpty());
    const qint64 id = store.createConversation({}, "m.gguf");
    QVERIFY(id < 0); // provisional until it is written
    QVERIFY(!store.appendMessage(id, "user", "question"));
    QVERIFY(!store.appendMessage(id, "assistant", "answer"));
    mounts.undo(dir);
    QVERIFY(store.retry());
    QCOMPARE(stored_messages(path), (QStringList{"user:question", "assistant:answer"}));
}

void TestStorageFaults::diskFullAtStart()
{
    REQUIRE_ROOT();
    const QString dir = m_dir.filePath("full-at-start");
    Mounts mounts;
    QVERIFY(mounts.tmpfs(dir, "256k"));
    fill(dir);
    const QString path = dir + "/conversations.sqlite";
    ConversationStore store(path, "full-at-start");
    QVERIFY(!store.ok());
    QVERIFY(!store.problem().isEmpty());
    const qint64 id = store.createConversation({}, "m.gguf");
    QVERIFY(!store.appendMessage(id, "user", "first question"));
    QVERIFY(!store.appendMessage(id, "assistant", "first answer"));
    QVERIFY2(store.problem().contains("Not saved"), qPrintable(store.problem()));
    QVERIFY(!store.retry()); // still full
    QFile::remove(dir + "/filler");
    QVERIFY(store.retry());
    QCOMPARE(stored_messages(path), (QStringList{"user:first question", "assistant:first answer"}));
}

void TestStorageFaults::diskFullMidSessionKeepsTheOrder()
{
    REQUIRE_ROOT();
    const QString dir = m_dir.filePath("full-mid-session");
    Mounts mounts;
    QVERIFY(mounts.tmpfs(dir, "1m"));
    const QString path = dir + "/conversations.sqlite";
    ConversationStore store(path, "full-mid");
    QVERIFY(store.ok());
    QSignalSpy status(&store, &ConversationStore::statusChanged);
    const qint64 id = store.createConversation({}, "m.gguf");
    QVERIFY(store.appendMessage(id, "user", "short question"));
    QVERIFY(store.appendMessage(id, "assistant", "short answer"));
    fill(dir);
    // A long user message does not fit; the short reply after it must not be stored without it.
    const QString long_message = "long question " + QString(200000, 'q');
    QVERIFY(!store.appendMessage(id, "user", long_message));
    QVERIFY(!store.appendMessage(id, "assistant", "ok"));
    QCOMPARE(store.unsavedCount(), 2);
    QVERIFY(status.count() >= 1);
    QCOMPARE(stored_messages(path), (QStringList{"user:short question", "assistant:short answer"}));
    QFile::remove(dir + "/filler");
    QVERIFY(store.retry());
    QCOMPARE(stored_messages(path), (QStringList{"user:short question", "assistant:short answer",
                                                 "user:" + long_message.left(40), "assistant:ok"}));
}

void TestStorageFaults::chatPanelSaysWhatIsNotSaved()
{
    REQUIRE_ROOT();
    REQUIRE_DEFAULT_MODEL(model);
    const QString dir = m_dir.filePath("chat-full");
    Mounts mounts;
    QVERIFY(mounts.tmpfs(dir, "1m"));
    const QString path = dir + "/conversations.sqlite";
    ConversationStore store(path, "chat-full");
    EngineController engine;
    ChatPanel chat(&engine, &store);
    chat.show();
    QCOMPARE(chat.storageNotice(), QString());
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(model), 2, 512);
    QVERIFY(loaded.wait(120000));
    auto s = chat.sampling();
    s.temperature = 0;
    s.max_tokens = 6;
    chat.setSampling(s);
    fill(dir);
    QSignalSpy finished(&chat, &ChatPanel::replyFinished);
    chat.send("The lighthouse keeper " + QString(120000, 'z').left(0) + "climbed the stairs and");
    QVERIFY(finished.wait(60000));
    QVERIFY2(chat.storageNotice().contains("Not saved"), qPrintable(chat.storageNotice()));
    QCOMPARE(chat.messageCount(), 2); // both turns still in the conversation on screen
    QFile::remove(dir + "/filler");
    QTRY_COMPARE_WITH_TIMEOUT(chat.storageNotice(), QString(), 15000); // the store's own retry
    const QStringList saved = stored_messages(path);
    QCOMPARE(saved.size(), 2);
    QVERIFY(saved[0].startsWith("user:The lighthouse keeper"));
    QVERIFY(saved[1].startsWith("assistant:"));
}

// The damaged-database notice reaches the chat panel, in plain text, with the file kept aside.
void TestStorageFaults::chatPanelNamesTheDamagedFile()
{
    const QString dir = m_dir.filePath("chat-damaged");
    QDir().mkpath(dir);
    const QString path = dir + "/conversations.sqlite";
    write_all(path, QByteArray("<b>not</b> a database at all, just text that is long enough to be a header") +
                        QByteArray(4096, 'x'));
    ConversationStore store(path, "chat-damaged");
    EngineController engine;
    ChatPanel chat(&engine, &store);
    QVERIFY2(chat.storageNotice().contains("was damaged") && chat.storageNotice().contains(".damaged-"),
             qPrintable(chat.storageNotice()));
    auto* label = chat.findChild<QLabel*>("storageNotice");
    QVERIFY(label && label->isVisibleTo(&chat));
    QCOMPARE(label->textFormat(), Qt::PlainText);
}

// The attention panel's SVG and PNG exports on a full disk: an error, and the old file stays.
void TestStorageFaults::attentionExportOnAFullDisk()
{
    REQUIRE_ROOT();
    REQUIRE_DEFAULT_MODEL(model);
    const QString dir = m_dir.filePath("attention-full");
    Mounts mounts;
    QVERIFY(mounts.tmpfs(dir, "64k"));
    EngineController engine;
    TokenSelection selection;
    AttentionPanel panel(&engine, &selection);
    panel.resize(900, 700);
    panel.show();
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(model), 2, 512);
    QVERIFY(loaded.wait(120000));
    panel.setPrompt("The river bank was muddy.");
    QSignalSpy captured(&panel, &AttentionPanel::captured);
    panel.run();
    QVERIFY(captured.wait(60000));
    for (const QString name : {"head.svg", "head.png"}) {
        const QString path = dir + "/" + name;
        write_all(path, "old picture\n");
        fill(dir);
        QString error;
        QVERIFY(!panel.exportImage(path, &error));
        QVERIFY2(error.contains("No space left on device"), qPrintable(error));
        QCOMPARE(read_all(path), QByteArray("old picture\n"));
        QFile::remove(dir + "/filler");
    }
    QCOMPARE(temp_files_in(dir), QStringList());
}

void TestStorageFaults::exportsOnAFullDiskFailAndKeepTheOldFile()
{
    REQUIRE_ROOT();
    const QString dir = m_dir.filePath("export-full");
    Mounts mounts;
    QVERIFY(mounts.tmpfs(dir, "256k"));
    const QString path = dir + "/tokens.csv";
    QString error;
    QVERIFY(save_atomically(path, "old export\n", &error));
    fill(dir);
    QVERIFY(!save_atomically(path, QByteArray(300000, 'n'), &error));
    QVERIFY2(error.contains("No space left on device") && error.contains(path), qPrintable(error));
    QCOMPARE(read_all(path), QByteArray("old export\n"));
    QCOMPARE(temp_files_in(dir), QStringList());
}

void TestStorageFaults::traceOnAFullDiskFails()
{
    REQUIRE_ROOT();
    REQUIRE_DEFAULT_MODEL(model);
    const QString dir = m_dir.filePath("trace-full");
    Mounts mounts;
    QVERIFY(mounts.tmpfs(dir, "64k"));
    const QString path = dir + "/trace.json";
    write_all(path, "{\"old\": true}\n");
    fill(dir);
    QProcess p;
    p.start(TOKENSCOPE_CLI_PATH, {"trace", QString::fromStdString(model), "-p", "The river bank", "-n", "24", "--json",
                                  path, "--attention", "all"});
    QVERIFY(p.waitForFinished(120000));
    const QString err = QString::fromUtf8(p.readAllStandardError()), out = QString::fromUtf8(p.readAllStandardOutput());
    QCOMPARE(p.exitCode(), 1);
    QVERIFY2(err.contains("No space left on device"), qPrintable(err));
    QVERIFY(!out.contains("wrote"));
    QCOMPARE(read_all(path), QByteArray("{\"old\": true}\n"));
    QCOMPARE(temp_files_in(dir), QStringList());
}

void TestStorageFaults::plantedSymlinksAreNotFollowed()
{
    const QString dir = m_dir.filePath("symlinks");
    QDir().mkpath(dir);
    const QString victim = dir + "/victim.txt";
    write_all(victim, "precious\n");
    // At the path itself: the link is replaced by the new file; its target is untouched.
    const QString path = dir + "/export.csv";
    QVERIFY(QFile::link(victim, path));
    QString error;
    QVERIFY2(save_atomically(path, "a,b\n", &error), qPrintable(error));
    QCOMPARE(read_all(victim), QByteArray("precious\n"));
    QVERIFY(!QFileInfo(path).isSymLink());
    QCOMPARE(read_all(path), QByteArray("a,b\n"));
    // At "path.tmp" (where writers used to stage their file): never opened.
    const QString other = dir + "/attention.svg";
    QVERIFY(QFile::link(victim, other + ".tmp"));
    QVERIFY(save_atomically(other, "<svg/>", &error));
    QCOMPARE(read_all(victim), QByteArray("precious\n"));
    // The CLI's trace too.
    REQUIRE_DEFAULT_MODEL(model);
    const QString trace = dir + "/trace.json";
    QVERIFY(QFile::link(victim, trace));
    QProcess p;
    p.start(TOKENSCOPE_CLI_PATH, {"trace", QString::fromStdString(model), "-p", "Hello", "-n", "2", "--json", trace});
    QVERIFY(p.waitForFinished(120000));
    QCOMPARE(p.exitCode(), 0);
    QCOMPARE(read_all(victim), QByteArray("precious\n"));
    QVERIFY(!QFileInfo(trace).isSymLink());
    QVERIFY(read_all(trace).contains("\"steps\""));
    // And the screenshot mode's picture.
    const QString shot = dir + "/shot.png";
    QVERIFY(QFile::link(victim, shot));
    QProcess app;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("HOME", m_dir.filePath("home-symlink"));
    env.insert("QT_QPA_PLATFORM", "offscreen");
    app.setProcessEnvironment(env);
    app.start(TOKENSCOPE_GUI_PATH, {"--screenshot", shot, "--panel", "tokenizer", "--model",
                                    QString::fromStdString(model), "--prompt", "Hello"});
    QVERIFY(app.waitForFinished(120000));
    QCOMPARE(app.exitCode(), 0);
    QCOMPARE(read_all(victim), QByteArray("precious\n"));
    QVERIFY(!QFileInfo(shot).isSymLink());
    QVERIFY(read_all(shot).startsWith("\x89PNG"));
}

// The screenshot mode used a fixed conversation database in the shared temporary directory; a link
// planted there must not be touched, and nothing is written there.
void TestStorageFaults::screenshotDatabaseIsPrivate()
{
    const QString tmp = m_dir.filePath("shared-tmp");
    QDir().mkpath(tmp);
    const QString victim = m_dir.filePath("victim.sqlite");
    write_all(victim, "not yours\n");
    QVERIFY(QFile::link(victim, tmp + "/tokenscope-screenshot.sqlite"));
    QProcess app;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("TMPDIR", tmp);
    env.insert("HOME", m_dir.filePath("home-shot"));
    env.insert("QT_QPA_PLATFORM", "offscreen");
    app.setProcessEnvironment(env);
    app.start(TOKENSCOPE_GUI_PATH,
              {"--screenshot", m_dir.filePath("x.png"), "--model", m_dir.filePath("missing.gguf")});
    QVERIFY(app.waitForFinished(60000));
    QCOMPARE(read_all(victim), QByteArray("not yours\n"));
    // Its private folder is gone with the run.
    QCOMPARE(QDir(tmp).entryList({"tokenscope-screenshot-*"}, QDir::Dirs), QStringList());
}

void TestStorageFaults::warningsReachTheLogAtOnce()
{
    const QString home = m_dir.filePath("home-log");
    QProcess app;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("HOME", home);
    env.remove("XDG_DATA_HOME");
    env.insert("QT_QPA_PLATFORM", "offscreen");
    app.setProcessEnvironment(env);
    // A model that cannot be loaded: the warning is logged, then the app waits on its message box.
    app.start(TOKENSCOPE_GUI_PATH, {"--model", m_dir.filePath("missing.gguf")});
    QVERIFY(app.waitForStarted());
    const QString log = home + "/.local/share/Tokenscope/Tokenscope/tokenscope.log";
    QTRY_VERIFY_WITH_TIMEOUT(read_all(log).contains("load failed"), 30000);
    QCOMPARE(app.state(), QProcess::Running); // still running: the line was flushed, not written at exit
    app.kill();
    app.waitForFinished();
}

QTEST_MAIN(TestStorageFaults)
#include "test_storage_faults.moc"
