// SPDX-License-Identifier: GPL-3.0-or-later
// Choosing the compute backend in the app: the picker lists the CPU, auto and every Vulkan device;
// the default model loads on a Vulkan device (lavapipe in CI) and the stepper runs a step there,
// with the KV gauges naming the device; auto without a Vulkan GPU falls back to the CPU and says why.
#include "backend/vulkan/vulkan_backend.h"
#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "main_window.h"
#include "panels/stepper_panel.h"
#include "storage/conversation_store.h"
#include "test_paths.h"
#include "vulkan_test_support.h"

#include <QComboBox>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

using namespace tokenscope::ui;

class TestBackendChoice : public QObject {
    Q_OBJECT
private slots:
    void pickerListsTheDevices();
    void modelRunsOnVulkan();
    void autoFallsBackToTheCpuWithAReason();
};

void TestBackendChoice::pickerListsTheDevices()
{
    QTemporaryDir dir;
    ConversationStore store(dir.filePath("c.sqlite"));
    EngineController engine;
    MainWindow window(&engine, &store);
    auto* picker = window.findChild<QComboBox*>("backendPicker");
    QVERIFY(picker);
    QTRY_VERIFY(window.devicesListed()); // listed off the UI thread
    const auto devices = engine::list_vulkan_devices();
    QCOMPARE(picker->count(), 2 + int(devices.size()));
    QCOMPARE(picker->itemText(0), QString("CPU"));
    for (std::size_t i = 0; i < devices.size(); ++i)
        QVERIFY(picker->itemText(2 + int(i)).contains(QString::fromStdString(devices[i].name)));
}

void TestBackendChoice::modelRunsOnVulkan()
{
    REQUIRE_DEFAULT_MODEL(path);
    REQUIRE_VULKAN();
    EngineController engine;
    TokenSelection selection;
    StepperPanel stepper(&engine, &selection);
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(path), 2, 64, "vulkan", -1);
    QVERIFY(loaded.wait(300000));
    const auto summary = loaded.first().first().value<std::shared_ptr<const ModelSummary>>();
    QVERIFY2(summary->backend.startsWith("Vulkan"), qPrintable(summary->backend));
    QVERIFY(summary->backend_note.isEmpty());
    QSignalSpy kv(&engine, &EngineController::kvChanged);
    QSignalSpy state(&stepper, &StepperPanel::stateChanged);
    stepper.setPrompt("Hi");
    stepper.prefill();
    QVERIFY(state.wait(300000));
    QVERIFY2(stepper.state() && stepper.state()->action == "prefill", qPrintable(stepper.lastError()));
    state.clear();
    stepper.step();
    QVERIFY(state.wait(300000));
    QCOMPARE(stepper.state()->action, QString("step"));
    QCOMPARE(stepper.state()->steps, 1);
    const auto latest = [&] {
        return kv.isEmpty() ? nullptr : kv.last().first().value<std::shared_ptr<const KvSnapshot>>();
    };
    QTRY_VERIFY(latest() && latest()->tokens_cached == int(stepper.state()->tokens.size())); // the step's snapshot
    const auto snapshot = latest();
    QVERIFY2(!snapshot->device.isEmpty() && snapshot->device != "CPU", qPrintable(snapshot->device));
    QCOMPARE(snapshot->tokens_cached, int(stepper.state()->tokens.size()));
}

void TestBackendChoice::autoFallsBackToTheCpuWithAReason()
{
    REQUIRE_DEFAULT_MODEL(path);
    bool gpu = false;
    for (const auto& d : engine::list_vulkan_devices())
        gpu |= d.usable && (d.type == "discrete GPU" || d.type == "integrated GPU");
    EngineController engine;
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(path), 2, 64, "auto", -1);
    QVERIFY(loaded.wait(300000));
    const auto summary = loaded.first().first().value<std::shared_ptr<const ModelSummary>>();
    if (gpu) {
        QVERIFY2(summary->backend.startsWith("Vulkan"), qPrintable(summary->backend));
    } else {
        QVERIFY2(summary->backend.startsWith("CPU"), qPrintable(summary->backend));
        QVERIFY2(!summary->backend_note.isEmpty(), "auto without a GPU must say why it chose the CPU");
    }
}

QTEST_MAIN(TestBackendChoice)
#include "test_backend_choice.moc"
