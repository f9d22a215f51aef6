// SPDX-License-Identifier: GPL-3.0-or-later
// The architectures of users' models beyond the shipped two, end to end against llama.cpp: for each, a
// random-weight model with what sets the architecture apart (`make-test-model --arch A`, regenerated here
// byte for byte: its sha256 must be the one llama.cpp ran, recorded in tests/data/logits/archs/A.gguf):
//   phi3      fused Q/K/V and gate|up tensors, queries pre-scaled after RoPE
//   gemma2    attention and final logit soft-caps, alternating sliding window (64), post-norms
//   granite   embedding, residual, attention and logit multipliers
//   olmo2     no pre-norms, Q/K norms over the whole row, post-norms
//   smollm3   no RoPE on every fourth layer
//   mistral3  YaRN RoPE scaling and the query temperature past its original context (256)
// Prompts of 1, 3, 4, 5, 7, 8, 64 and 600 tokens (every batch path; the 600-token prompt crosses
// gemma2's window and mistral3's original context). Against the AVX2 build's fixtures the claim is its
// bits: the last position's logits equal llama.cpp's bit for bit and every 16-token greedy continuation
// is identical, on the path this CPU chooses (ctest runs the AVX2 path too: test_architectures_avx2).
#include "backend/backend.h"
#include "backend/backend_factory.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/forward_pass.h"
#include "fixture_agreement.h"
#include "model/test_model.h"
#include "quant/vec_dot.h"
#include "test_paths.h"
#include "util/error.h"
#include "util/glibc_tanhf.h"
#include "vulkan_test_support.h"

#include <QTemporaryDir>
#include <QTest>
#include <bit>
#include <cmath>

using namespace engine;
using namespace testsupport;

class TestArchitectures : public QObject {
    Q_OBJECT
private slots:
    void matchesLlamaCppBitForBit_data();
    void matchesLlamaCppBitForBit();
    void whatSetsEachApartIsRead_data();
    void whatSetsEachApartIsRead();
    void vulkanTakesEveryArchitecture();
    void glibcTanhfIsTheCLibrarys();
    void unknownArchitectureIsRefusedByName();
};

namespace {

const char* const kArchitectures[] = {"phi3", "gemma2", "granite", "olmo2", "smollm3", "mistral3"};

std::shared_ptr<const Model> arch_model(const QTemporaryDir& dir, const QString& arch)
{
    const auto fixture = gguf::GgufFile::open(data_dir() + "/logits/archs/" + arch.toStdString() + ".gguf");
    return fixture_model(dir, arch, make_test_model(arch.toStdString(), 1), *fixture);
}

} // namespace

void TestArchitectures::matchesLlamaCppBitForBit_data()
{
    QTest::addColumn<QString>("arch");
    for (const char* a : kArchitectures)
        QTest::newRow(a) << QString(a);
}

void TestArchitectures::matchesLlamaCppBitForBit()
{
    QFETCH(QString, arch);
    const auto fixture = gguf::GgufFile::open(data_dir() + "/logits/archs/" + arch.toStdString() + ".gguf");
    QTemporaryDir dir;
    const auto model = arch_model(dir, arch);
    QVERIFY2(model, "the generated model is not the one llama.cpp ran");
    QCOMPARE(QString::fromStdString(model->config().architecture), arch);
    require_llama_cpp_agreement(model, *fixture, arch);
}

void TestArchitectures::whatSetsEachApartIsRead_data()
{
    QTest::addColumn<QString>("arch");
    for (const char* a : kArchitectures)
        QTest::newRow(a) << QString(a);
}

// What the fixtures test is really in the models: without it the bit-equality above could pass by a
// generator that left the difference out.
void TestArchitectures::whatSetsEachApartIsRead()
{
    QFETCH(QString, arch);
    QTemporaryDir dir;
    const auto model = arch_model(dir, arch);
    QVERIFY(model);
    const ModelConfig& c = model->config();
    const ArchitectureTraits& t = model->traits();
    const LayerWeights& L0 = model->weights().layers[0];
    if (arch == "phi3") {
        QVERIFY(L0.attn_q.is_view() && L0.attn_k.is_view() && L0.attn_v.is_view());
        QCOMPARE(L0.attn_k.row0, int64_t(L0.attn_q.rows()));
        QCOMPARE(L0.ffn_up.row0, int64_t(c.n_ff[0])); // the gate first, then up
        QVERIFY(t.query_prescaled && t.rope_neox);
    } else if (arch == "gemma2") {
        QCOMPARE(c.attn_logit_softcap.value_or(0), 50.0f);
        QCOMPARE(c.final_logit_softcap.value_or(0), 30.0f);
        QVERIFY(c.layer_is_swa[0] && !c.layer_is_swa[1] && c.layer_is_swa[2]);
        QVERIFY(model->weights().tied_output);
        // the attention captures carry the cap, so that the panel explains the weights it shows
        auto backend = make_cpu_backend(model, {.threads = 1, .n_ctx = 64});
        CaptureRequest capture;
        capture.heads = {{0, 0}};
        const std::vector<TokenId> tokens{5, 6, 7};
        ForwardRequest request;
        request.tokens = tokens;
        request.capture = &capture;
        const ForwardResult r = backend->forward(request);
        QVERIFY(r.captures && r.captures->attention.size() == 1);
        QCOMPARE(r.captures->attention[0].softcap, 50.0f);
    } else if (arch == "granite") {
        QCOMPARE(c.embedding_multiplier.value_or(0), 12.0f);
        QCOMPARE(c.residual_multiplier.value_or(0), 0.22f);
        QCOMPARE(c.attention_scale.value_or(0), 0.015625f);
        QCOMPARE(c.logit_scale.value_or(0), 6.0f);
        QCOMPARE(query_scaling(*model).attention, 0.015625f);
    } else if (arch == "olmo2") {
        QVERIFY(!t.pre_norms && t.qk_norm_whole_row && t.post_norms);
        QVERIFY(!L0.attn_norm && !L0.ffn_norm);
        QCOMPARE(L0.attn_q_norm.cols(), int64_t(c.n_head[0]) * c.head_dim_k);
    } else if (arch == "smollm3") {
        QVERIFY(model->layer_has_rope(0) && model->layer_has_rope(2) && !model->layer_has_rope(3));
    } else if (arch == "mistral3") {
        QCOMPARE(c.rope_ext_factor, 1.0f);
        QCOMPARE(c.rope_n_ctx_orig, 256u);
        QCOMPARE(c.attn_temperature_scale.value_or(0), 0.1f);
        QVERIFY(c.rope_attn_factor != 1.0f); // YaRN's magnitude correction, less its cancelled part
        QCOMPARE(rope_query_temperature(0.1f, 256, 255), 1.0f);
        QVERIFY(rope_query_temperature(0.1f, 256, 256) > 1.0f);
    }
}

// Vulkan runs every architecture (their logits against the CPU's: test_vulkan_parity; CUDA's on the
// emulated device: test_cuda_backend): asked for it, the factory gives it, with no fallback note.
void TestArchitectures::vulkanTakesEveryArchitecture()
{
    if (!usable_vulkan_device())
        QSKIP("no usable Vulkan device here");
    QTemporaryDir dir;
    for (const char* a : kArchitectures) {
        const auto model = arch_model(dir, a);
        QVERIFY(model);
        std::string note;
        const auto backend = make_backend(BackendKind::Vulkan, model, 256, 1, &note);
        QVERIFY2(note.empty(), note.c_str());
        QVERIFY2(QString::fromStdString(backend->name()).startsWith("Vulkan"), backend->name().c_str());
    }
}

// gemma2's soft-cap on the GPUs goes through util/glibc_tanhf.h (and its GLSL twin): it must be this
// machine's C library, which the CPU backend (and llama.cpp) call. Every 211th float of the whole range
// here (20 million); bench/glibc_tanhf_exhaustive.sh checks all 2^32.
void TestArchitectures::glibcTanhfIsTheCLibrarys()
{
    uint64_t differing = 0, checked = 0;
    QString first;
    for (uint64_t u = 0; u < 0x100000000ull; u += 211) {
        const float x = std::bit_cast<float>(uint32_t(u));
        const float ours = glibc_tanhf(x), libc = std::tanh(x);
        ++checked;
        if (std::bit_cast<uint32_t>(ours) != std::bit_cast<uint32_t>(libc) && !(std::isnan(ours) && std::isnan(libc))) {
            if (differing++ == 0)
                first = QString("tanhf(%1): %2, the C library %3")
                            .arg(double(x), 0, 'a')
                            .arg(double(ours), 0, 'a')
                            .arg(double(libc), 0, 'a');
        }
    }
    qInfo("glibc_tanhf: %llu floats checked, %llu differ", (unsigned long long)checked, (unsigned long long)differing);
    QVERIFY2(differing == 0, qPrintable(first));
}

void TestArchitectures::unknownArchitectureIsRefusedByName()
{
    QTemporaryDir dir;
    auto w = make_test_model("llama", 1); // llama.* keys: the architecture is refused before any is read
    w.set_string("general.architecture", "qwen35");
    const std::string path = dir.filePath("qwen35.gguf").toStdString();
    w.write(path);
    try {
        Model::load(path);
        QFAIL("an unknown architecture loaded");
    } catch (const UnsupportedError& e) {
        const QString what = e.what();
        QVERIFY2(what.contains("'qwen35'") && what.contains("phi3") && what.contains("gemma2"), e.what());
    }
}

QTEST_GUILESS_MAIN(TestArchitectures)
#include "test_architectures.moc"
