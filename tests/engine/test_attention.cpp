// SPDX-License-Identifier: GPL-3.0-or-later
// Attention: the AVX2 kernel gives the same bits as the portable one (both summation orders); the
// engine's captured attention weights on the real model are proper distributions with exact zeros
// where masked, and equal an independent recomputation from the captured Q and K.
#include "backend/backend.h"
#include "backend/cpu/attention_kernels.h"
#include "model/model.h"
#include "quant/vec_dot.h"
#include "session/session.h"
#include "test_paths.h"
#include "util/error.h"
#include "util/fp16.h"

#include <QTest>
#include <bit>
#include <cmath>
#include <random>

using namespace engine;

class TestAttention : public QObject {
    Q_OBJECT
private slots:
    void simdMatchesScalarBitForBit_data();
    void simdMatchesScalarBitForBit();
    void rowsOfConsecutivePositionsShareTheArrays_data();
    void rowsOfConsecutivePositionsShareTheArrays();
    void softmaxExpMatchesLibm();
    void capturedWeightsOnTheRealModel();
    void chatModelGroupsSevenQueryHeadsPerKvHead();
};

void TestAttention::simdMatchesScalarBitForBit_data()
{
    QTest::addColumn<int>("slots_count");
    QTest::addColumn<int>("window");
    QTest::addColumn<bool>("batched");
    for (bool batched : {false, true})
        for (int n_slots : {1, 5, 31, 33, 300, 700}) {
            QTest::newRow(qPrintable(QString("%1 slots%2").arg(n_slots).arg(batched ? ", batched" : "")))
                << n_slots << 0 << batched;
            QTest::newRow(qPrintable(QString("%1 slots, window 64%2").arg(n_slots).arg(batched ? ", batched" : "")))
                << n_slots << 64 << batched;
        }
}

void TestAttention::simdMatchesScalarBitForBit()
{
    QFETCH(int, slots_count);
    const int n_slots = slots_count;
    const auto count = static_cast<std::size_t>(n_slots);
    QFETCH(int, window);
    QFETCH(bool, batched);
    if (simd_level() == SimdLevel::Scalar)
        QSKIP("no AVX2 on this CPU: only the scalar kernel exists here");
    const uint32_t D = 256;
    std::mt19937 rng(uint32_t(n_slots * 7 + window));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<uint16_t> k(count * D), v(count * D);
    for (auto& x : k)
        x = f32_to_fp16(dist(rng));
    for (auto& x : v)
        x = f32_to_fp16(dist(rng));
    std::vector<float> q(D);
    for (auto& x : q)
        x = dist(rng) * 0.3f;
    std::vector<const uint16_t*> kr(count, nullptr), vr(count, nullptr);
    const int lo = window ? std::max(0, n_slots - window) : 0;
    for (int j = lo; j < n_slots; ++j) {
        kr[std::size_t(j)] = k.data() + std::size_t(j) * D;
        vr[std::size_t(j)] = v.data() + std::size_t(j) * D;
    }
    cpu::AttentionRow row;
    row.q = q.data();
    row.keys = kr.data();
    row.values = vr.data();
    row.n_slots = uint32_t(n_slots);
    row.head_dim = D;
    row.scale = 0.0625f;
    row.batched = batched;
    std::vector<float> out_s(D), out_v(D), w_s(count), w_v(count);
    cpu::AttentionScratch a, b;
    cpu::attention_row_scalar(row, out_s.data(), w_s.data(), a);
    cpu::attention_row(row, out_v.data(), w_v.data(), b);
    for (uint32_t d = 0; d < D; ++d)
        QVERIFY2(std::bit_cast<uint32_t>(out_s[d]) == std::bit_cast<uint32_t>(out_v[d]),
                 qPrintable(
                     QString("out[%1]: scalar %2, SIMD %3").arg(d).arg(out_s[d], 0, 'g', 9).arg(out_v[d], 0, 'g', 9)));
    double sum = 0;
    for (int j = 0; j < n_slots; ++j) {
        QCOMPARE(std::bit_cast<uint32_t>(w_s[std::size_t(j)]), std::bit_cast<uint32_t>(w_v[std::size_t(j)]));
        if (j < lo)
            QCOMPARE(w_v[std::size_t(j)], 0.0f);
        sum += w_v[std::size_t(j)];
    }
    QVERIFY(std::fabs(sum - 1.0) < 1e-5);

    // Seven query heads over the same keys and values at once (a KV group of the chat model): each
    // row gets the bits it gets alone, on the scalar reference.
    constexpr int kGroup = 7;
    std::vector<std::vector<float>> qs(kGroup, std::vector<float>(D)), outs(kGroup, std::vector<float>(D)),
        ws(kGroup, std::vector<float>(count));
    std::vector<cpu::AttentionRow> rows(kGroup, row);
    std::vector<float*> out_ptrs, w_ptrs;
    for (int g = 0; g < kGroup; ++g) {
        for (auto& x : qs[std::size_t(g)])
            x = dist(rng) * 0.3f;
        rows[std::size_t(g)].q = qs[std::size_t(g)].data();
        out_ptrs.push_back(outs[std::size_t(g)].data());
        w_ptrs.push_back(ws[std::size_t(g)].data());
    }
    cpu::attention_rows(rows.data(), kGroup, out_ptrs.data(), w_ptrs.data(), b);
    for (int g = 0; g < kGroup; ++g) {
        cpu::attention_row_scalar(rows[std::size_t(g)], out_s.data(), w_s.data(), a);
        for (uint32_t d = 0; d < D; ++d)
            QCOMPARE(std::bit_cast<uint32_t>(outs[std::size_t(g)][d]), std::bit_cast<uint32_t>(out_s[d]));
        for (std::size_t j = 0; j < count; ++j)
            QCOMPARE(std::bit_cast<uint32_t>(ws[std::size_t(g)][j]), std::bit_cast<uint32_t>(w_s[j]));
    }
}

void TestAttention::rowsOfConsecutivePositionsShareTheArrays_data()
{
    QTest::addColumn<int>("window");
    QTest::addColumn<int>("heads");
    QTest::newRow("causal, 7 heads") << 0 << 7;
    QTest::newRow("window 64, 4 heads") << 64 << 4;
    QTest::newRow("window 61, 3 heads") << 61 << 3;
}

// A prompt's tile: the query heads of a KV head at four consecutive positions in one call, over key
// and value arrays built for the last position; each row masks what lies outside its own
// [first, n_slots) and must get the bits it gets alone on the scalar reference.
void TestAttention::rowsOfConsecutivePositionsShareTheArrays()
{
    QFETCH(int, window);
    QFETCH(int, heads);
    if (simd_level() == SimdLevel::Scalar)
        QSKIP("no AVX2 on this CPU: only the scalar kernel exists here");
    const uint32_t D = 64, first_pos = 297, n_pos = 4, last = first_pos + n_pos - 1;
    const auto window_start = [&](uint32_t pos) {
        return window && pos + 1 > uint32_t(window) ? pos + 1 - window : 0u;
    };
    std::mt19937 rng(uint32_t(window * 31 + heads));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<uint16_t> k(std::size_t(last + 1) * D), v(std::size_t(last + 1) * D);
    for (auto& x : k)
        x = f32_to_fp16(dist(rng));
    for (auto& x : v)
        x = f32_to_fp16(dist(rng));
    std::vector<const uint16_t*> kr(last + 1, nullptr), vr(last + 1, nullptr);
    for (uint32_t j = window_start(first_pos); j <= last; ++j) {
        kr[j] = k.data() + std::size_t(j) * D;
        vr[j] = v.data() + std::size_t(j) * D;
    }
    const std::size_t n_rows = std::size_t(n_pos) * heads;
    std::vector<std::vector<float>> qs(n_rows, std::vector<float>(D)), outs(n_rows, std::vector<float>(D)), ws(n_rows);
    std::vector<cpu::AttentionRow> rows(n_rows);
    std::vector<float*> out_ptrs, w_ptrs;
    for (std::size_t r = 0; r < n_rows; ++r) {
        const uint32_t pos = first_pos + uint32_t(r) / uint32_t(heads);
        for (auto& x : qs[r])
            x = dist(rng) * 0.5f;
        cpu::AttentionRow& row = rows[r];
        row.q = qs[r].data();
        row.keys = kr.data();
        row.values = vr.data();
        row.n_slots = pos + 1;
        row.first = window_start(pos);
        row.head_dim = D;
        row.scale = 0.125f;
        row.batched = true;
        ws[r].resize(pos + 1);
        out_ptrs.push_back(outs[r].data());
        w_ptrs.push_back(ws[r].data());
    }
    cpu::AttentionScratch a, b;
    cpu::attention_rows(rows.data(), uint32_t(n_rows), out_ptrs.data(), w_ptrs.data(), b);
    std::vector<float> out_s(D);
    for (std::size_t r = 0; r < n_rows; ++r) {
        std::vector<float> w_s(rows[r].n_slots);
        cpu::attention_row_scalar(rows[r], out_s.data(), w_s.data(), a);
        for (uint32_t d = 0; d < D; ++d)
            QCOMPARE(std::bit_cast<uint32_t>(outs[r][d]), std::bit_cast<uint32_t>(out_s[d]));
        double sum = 0;
        for (uint32_t j = 0; j < rows[r].n_slots; ++j) {
            QCOMPARE(std::bit_cast<uint32_t>(ws[r][j]), std::bit_cast<uint32_t>(w_s[j]));
            if (j < rows[r].first)
                QCOMPARE(ws[r][j], 0.0f);
            sum += ws[r][j];
        }
        QVERIFY(std::fabs(sum - 1.0) < 1e-5);
    }
    // The masks matter: the first row alone over the shared arrays, without its own end, would see
    // the later positions' keys.
    cpu::AttentionRow unmasked = rows[0];
    unmasked.n_slots = last + 1;
    std::vector<float> w_u(last + 1), out_u(D);
    cpu::attention_row_scalar(unmasked, out_u.data(), w_u.data(), a);
    QVERIFY(w_u[last] > 0.0f);
}

void TestAttention::softmaxExpMatchesLibm()
{
    // The softmax exponential is a polynomial approximation: within a few ulp of expf everywhere a
    // softmax evaluates it (x ≤ 0), exactly 0 far below, exactly 1 at 0.
    QCOMPARE(cpu::softmax_expf(0.0f), 1.0f);
    QCOMPARE(cpu::softmax_expf(-200.0f), 0.0f);
    for (float x = -87.0f; x <= 0.0f; x += 0.01f) {
        const float ref = std::exp(x);
        QVERIFY2(std::fabs(cpu::softmax_expf(x) - ref) <= 4e-7f * ref, qPrintable(QString::number(x)));
    }
}

void TestAttention::capturedWeightsOnTheRealModel()
{
    REQUIRE_DEFAULT_MODEL(path);
    const auto model = Model::load(path);
    Session session(model, make_cpu_backend(model, {.threads = 0, .n_ctx = 1024}));
    const auto prompt = model->tokenizer().encode_ids(
        "The river bank was muddy after the rain, so we walked to the bank to open an account instead.");
    Session plain(model, make_cpu_backend(model, {.threads = 0, .n_ctx = 1024}));
    plain.prefill(prompt);

    CaptureRequest request;
    request.all_heads = true;
    request.residuals = true;
    session.prefill(prompt, &request);
    // Captures come from the same pass: the logits are bit-identical with and without them.
    QCOMPARE(session.logits().size(), plain.logits().size());
    QVERIFY(std::equal(session.logits().begin(), session.logits().end(), plain.logits().begin(),
                       [](float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }));

    const auto& caps = *session.last_captures();
    const auto& c = model->config();
    QCOMPARE(caps.attention.size(), std::size_t(c.n_layer) * c.n_head[0]);
    QCOMPARE(caps.residuals.size(), std::size_t(c.n_layer));
    for (const AttentionCapture& a : caps.attention) {
        for (uint32_t t = 0; t < a.n_queries; ++t) {
            const uint32_t pos = a.first_position + t;
            double sum = 0;
            for (uint32_t j = 0; j < a.n_keys; ++j) {
                const float w = a.weights[std::size_t(t) * a.n_keys + j];
                if (j > pos)
                    QCOMPARE(w, 0.0f); // causal mask
                sum += w;
            }
            QVERIFY2(
                std::fabs(sum - 1.0) < 1e-5,
                qPrintable(QString("layer %1 head %2 row %3 sums to %4").arg(a.layer).arg(a.head).arg(t).arg(sum)));
        }
    }
    // The cache read back holds the keys and values the attention used.
    const KvReadback kv = session.backend().read_kv(3, 0);
    QCOMPARE(kv.n_positions, uint32_t(prompt.size()));
    QVERIFY(std::all_of(kv.held.begin(), kv.held.end(), [](bool h) { return h; }));
    const AttentionCapture& head0 = caps.attention[std::size_t(3) * c.n_head[0]];
    QVERIFY(kv.keys == head0.k);
    QVERIFY(kv.values == head0.v);
    QVERIFY_THROWS_EXCEPTION(Error, session.backend().read_kv(c.n_layer, 0));

    // One layer and head recomputed independently from the captured Q and K.
    const AttentionCapture& a = caps.attention[std::size_t(3) * c.n_head[0] + 2];
    for (uint32_t t = 0; t < a.n_queries; ++t) {
        const uint32_t pos = a.first_position + t;
        std::vector<double> s(pos + 1);
        double max = -1e300;
        for (uint32_t j = 0; j <= pos; ++j) {
            double dot = 0;
            for (uint32_t i = 0; i < a.head_dim; ++i)
                dot += double(a.q[std::size_t(t) * a.head_dim + i]) * a.k[std::size_t(j) * a.head_dim + i];
            s[j] = dot * a.scale;
            max = std::max(max, s[j]);
        }
        double z = 0;
        for (auto& x : s)
            z += (x = std::exp(x - max));
        for (uint32_t j = 0; j <= pos; ++j)
            QVERIFY(std::fabs(s[j] / z - a.weights[std::size_t(t) * a.n_keys + j]) < 1e-4);
    }
}

// Qwen2.5-Coder 0.5B: 14 query heads share 2 KV heads (GQA 7:1) of dimension 64. Heads 0–6 read KV
// head 0 and heads 7–13 KV head 1 (llama.cpp's grouping, head / (n_head / n_head_kv)): every head's
// captured keys and values are its group's cache, and the rows are causal softmaxes.
void TestAttention::chatModelGroupsSevenQueryHeadsPerKvHead()
{
    REQUIRE_CHAT_MODEL(path);
    const auto model = Model::load(path);
    const auto& c = model->config();
    QCOMPARE(c.n_layer, 24u);
    QCOMPARE(c.n_head[0], 14u);
    QCOMPARE(c.n_head_kv[0], 2u);
    QCOMPARE(c.head_dim_k, 64u);
    Session session(model, make_cpu_backend(model, {.threads = 0, .n_ctx = 512}));
    const auto prompt = model->tokenizer().encode_ids("def add(a, b):\n    return a + b\n\nprint(add(2, 3))");
    Session plain(model, make_cpu_backend(model, {.threads = 0, .n_ctx = 512}));
    plain.prefill(prompt);
    CaptureRequest request;
    request.all_heads = true;
    session.prefill(prompt, &request);
    QVERIFY(std::equal(session.logits().begin(), session.logits().end(), plain.logits().begin(),
                       [](float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }));
    const auto& caps = *session.last_captures();
    QCOMPARE(caps.attention.size(), std::size_t(24 * 14));
    for (const AttentionCapture& a : caps.attention) {
        QCOMPARE(a.kv_head, a.head / 7);
        QCOMPARE(a.head_dim, 64u);
        QCOMPARE(a.n_keys, uint32_t(prompt.size()));
        for (uint32_t t = 0; t < a.n_queries; ++t) {
            double sum = 0;
            for (uint32_t j = 0; j < a.n_keys; ++j) {
                const float w = a.weights[std::size_t(t) * a.n_keys + j];
                if (j > a.first_position + t)
                    QCOMPARE(w, 0.0f);
                sum += w;
            }
            QVERIFY(std::fabs(sum - 1.0) < 1e-5);
        }
    }
    for (uint32_t layer : {0u, 11u, 23u})
        for (uint32_t kvh = 0; kvh < 2; ++kvh) {
            const KvReadback kv = session.backend().read_kv(layer, kvh);
            QCOMPARE(kv.head_dim, 64u);
            for (uint32_t h = kvh * 7; h < kvh * 7 + 7; ++h) {
                const AttentionCapture& a = caps.attention[std::size_t(layer) * 14 + h];
                QCOMPARE(a.head, h);
                QVERIFY(kv.keys == a.k);
                QVERIFY(kv.values == a.v);
            }
            // …and the two groups' caches differ.
            QVERIFY(session.backend().read_kv(layer, 1 - kvh).keys != kv.keys);
        }
    QVERIFY_THROWS_EXCEPTION(Error, session.backend().read_kv(0, 2));
}

QTEST_GUILESS_MAIN(TestAttention)
#include "test_attention.moc"
