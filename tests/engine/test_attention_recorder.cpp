// SPDX-License-Identifier: GPL-3.0-or-later
// The attention recorder on the real model: the rows of every real pass (prefill batches, decode
// steps, a step back) assemble into whole matrices equal to each pass's captures; rows sum to 1;
// memory stays within the budget by keeping only the focus layers.
#include "backend/backend.h"
#include "model/model.h"
#include "session/attention_recorder.h"
#include "session/stepper.h"
#include "test_paths.h"

#include <QTest>
#include <cmath>

using namespace engine;

class TestAttentionRecorder : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void rowsComeFromTheRealPasses();
    void budgetKeepsTheFocusLayers();

private:
    std::shared_ptr<const Model> m_model;
};

void TestAttentionRecorder::initTestCase()
{
    REQUIRE_DEFAULT_MODEL(path);
    m_model = Model::load(path);
}

void TestAttentionRecorder::rowsComeFromTheRealPasses()
{
    // Batches of 4 positions: the prefill itself is several passes.
    Session session(m_model, make_cpu_backend(m_model, {.threads = 2, .n_ctx = 256}), 4);
    Stepper stepper(session);
    AttentionRecorder recorder;
    const auto& c = m_model->config();
    std::map<uint32_t, std::vector<float>>
        expected_row; // position → layer 2 head 1's row, from the pass that computed it
    const auto record = [&] {
        const auto& captures = session.last_captures();
        QVERIFY(captures);
        recorder.add(*captures);
        recorder.truncate(uint32_t(session.tokens().size()));
        for (const auto& a : captures->attention)
            if (a.layer == 2 && a.head == 1)
                for (uint32_t i = 0; i < a.n_queries; ++i)
                    expected_row[a.first_position + i].assign(
                        a.weights.begin() + std::ptrdiff_t(i * a.n_keys),
                        a.weights.begin() + std::ptrdiff_t(i * a.n_keys + a.first_position + i + 1));
    };
    const auto ids = m_model->tokenizer().encode_ids("The recorder keeps every row of every pass.");
    stepper.set_attention_capture(recorder.request(c, uint32_t(ids.size()) + 8));
    stepper.start(ids, StopCondition({}, 0, {}), [&](uint32_t, uint32_t) {
        record();
        return true;
    });
    SamplerConfig greedy;
    greedy.greedy = true;
    for (int i = 0; i < 4; ++i) {
        stepper.step(greedy);
        record();
    }
    QVERIFY(stepper.back());
    record();
    stepper.step(greedy);
    record();

    const uint32_t n = uint32_t(session.tokens().size());
    QCOMPARE(recorder.length(), n);
    for (uint32_t il = 0; il < c.n_layer; ++il)
        for (uint32_t h = 0; h < c.n_head[il]; ++h) {
            const auto* head = recorder.complete(il, h);
            QVERIFY(head);
            QCOMPARE(uint32_t(head->rows.size()), n);
            for (const auto& row : head->rows) {
                double sum = 0;
                for (float w : row)
                    sum += double(w);
                QVERIFY(std::abs(sum - 1.0) < 1e-5);
            }
        }
    const auto* head = recorder.complete(2, 1);
    for (uint32_t p = 0; p < n; ++p)
        QCOMPARE(head->rows[p], expected_row.at(p)); // the row of the last pass that computed position p
    // The budget's estimate is what the recording holds: rows, queries, and K/V once per KV head.
    std::vector<uint32_t> layers(c.n_layer);
    for (uint32_t il = 0; il < c.n_layer; ++il)
        layers[il] = il;
    QCOMPARE(recorder.bytes(), AttentionRecorder::bytes_needed(c, layers, n));
    uint64_t kv = 0;
    for (uint32_t il = 0; il < c.n_layer; ++il)
        kv += uint64_t(c.n_head_kv[il]) * 2 * n * c.head_dim_k * sizeof(float);
    QVERIFY(kv > 0 && recorder.bytes() > kv);
    QCOMPARE(recorder.keys_values(*head).n_keys, n);
}

void TestAttentionRecorder::budgetKeepsTheFocusLayers()
{
    AttentionRecorder recorder(1 << 20); // 1 MiB
    recorder.set_focus({4});
    const auto& c = m_model->config();
    // 8 tokens: 72 heads × (36 weights + 8 × 256 q) + 18 KV heads × 2 × 8 × 256 floats = 874 KiB fit
    const CaptureRequest& small = recorder.request(c, 8);
    QCOMPARE(small.heads.size(), std::size_t(c.n_layer) * c.n_head[0]);
    // 16 tokens do not once the queries, keys and values are counted (1.7 MiB)
    QCOMPARE(recorder.request(c, 16).heads.size(), std::size_t(c.n_head[4]));
    const CaptureRequest& large = recorder.request(c, 1000);
    QCOMPARE(large.heads.size(), std::size_t(c.n_head[4]));
    for (const auto& [layer, h] : large.heads)
        QCOMPARE(layer, 4u);
}

QTEST_GUILESS_MAIN(TestAttentionRecorder)
#include "test_attention_recorder.moc"
