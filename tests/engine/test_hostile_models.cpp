// SPDX-License-Identifier: GPL-3.0-or-later
// Models that parse fine and carry absurd hyperparameters, written by the test from the random-weight
// generator — each hyperparameter set to 0, 1, an odd size, a huge value, NaN/Inf, mismatched against
// its tensors; per-layer arrays too short, too long or changing; corrupt norms and scales; special
// tokens outside the vocabulary — each loaded and run for a prompt on the CPU backend (and on Vulkan
// where the build has it): a clean engine::Error naming the problem, or a finite result. Never a
// crash: the suite also runs under AddressSanitizer and UndefinedBehaviorSanitizer (build/sanitize),
// where any out-of-bounds access or undefined arithmetic fails it.
#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/test_model.h"
#include "session/session.h"
#include "util/error.h"
#ifdef TOKENSCOPE_HAVE_VULKAN
#include "backend/vulkan/vulkan_backend.h"
#endif

#include <QFile>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>

using namespace engine;

namespace {

using Mutation = std::function<void(gguf::GgufWriter&)>;

struct Case {
    std::string name;
    std::string arch = "llama";
    TestModelShape shape; // any field set: F32 weights of that shape
    bool shaped = false;
    Mutation mutate;    // metadata changes after generation
    std::string expect; // a clean error containing this text; empty: must run and stay finite
    std::function<void(const std::string& path)> patch; // byte edits of the written file
    uint32_t n_ctx = 256;
};

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// Overwrites `count` floats of a tensor in a written F32 model with `value`.
void patch_floats(const std::string& path, const std::string& tensor, float value, uint64_t first = 0,
                  uint64_t count = 1)
{
    uint64_t at = 0;
    {
        const auto file = gguf::GgufFile::open(path);
        const gguf::TensorInfo* t = file->find_tensor(tensor);
        QVERIFY2(t, tensor.c_str());
        QVERIFY(t->type.type == GgmlType::F32);
        at = file->data_offset() + t->offset + first * 4;
    }
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(at));
    for (uint64_t i = 0; i < count; ++i)
        f.write(reinterpret_cast<const char*>(&value), 4);
}

std::vector<Case> hostile_cases()
{
    std::vector<Case> cases;
    const auto meta = [](const std::string& name, Mutation m, const std::string& expect) {
        Case c;
        c.name = name;
        c.mutate = std::move(m);
        c.expect = expect;
        return c;
    };
    const auto shaped = [](const std::string& name, TestModelShape s, const std::string& expect) {
        Case c;
        c.name = name;
        c.shape = s;
        c.shaped = true;
        c.expect = expect;
        return c;
    };
    // Head dimensions the SIMD kernels do not take (the old heap overflow in attention_row_avx2), with
    // tensors that match them: refused by name.
    for (uint32_t d : {2u, 4u, 6u, 12u, 20u, 36u, 100u})
        cases.push_back(shaped("head_dim " + std::to_string(d),
                               {.n_embd = 64, .n_head = 4, .n_head_kv = 2, .head_dim = d, .n_ff = 96},
                               "attention.key_length"));
    // Shapes that are unusual but valid compute, finitely.
    cases.push_back(shaped("head_dim 8, n_embd 40, n_ff 72",
                           {.n_embd = 40, .n_head = 5, .n_head_kv = 1, .head_dim = 8, .n_ff = 72}, ""));
    cases.push_back(shaped("head_dim 24, prime widths",
                           {.n_layer = 3, .n_embd = 37, .n_head = 3, .n_head_kv = 3, .head_dim = 24, .n_ff = 53}, ""));
    cases.push_back(shaped("one head, one layer, width 1",
                           {.n_layer = 1, .n_embd = 1, .n_head = 1, .n_head_kv = 1, .head_dim = 8, .n_ff = 1}, ""));
    // Counts.
    cases.push_back(meta(
        "head_count 0", [](auto& w) { w.set_u32("llama.attention.head_count", 0); }, "attention.head_count"));
    cases.push_back(meta(
        "head_count_kv 0", [](auto& w) { w.set_u32("llama.attention.head_count_kv", 0); }, "attention.head_count_kv"));
    cases.push_back(meta(
        "head_count_kv 3 of 4", [](auto& w) { w.set_u32("llama.attention.head_count_kv", 3); },
        "attention.head_count_kv"));
    cases.push_back(meta(
        "head_count_kv above head_count", [](auto& w) { w.set_u32("llama.attention.head_count_kv", 8); },
        "attention.head_count_kv"));
    cases.push_back(meta(
        "head_count huge", [](auto& w) { w.set_u32("llama.attention.head_count", 0xFFFFFFFFu); },
        "attention.head_count"));
    cases.push_back(meta(
        "head counts growing by layer",
        [](auto& w) {
            const uint32_t heads[] = {4, 4, 8, 8};
            w.set_u32_array("llama.attention.head_count", heads);
        },
        "attention.head_count"));
    cases.push_back(meta(
        "KV heads growing by layer",
        [](auto& w) {
            const uint32_t heads[] = {2, 2, 4, 4};
            w.set_u32_array("llama.attention.head_count_kv", heads);
        },
        "attention.head_count_kv"));
    cases.push_back(meta(
        "per-layer array too short",
        [](auto& w) {
            const uint32_t heads[] = {4, 4};
            w.set_u32_array("llama.attention.head_count", heads);
        },
        "attention.head_count"));
    cases.push_back(meta(
        "per-layer array too long",
        [](auto& w) {
            const uint32_t ff[] = {512, 512, 512, 512, 512, 512};
            w.set_u32_array("llama.feed_forward_length", ff);
        },
        "feed_forward_length"));
    cases.push_back(meta(
        "embedding_length 0", [](auto& w) { w.set_u32("llama.embedding_length", 0); }, "embedding_length"));
    cases.push_back(meta(
        "embedding_length huge", [](auto& w) { w.set_u32("llama.embedding_length", 0x7FFFFFFFu); },
        "embedding_length"));
    cases.push_back(meta(
        "feed_forward_length 0", [](auto& w) { w.set_u32("llama.feed_forward_length", 0); }, "feed_forward_length"));
    cases.push_back(meta(
        "feed_forward_length mismatched", [](auto& w) { w.set_u32("llama.feed_forward_length", 513); },
        "ffn_gate.weight"));
    cases.push_back(meta(
        "block_count 0", [](auto& w) { w.set_u32("llama.block_count", 0); }, "block_count"));
    cases.push_back(meta(
        "block_count huge", [](auto& w) { w.set_u32("llama.block_count", 1000000000u); }, "block_count"));
    cases.push_back(meta(
        "block_count above the tensors", [](auto& w) { w.set_u32("llama.block_count", 5); }, "blk.4"));
    cases.push_back(meta(
        "key and value length mismatched with the tensors",
        [](auto& w) {
            w.set_u32("llama.attention.key_length", 32);
            w.set_u32("llama.attention.value_length", 32);
            w.set_u32("llama.rope.dimension_count", 32);
        },
        "attn_q.weight"));
    cases.push_back(meta(
        "value_length differs", [](auto& w) { w.set_u32("llama.attention.value_length", 32); }, "value_length"));
    cases.push_back(meta(
        "rope dimension odd", [](auto& w) { w.set_u32("llama.rope.dimension_count", 63); }, "rope.dimension_count"));
    cases.push_back(meta(
        "rope dimension above head_dim", [](auto& w) { w.set_u32("llama.rope.dimension_count", 128); },
        "rope.dimension_count"));
    // Constants.
    for (float bad : {kNaN, kInf, -1.0f, 0.0f, 2.0f})
        cases.push_back(meta(
            "norm epsilon " + std::to_string(bad),
            [bad](auto& w) { w.set_f32("llama.attention.layer_norm_rms_epsilon", bad); }, "layer_norm_rms_epsilon"));
    for (float bad : {kNaN, kInf, -5.0f, 0.0f})
        cases.push_back(meta(
            "rope base " + std::to_string(bad), [bad](auto& w) { w.set_f32("llama.rope.freq_base", bad); },
            "rope.freq_base"));
    cases.push_back(meta(
        "rope scaling factor -1", [](auto& w) { w.set_f32("llama.rope.scaling.factor", -1.0f); },
        "rope.scaling.factor"));
    // RoPE frequency factors: too short, zero, NaN.
    cases.push_back(meta(
        "rope_freqs too short",
        [](auto& w) {
            std::vector<std::byte> data(4 * 8);
            const float one = 1.0f;
            for (int i = 0; i < 8; ++i)
                std::memcpy(data.data() + 4 * i, &one, 4);
            const uint64_t dims[] = {8};
            w.add_tensor("rope_freqs.weight", GgmlType::F32, dims, std::move(data));
        },
        "rope_freqs.weight"));
    for (float bad : {0.0f, kNaN, -2.0f}) {
        cases.push_back(meta(
            "rope_freqs holding " + std::to_string(bad),
            [bad](auto& w) {
                std::vector<std::byte> data(4 * 32);
                for (int i = 0; i < 32; ++i) {
                    const float v = i == 5 ? bad : 1.0f;
                    std::memcpy(data.data() + 4 * i, &v, 4);
                }
                const uint64_t dims[] = {32};
                w.add_tensor("rope_freqs.weight", GgmlType::F32, dims, std::move(data));
            },
            "rope_freqs.weight"));
    }
    // Vocabulary and special tokens.
    cases.push_back(meta(
        "vocab_size beyond the embedding", [](auto& w) { w.set_u32("llama.vocab_size", 100000); },
        "token_embd.weight"));
    for (const char* key :
         {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"}) {
        cases.push_back(meta(
            std::string(key) + " out of range", [key](auto& w) { w.set_u32(key, 99999999u); }, key));
        cases.push_back(meta(
            std::string(key) + " negative", [key](auto& w) { w.set_i32(key, -7); }, key));
    }
    // A metadata string of 17 MiB (the limit is 16): refused before anything copies it.
    cases.push_back(meta(
        "general.name of 17 MiB", [](auto& w) { w.set_string("general.name", std::string(17u << 20, 'n')); },
        "general.name"));
    // Sliding windows on the gemma3 test model: 0 with local layers, and huge.
    {
        Case c = meta(
            "sliding_window huge", [](auto& w) { w.set_u32("gemma3.attention.sliding_window", 0xFFFFFFFFu); }, "");
        c.arch = "gemma3";
        cases.push_back(c);
        Case d = meta(
            "soft-cap NaN", [](auto& w) { w.set_f32("gemma3.final_logit_softcapping", kNaN); },
            "final_logit_softcapping");
        d.arch = "gemma3";
        cases.push_back(d);
    }
    // The architectures' own keys (gemma2, granite, mistral3; llama for YaRN): malformed values are
    // refused by name, never turned into a poisoned pass.
    const auto on = [&](const std::string& arch, const std::string& name, Mutation m, const std::string& expect) {
        Case c = meta(name, std::move(m), expect);
        c.arch = arch;
        cases.push_back(c);
    };
    on(
        "gemma2", "gemma2 sliding_window_pattern one entry short",
        [](auto& w) {
            const std::byte flags[] = {std::byte{1}, std::byte{0}, std::byte{1}}; // 3 flags for 4 layers
            w.set_packed_array("gemma2.attention.sliding_window_pattern", gguf::ValueType::Bool, 3, flags);
        },
        "sliding_window_pattern");
    on(
        "gemma2", "gemma2 sliding_window_pattern of floats", // integers are flags, as llama.cpp reads them
        [](auto& w) {
            const float flags[] = {1.0f, 0.0f, 1.0f, 0.0f};
            w.set_f32_array("gemma2.attention.sliding_window_pattern", flags);
        },
        "sliding_window_pattern");
    for (float bad : {kNaN, -50.0f})
        on(
            "gemma2", "gemma2 attention soft-cap " + std::to_string(bad),
            [bad](auto& w) { w.set_f32("gemma2.attn_logit_softcapping", bad); }, "attn_logit_softcapping");
    on(
        "granite", "granite without logit_scale", [](auto& w) { w.remove("granite.logit_scale"); }, "logit_scale");
    for (const char* key : {"embedding_scale", "residual_scale", "logit_scale", "attention.scale"})
        for (float bad : {kNaN, kInf, -2.0f})
            on(
                "granite", std::string("granite ") + key + " " + std::to_string(bad),
                [key, bad](auto& w) { w.set_f32(std::string("granite.") + key, bad); }, key);
    on(
        "mistral3", "mistral3 temperature with original context 0",
        [](auto& w) {
            w.set_f32("mistral3.attention.temperature_scale", 0.1f);
            w.set_u32("mistral3.rope.scaling.original_context_length", 0);
        },
        "original_context_length");
    on(
        "mistral3", "mistral3 temperature NaN",
        [](auto& w) { w.set_f32("mistral3.attention.temperature_scale", kNaN); }, "temperature_scale");
    on(
        "llama", "YaRN with original context 0",
        [](auto& w) {
            w.set_string("llama.rope.scaling.type", "yarn");
            w.set_f32("llama.rope.scaling.factor", 4.0f);
            w.set_u32("llama.rope.scaling.original_context_length", 0);
        },
        "original_context_length");
    for (const char* key : {"rope.scaling.attn_factor", "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow"})
        on(
            "llama", std::string("YaRN ") + key + " NaN",
            [key](auto& w) {
                w.set_string("llama.rope.scaling.type", "yarn");
                w.set_f32("llama.rope.scaling.factor", 4.0f);
                w.set_f32(std::string("llama.") + key, kNaN);
            },
            key);
    // Corrupt weights: NaN in a norm (found at load), Inf in a matrix (found at the first pass,
    // naming the layer).
    {
        Case c = shaped("NaN in a norm weight", {.n_embd = 64, .n_head = 4, .n_head_kv = 2, .head_dim = 16, .n_ff = 96},
                        "blk.1.attn_norm.weight");
        c.patch = [](const std::string& path) { patch_floats(path, "blk.1.attn_norm.weight", kNaN, 3); };
        cases.push_back(c);
        Case d =
            shaped("Inf in a small matrix", {.n_embd = 64, .n_head = 4, .n_head_kv = 2, .head_dim = 16, .n_ff = 96},
                   "blk.2.ffn_down.weight");
        d.patch = [](const std::string& path) { patch_floats(path, "blk.2.ffn_down.weight", kInf, 0, 96 * 64); };
        cases.push_back(d);
        // A quantized block's scale set to +Inf (F16 0x7C00) in layer 1's value projection (Q8_0):
        // found by the load's scan of block scales (before, the pass quietly squashed it into finite
        // garbage).
        Case q = meta(
            "Inf scale in a quantized block", [](auto&) {}, "blk.1.attn_v.weight");
        q.patch = [](const std::string& path) {
            uint64_t at = 0;
            {
                const auto file = gguf::GgufFile::open(path);
                const gguf::TensorInfo* t = file->find_tensor("blk.1.attn_v.weight");
                QVERIFY(t && t->type.type == GgmlType::Q8_0);
                at = file->data_offset() + t->offset;
            }
            std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
            for (uint64_t block = 0; block < 8; ++block) { // the first row's blocks
                f.seekp(std::streamoff(at + block * 34));
                const uint16_t inf16 = 0x7C00;
                f.write(reinterpret_cast<const char*>(&inf16), 2);
            }
        };
        cases.push_back(q);
        // Inf throughout a float matrix too large for the load's scan (over a million values): the first
        // forward pass names the layer whose output goes non-finite.
        Case big = shaped("Inf in a large matrix",
                          {.n_layer = 3, .n_embd = 1024, .n_head = 8, .n_head_kv = 2, .head_dim = 128, .n_ff = 1040},
                          "layer 1 produced a non-finite value");
        big.patch = [](const std::string& path) { patch_floats(path, "blk.1.ffn_down.weight", kInf, 0, 1040 * 1024); };
        cases.push_back(big);
    }
    // Contexts the machine cannot hold.
    {
        Case c = meta(
            "context of 2^31 tokens", [](auto& w) { w.set_u32("llama.context_length", 0x80000000u); }, "context");
        c.n_ctx = 0x7FFFFFFFu;
        cases.push_back(c);
        Case d = meta(
            "context of 0 tokens", [](auto&) {}, "context");
        d.n_ctx = 0;
        cases.push_back(d);
    }
    return cases;
}

} // namespace

class TestHostileModels : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QVERIFY(m_dir.isValid()); }
    void cleanOrCorrect_data();
    void cleanOrCorrect();
    void oversizedPromptIsRefusedBeforeCompute();

private:
    QTemporaryDir m_dir;
};

void TestHostileModels::cleanOrCorrect_data()
{
    QTest::addColumn<int>("index");
    const auto cases = hostile_cases();
    for (int i = 0; i < int(cases.size()); ++i)
        QTest::newRow(cases[std::size_t(i)].name.c_str()) << i;
}

void TestHostileModels::cleanOrCorrect()
{
    QFETCH(int, index);
    const Case c = hostile_cases()[std::size_t(index)];
    const std::string path = m_dir.filePath(QString("hostile-%1.gguf").arg(index)).toStdString();
    {
        gguf::GgufWriter w = c.shaped ? make_test_model(c.arch, 7, c.shape) : make_test_model(c.arch, 7);
        if (c.mutate)
            c.mutate(w);
        w.write(path);
    }
    if (c.patch)
        c.patch(path);
    // TOKENSCOPE_KEEP_HOSTILE=DIR keeps the corpus as files, to try other builds or tools on.
    if (const char* keep = std::getenv("TOKENSCOPE_KEEP_HOSTILE"); keep && *keep) {
        QString name = QString::fromStdString(c.name);
        name.replace(QRegularExpression("[^A-Za-z0-9._-]+"), "_");
        QFile::copy(QString::fromStdString(path), QString(keep) + "/" + name + ".gguf");
    }

    std::string error;
    std::vector<std::string> backends_run;
    try {
        const auto model = Model::load(path);
        const std::vector<TokenId> prompt{1, 5, 9, 2, 7, 3};
        const auto run_on = [&](std::unique_ptr<Backend> backend) {
            backends_run.push_back(backend->name());
            Session session(model, std::move(backend));
            session.prefill(prompt);
            for (int step = 0; step < 3; ++step) {
                for (float v : session.logits())
                    QVERIFY2(std::isfinite(v), "a non-finite logit was returned instead of an error");
                session.decode(TokenId(step + 4));
            }
        };
        run_on(make_cpu_backend(model, {.threads = 2, .n_ctx = c.n_ctx}));
#ifdef TOKENSCOPE_HAVE_VULKAN
        bool device = false;
        for (const auto& d : list_vulkan_devices())
            device |= d.usable;
        if (device && c.expect.empty())
            run_on(make_vulkan_backend(model, {.device = -1, .n_ctx = c.n_ctx}));
#endif
    } catch (const Error& e) {
        error = e.what();
    }
    if (c.expect.empty()) {
        QVERIFY2(error.empty(), error.c_str());
        QVERIFY(!backends_run.empty());
    } else {
        QVERIFY2(!error.empty(), qPrintable(QString("accepted; expected an error naming '%1'").arg(c.expect.c_str())));
        QVERIFY2(error.find(c.expect) != std::string::npos,
                 qPrintable(QString("the error does not name '%1': %2").arg(c.expect.c_str(), error.c_str())));
        QVERIFY2(error.size() < 2000, "the message must be a sentence, not the file");
    }
}

// A prompt longer than the context is refused before any of it is computed.
void TestHostileModels::oversizedPromptIsRefusedBeforeCompute()
{
    const std::string path = m_dir.filePath("small.gguf").toStdString();
    make_test_model("llama", 3).write(path);
    const auto model = Model::load(path);
    Session session(model, make_cpu_backend(model, {.threads = 2, .n_ctx = 64}));
    const std::vector<TokenId> prompt(200, 5);
    try {
        session.prefill(prompt);
        QFAIL("a 200-token prompt was accepted by a 64-token context");
    } catch (const Error& e) {
        QVERIFY2(std::string(e.what()).find("200 tokens but the context holds 64") != std::string::npos, e.what());
    }
    QCOMPARE(session.backend().kv_cache().accounting().tokens_cached, 0u);
    QVERIFY(session.tokens().empty());
}

QTEST_GUILESS_MAIN(TestHostileModels)
#include "test_hostile_models.moc"
