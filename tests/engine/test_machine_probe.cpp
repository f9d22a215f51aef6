// SPDX-License-Identifier: GPL-3.0-or-later
// The machine probe: both kernel paths return positive, finite, plausible peaks (no timing
// thresholds beyond orders of magnitude), the scalar path is chosen on request and under
// TOKENSCOPE_SIMD=scalar (checked in a child process, since the SIMD level is read once).
#include "quant/vec_dot.h"
#include "util/machine_probe.h"

#include <QCoreApplication>
#include <QProcess>
#include <QTest>
#include <cmath>

using namespace engine;

namespace {

void check_plausible(const MachinePeaks& p, int threads)
{
    QCOMPARE(p.threads, threads);
    QVERIFY(std::isfinite(p.read_bytes_per_second) && p.read_bytes_per_second > 0.0);
    QVERIFY(std::isfinite(p.flops_per_second) && p.flops_per_second > 0.0);
    // 100 MB/s … 10 TB/s; 10 MFLOP/s … 100 TFLOP/s.
    QVERIFY2(p.read_bytes_per_second > 1e8 && p.read_bytes_per_second < 1e13,
             qPrintable(QString::number(p.read_bytes_per_second)));
    QVERIFY2(p.flops_per_second > 1e7 && p.flops_per_second < 1e14, qPrintable(QString::number(p.flops_per_second)));
    QVERIFY(p.probe_ms > 0.0);
}

} // namespace

class TestMachineProbe : public QObject {
    Q_OBJECT
private slots:
    void defaultPath();
    void scalarOnRequest();
    void scalarUnderEnvironment();
};

void TestMachineProbe::defaultPath()
{
    const MachinePeaks p = probe_machine(2, 0.1);
    check_plausible(p, 2);
    const bool scalar_env = qgetenv("TOKENSCOPE_SIMD") == "scalar";
    if (scalar_env || simd_level() == SimdLevel::Scalar)
        QCOMPARE(p.simd, std::string("scalar"));
    else
        QCOMPARE(p.simd, std::string("AVX2"));
    qInfo("%s: read %.2f GB/s, %.2f GFLOP/s on %d threads in %.0f ms", p.simd.c_str(), p.read_bytes_per_second / 1e9,
          p.flops_per_second / 1e9, p.threads, p.probe_ms);
}

void TestMachineProbe::scalarOnRequest()
{
    const MachinePeaks p = probe_machine(1, 0.1, true);
    check_plausible(p, 1);
    QCOMPARE(p.simd, std::string("scalar"));
    qInfo("scalar: read %.2f GB/s, %.2f GFLOP/s on 1 thread", p.read_bytes_per_second / 1e9, p.flops_per_second / 1e9);
}

void TestMachineProbe::scalarUnderEnvironment()
{
    // Run defaultPath in a child with TOKENSCOPE_SIMD=scalar: it asserts the scalar path there.
    QProcess child;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("TOKENSCOPE_SIMD", "scalar");
    child.setProcessEnvironment(env);
    child.setProcessChannelMode(QProcess::MergedChannels);
    child.start(QCoreApplication::applicationFilePath(), {"defaultPath"});
    QVERIFY(child.waitForStarted());
    QVERIFY(child.waitForFinished(120000));
    const QByteArray out = child.readAll();
    QVERIFY2(child.exitStatus() == QProcess::NormalExit && child.exitCode() == 0, out.constData());
    QVERIFY2(out.contains("scalar: read"), out.constData());
}

QTEST_GUILESS_MAIN(TestMachineProbe)
#include "test_machine_probe.moc"
