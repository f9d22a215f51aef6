// SPDX-License-Identifier: GPL-3.0-or-later
// The forward-pass cost on the real default model, against figures computed here from the file's
// tensor records: weight bytes read, matmul + attention FLOPs, and KV bytes read growing with the
// context until each sliding window is full.
#include "gguf/gguf_file.h"
#include "model/forward_cost.h"
#include "model/model.h"
#include "test_paths.h"

#include <QTest>
#include <cmath>
#include <regex>

using namespace engine;

namespace {

bool close(double a, double b)
{
    return std::fabs(a - b) <= 1e-12 * std::max(std::fabs(a), std::fabs(b));
}

struct FileSums {
    double matrix_elements = 0.0; // blk.N.{attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down}.weight
    double matrix_bytes = 0.0;
    double head_elements = 0.0; // output.weight, or token_embd.weight when tied
    double head_bytes = 0.0;
    double embd_row_bytes = 0.0;
};

FileSums sums_of(const gguf::GgufFile& file)
{
    static const std::regex matrix(R"(blk\.\d+\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down)\.weight)");
    FileSums s;
    for (const auto& t : file.tensors())
        if (std::regex_match(t.name, matrix)) {
            s.matrix_elements += double(t.n_elements());
            s.matrix_bytes += double(t.n_bytes);
        }
    const auto* embd = file.find_tensor("token_embd.weight");
    const auto* head = file.find_tensor("output.weight");
    if (!head)
        head = embd;
    s.head_elements = double(head->n_elements());
    s.head_bytes = double(head->n_bytes);
    s.embd_row_bytes = double(embd->n_bytes) / double(embd->ne[1]);
    return s;
}

// q·k and p·v for one query at position `pos`: 4 × heads × head_dim × keys, per layer.
double attention_flops(const ModelConfig& c, uint32_t pos)
{
    double f = 0.0;
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        const double keys = c.layer_is_swa[il] ? std::min(pos + 1, c.sliding_window) : pos + 1;
        f += 4.0 * c.n_head[il] * c.head_dim_k * keys;
    }
    return f;
}

} // namespace

class TestForwardCost : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void weightBytesAreTheMatricesRead();
    void flopsOfOneToken();
    void kvBytesGrowUntilTheWindowsAreFull();
    void batchIsTheSumOfItsTokens();

private:
    std::shared_ptr<const Model> m_model;
};

void TestForwardCost::initTestCase()
{
    REQUIRE_DEFAULT_MODEL(path);
    m_model = Model::load(path);
    QVERIFY(m_model->weights().tied_output); // Gemma: the head is the embedding matrix
}

void TestForwardCost::weightBytesAreTheMatricesRead()
{
    const FileSums s = sums_of(m_model->file());
    // Layer matrices + the tied head read fully + one embedding row per token.
    for (uint32_t n : {1u, 7u, 128u}) {
        const ForwardCost cost = forward_cost(*m_model, n, 100);
        QVERIFY(close(cost.weight_bytes, s.matrix_bytes + s.head_bytes + n * s.embd_row_bytes));
    }
    // Below the whole file (norm vectors are not re-read) but most of it.
    const double file_weights = double(m_model->weight_bytes());
    const double decode = forward_cost(*m_model, 1, 0).weight_bytes;
    QVERIFY(decode < file_weights + s.embd_row_bytes);
    QVERIFY(decode > 0.95 * file_weights);
}

void TestForwardCost::flopsOfOneToken()
{
    const FileSums s = sums_of(m_model->file());
    const ModelConfig& c = m_model->config();
    for (uint32_t n_past : {0u, 100u, 511u, 512u, 1000u, 5000u}) {
        const ForwardCost cost = forward_cost(*m_model, 1, n_past);
        const double expected = 2.0 * s.matrix_elements + 2.0 * s.head_elements + attention_flops(c, n_past);
        QVERIFY2(close(cost.flops, expected),
                 qPrintable(QString("n_past %1: %2 vs %3").arg(n_past).arg(cost.flops).arg(expected)));
    }
    // Gemma 3 270M at position 0: 4 heads × 256 dims × 4 × 18 layers of attention.
    QVERIFY(close(attention_flops(c, 0), 4.0 * 4 * 256 * 18));
    QCOMPARE(forward_cost(*m_model, 0, 10).flops, 0.0);
}

void TestForwardCost::kvBytesGrowUntilTheWindowsAreFull()
{
    const ModelConfig& c = m_model->config();
    // Per key and layer: 2 (K, V) × 1 KV head × 256 dims × 2 B = 1,024 B.
    const double per_key_all_layers = 18 * 1024.0, per_key_global = 3 * 1024.0;
    QVERIFY(close(forward_cost(*m_model, 1, 0).kv_bytes_read, per_key_all_layers));
    for (uint32_t n_past = 0; n_past < 2000; n_past += 37) {
        const double step =
            forward_cost(*m_model, 1, n_past + 1).kv_bytes_read - forward_cost(*m_model, 1, n_past).kv_bytes_read;
        // The query at position n_past + 1 sees one more key in every layer whose window is not yet full.
        const double expected = n_past + 2 <= c.sliding_window ? per_key_all_layers : per_key_global;
        QVERIFY2(close(step, expected), qPrintable(QString("n_past %1: step %2").arg(n_past).arg(step)));
    }
    // Linear, exactly, past the windows.
    const double at1000 = forward_cost(*m_model, 1, 1000).kv_bytes_read;
    QVERIFY(close(forward_cost(*m_model, 1, 3000).kv_bytes_read - at1000, 2000 * per_key_global));
    QVERIFY(close(at1000, 15 * 512 * 1024.0 + 3 * 1001 * 1024.0));
}

void TestForwardCost::batchIsTheSumOfItsTokens()
{
    const FileSums s = sums_of(m_model->file());
    const uint32_t n = 200, past = 400; // crosses the 512-token window
    const ForwardCost batch = forward_cost(*m_model, n, past);
    double kv = 0.0, attention = 0.0;
    for (uint32_t t = 0; t < n; ++t) {
        kv += forward_cost(*m_model, 1, past + t).kv_bytes_read;
        attention += attention_flops(m_model->config(), past + t);
    }
    QVERIFY(close(batch.kv_bytes_read, kv));
    // Matrices once per token, the head once (last position's logits only).
    QVERIFY(close(batch.flops, 2.0 * s.matrix_elements * n + 2.0 * s.head_elements + attention));
}

QTEST_GUILESS_MAIN(TestForwardCost)
#include "test_forward_cost.moc"
