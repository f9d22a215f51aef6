// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A real llama-server for the remote suites: llama.cpp's server built by scripts/setup.sh test
// (tests/reference/build_llama_cpp.sh, named by $TOKENSCOPE_LLAMA_SERVER), started on 127.0.0.1 on a
// free port with the flags the fixtures use, and stopped (or killed) by the test.

#include <QElapsedTimer>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QProcess>
#include <QTcpServer>
#include <QTest>
#include <memory>

namespace testsupport {

class LlamaServerProcess {
public:
    // Starts `binary` with `model`; false (and why in error()) when it does not become ready.
    bool start(const QString& binary, const QString& model, const QStringList& extra = {})
    {
        QTcpServer probe;
        if (!probe.listen(QHostAddress::LocalHost, 0))
            return fail("no free port on 127.0.0.1");
        m_port = probe.serverPort();
        probe.close();
        m_process = std::make_unique<QProcess>();
        m_process->setProcessChannelMode(QProcess::MergedChannels);
        QStringList args{"-m",  model,  "--host", "127.0.0.1", "--port",   QString::number(m_port),
                         "-fa", "off",  "-b",     "2048",      "-ub",      "2048",
                         "-c",  "4096", "-np",    "1",         "--metrics"};
        args += extra;
        m_process->start(binary, args);
        if (!m_process->waitForStarted(10000))
            return fail("llama-server did not start: " + m_process->errorString());
        QNetworkAccessManager net;
        QElapsedTimer clock;
        clock.start();
        while (clock.elapsed() < 180000) {
            if (m_process->state() != QProcess::Running)
                return fail("llama-server exited: " + QString::fromUtf8(m_process->readAll().right(2000)));
            std::unique_ptr<QNetworkReply> r(net.get(QNetworkRequest(QUrl(url() + "/health"))));
            if (QTest::qWaitFor([&] { return r->isFinished(); }, 5000) &&
                r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt() == 200)
                return true;
            QTest::qWait(200);
        }
        return fail("llama-server was not ready after 180 s");
    }
    QString url() const { return QString("http://127.0.0.1:%1").arg(m_port); }
    quint16 port() const { return m_port; }
    QString error() const { return m_error; }
    // Ends it at once (SIGKILL): what a crashed or killed server looks like to a client.
    void kill()
    {
        if (m_process && m_process->state() != QProcess::NotRunning) {
            m_process->kill();
            m_process->waitForFinished(10000);
        }
    }
    void stop()
    {
        if (m_process && m_process->state() != QProcess::NotRunning) {
            m_process->terminate();
            if (!m_process->waitForFinished(10000))
                kill();
        }
    }
    ~LlamaServerProcess() { stop(); }

private:
    bool fail(const QString& why)
    {
        m_error = why;
        stop();
        return false;
    }
    std::unique_ptr<QProcess> m_process;
    quint16 m_port = 0;
    QString m_error;
};

} // namespace testsupport
