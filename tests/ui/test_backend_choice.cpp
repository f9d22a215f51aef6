// SPDX-License-Identifier: GPL-3.0-or-later
// Choosing the compute backend in the app: the picker lists the CPU, auto and every Vulkan device;
// the default model loads on a Vulkan device (lavapipe in CI) and the stepper runs a step there,
// with the KV gauges naming the device; auto without a CUDA device or a Vulkan GPU falls back to the
// CPU and says why.
#include "backend/backend_factory.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/vulkan/vulkan_backend.h"
#include "bridge/engine_controller.h"
#include "bridge/inspection_client.h"
#include "bridge/token_selection.h"
#include "main_window.h"
#include "panels/stepper_panel.h"
#include "storage/conversation_store.h"
#include "test_paths.h"
#include "vulkan_test_support.h"

#include <QComboBox>
#include <QSignalSpy>
#include <QStandardItemModel>
#include <QTemporaryDir>
#include <QTest>

using namespace tokenscope::ui;

class TestBackendChoice : public QObject {
    Q_OBJECT
private slots:
    void pickerListsTheDevices();
    void modelRunsOnVulkan();
    void autoFallsBackToTheCpuWithAReason();
    void exactChoiceLoadsTheExactArithmetic();
    void deterministicChoiceIsSaidAndKept();
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
    const auto cuda = engine::list_cuda_devices();
    // CUDA devices first (or one greyed-out entry saying why there is none), then each Vulkan device
    // in the default f32 arithmetic, and again ("Vulkan exact: …") where it has 64-bit floats
    int expected = 4 + std::max<int>(1, int(cuda.devices.size()));
    for (const auto& d : devices)
        expected += d.usable && d.float64 ? 2 : 1;
    QCOMPARE(picker->count(), expected);
    QCOMPARE(picker->itemText(0), QString("CPU"));
    // the CPU once more in llama.cpp's plain (--no-repack) order
    QCOMPARE(picker->itemText(1), QString("CPU, plain order"));
    QCOMPARE(picker->itemData(1).toStringList().value(0), QString("cpu-plain"));
    QCOMPARE(engine::parse_backend_choice("cpu-plain")->cpu_order, engine::WeightOrder::Plain);
    QCOMPARE(engine::parse_backend_choice("cpu")->cpu_order, engine::WeightOrder::LlamaCppDefault);
    // and in deterministic (batch-invariant) mode
    QCOMPARE(picker->itemText(2), QString("CPU, deterministic"));
    QCOMPARE(picker->itemData(2).toStringList().value(0), QString("cpu-deterministic"));
    QVERIFY(engine::parse_backend_choice("cpu-deterministic")->deterministic);
    QVERIFY(!engine::parse_backend_choice("cpu")->deterministic);
    int item = 4;
    auto* items = qobject_cast<QStandardItemModel*>(picker->model());
    QVERIFY(items);
    if (cuda.devices.empty()) {
        QCOMPARE(picker->itemText(item), QString("CUDA: unavailable"));
        QVERIFY(!items->item(item)->isEnabled());
        QCOMPARE(picker->itemData(item, Qt::ToolTipRole).toString(), QString::fromStdString(cuda.why_unavailable));
        ++item;
    }
    for (const auto& d : cuda.devices) {
        QCOMPARE(picker->itemText(item), "CUDA: " + QString::fromStdString(d.name));
        QCOMPARE(picker->itemData(item).toStringList(), (QStringList{"cuda", QString::number(d.index)}));
        ++item;
    }
    for (const auto& d : devices) {
        QVERIFY(picker->itemText(item).contains(QString::fromStdString(d.name)));
        QCOMPARE(picker->itemData(item).toStringList().value(0), QString("vulkan"));
        ++item;
        if (d.usable && d.float64) {
            QVERIFY(picker->itemText(item).startsWith("Vulkan exact: "));
            QCOMPARE(picker->itemData(item).toStringList().value(0), QString("vulkan-exact"));
            ++item;
        }
    }
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
    QVERIFY2(summary->backend.startsWith("Vulkan") && summary->backend.endsWith(", f32)"),
             qPrintable(summary->backend)); // the default arithmetic
    QVERIFY(summary->backend_note.isEmpty());
    QSignalSpy kv(&engine.inspection(), &InspectionClient::kvChanged);
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
    // CUDA first, then a Vulkan GPU, then the CPU with the reasons (CUDA's among them)
    const auto cuda = engine::list_cuda_devices();
    if (!cuda.devices.empty()) {
        QVERIFY2(summary->backend.startsWith("CUDA"), qPrintable(summary->backend));
    } else if (gpu) {
        QVERIFY2(summary->backend.startsWith("Vulkan"), qPrintable(summary->backend));
    } else {
        QVERIFY2(summary->backend.startsWith("CPU"), qPrintable(summary->backend));
        QVERIFY2(summary->backend_note.contains(QString::fromStdString(cuda.why_unavailable)),
                 qPrintable("auto without a GPU must say why it chose the CPU: " + summary->backend_note));
    }
}

// The picker's "…, exact" entry: the same device with the 64-bit shaders.
void TestBackendChoice::exactChoiceLoadsTheExactArithmetic()
{
    REQUIRE_DEFAULT_MODEL(path);
    REQUIRE_VULKAN();
    bool float64 = false;
    for (const auto& d : engine::list_vulkan_devices())
        float64 |= d.usable && d.float64;
    if (!float64)
        QSKIP("no Vulkan device here has 64-bit floats: the exact arithmetic cannot be offered");
    EngineController engine;
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(path), 2, 64, "vulkan-exact", -1);
    QVERIFY(loaded.wait(300000));
    const auto summary = loaded.first().first().value<std::shared_ptr<const ModelSummary>>();
    QVERIFY2(summary->backend.startsWith("Vulkan") && summary->backend.endsWith(", exact)"),
             qPrintable(summary->backend));
    QVERIFY(summary->backend_note.isEmpty());
}

// "CPU, deterministic" loads the model on the CPU with its sessions batch-invariant (what that gives
// is test_batch_invariance's), and the model bar says so; the plain CPU choice does not.
void TestBackendChoice::deterministicChoiceIsSaidAndKept()
{
    REQUIRE_DEFAULT_MODEL(path);
    EngineController engine;
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(path), 2, 256, "cpu-deterministic", -1);
    QVERIFY(loaded.wait(300000));
    const auto summary = loaded.first().first().value<std::shared_ptr<const ModelSummary>>();
    QVERIFY2(summary->backend.startsWith("CPU") && summary->backend.endsWith(", deterministic"),
             qPrintable(summary->backend));
    QVERIFY(summary->backend_note.isEmpty());
    engine.loadModel(QString::fromStdString(path), 2, 256, "cpu", -1);
    QVERIFY(loaded.wait(300000));
    QVERIFY(!loaded.last().first().value<std::shared_ptr<const ModelSummary>>()->backend.contains("deterministic"));
}

QTEST_MAIN(TestBackendChoice)
#include "test_backend_choice.moc"
