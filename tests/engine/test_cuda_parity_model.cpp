// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA backend against the CPU backend on the two real models (backend_parity.h: logits, greedy
// continuations, every head's attention, the residual stream and logit lens, KV accounting and
// read-back), on the emulated device: it runs every kernel's whole grid on the host, so each model
// gets one short prompt. The kernels follow the CPU's summation orders, so the emulated device must
// give the CPU's bits; on a GPU (the "device" rows, skipped without one) the tolerance criteria hold.
// Heavy: labelled "model".
#include "backend/cuda/cuda_backend.h"
#include "backend_parity.h"
#include "model/model.h"
#include "test_paths.h"

#include <QTest>

using namespace engine;

class TestCudaParityModel : public QObject {
    Q_OBJECT
private slots:
    void realModels_data();
    void realModels();
};

void TestCudaParityModel::realModels_data()
{
    QTest::addColumn<bool>("chat");
    QTest::addColumn<bool>("device");
    for (const bool device : {false, true}) {
        QTest::addRow("default model, %s", device ? "device" : "emulated") << false << device;
        QTest::addRow("chat model, %s", device ? "device" : "emulated") << true << device;
    }
}

void TestCudaParityModel::realModels()
{
    QFETCH(bool, chat);
    QFETCH(bool, device);
    if (device) {
        const CudaDeviceListing listing = list_cuda_devices();
        if (listing.devices.empty())
            QSKIP(qPrintable("no CUDA device: " + QString::fromStdString(listing.why_unavailable)));
    }
    REQUIRE_SHIPPED_MODEL(path, chat);
    const auto model = Model::load(path);
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 256});
    auto cuda = make_cuda_backend(model, {.n_ctx = 256, .emulate = !device});
    const auto tokens = model->tokenizer().encode_ids(
        chat ? "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
             : "The capital of France is Paris. The capital of Germany is");
    QVERIFY(tokens.size() <= 32);
    testsupport::ParityReport r;
    testsupport::run_parity(*cpu, *cuda, tokens, device ? 32 : 12, r,
                            {.min_pearson = device ? 0.999 : 0.9999, .attention = device ? 1e-3 : 0.0});
    qInfo("%s, %zu prompt tokens: logits Pearson ≥ %.7f, max |Δ| %.3g; greedy %d/%d steps identical%s; attention "
          "weights max |Δ| %.3g",
          cuda->name().c_str(), tokens.size(), r.min_pearson, r.max_abs_diff, r.greedy_matched, r.greedy_steps,
          r.diverged_at_tie ? " (then a near-tie on the CPU)" : "", r.max_attention_diff);
    if (!device) {
        QCOMPARE(r.max_abs_diff, 0.0);
        QCOMPARE(r.max_attention_diff, 0.0);
        QCOMPARE(r.greedy_matched, r.greedy_steps);
    }
}

QTEST_GUILESS_MAIN(TestCudaParityModel)
#include "test_cuda_parity_model.moc"
