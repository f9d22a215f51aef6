// SPDX-License-Identifier: GPL-3.0-or-later
// The CPU forward pass against llama.cpp on both real models — the default model (Gemma 3 270M) and
// the chat model (Qwen2.5-Coder 0.5B Instruct) — with fixtures from tests/reference/make_logit_fixtures.py
// (the settings recorded in the fixture file; llama.cpp built for AVX2): on every prompt the
// last-position logits over the whole vocabulary correlate ≥ 0.9995 with llama.cpp's and share its
// top-10 set (in the same order wherever neighbouring logits differ by more than 0.1); greedy 64-token
// continuations are identical on at least 10 of 12 prompts, and wherever they diverge llama.cpp's two
// leading candidates were within 0.1 logit of each other.
#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "logit_compare.h"
#include "model/model.h"
#include "quant/vec_dot.h"
#include "session/session.h"
#include "test_paths.h"

#include <QTest>
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

using namespace engine;

using namespace testsupport;

namespace {

struct ReferenceModel {
    const char* name;
    const char* fixture; // under tests/data/logits
    std::string (*path)();
    const char* sha256; // of the model file the fixture was made from
};

const ReferenceModel kModels[] = {
    {"gemma3-270m", "gemma3-270m.gguf", testsupport::default_model_path,
     "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"},
    {"qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b.gguf", testsupport::chat_model_path,
     "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"},
};

std::shared_ptr<const gguf::GgufFile> open_fixture(const ReferenceModel& m)
{
    return gguf::GgufFile::open(testsupport::data_dir() + "/logits/" + m.fixture);
}

} // namespace

class TestForwardReference : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { qInfo("kernels: %s", engine::simd_level_name(engine::simd_level()).data()); }
    // Each prompt is read once: its last logits are compared, then its greedy continuation followed
    // from the same cache (a second prefill of the 1,000-token prompts doubled the suite's time).
    void lastLogitsAndGreedyMatchLlamaCpp_data();
    void lastLogitsAndGreedyMatchLlamaCpp();
    void greedyContinuationsMatchLlamaCpp_data();
    void greedyContinuationsMatchLlamaCpp();

private:
    struct Loaded {
        std::shared_ptr<const gguf::GgufFile> fixture;
        std::shared_ptr<const Model> model;
        std::unique_ptr<Session> session;
        int continued = 0; // prompts whose greedy continuation was followed
        int identical = 0; // …and matched llama.cpp's for all 64 steps
        QStringList divergences;
    };
    // The model of row `which`, loaded once; nullptr when it is not installed (the caller skips or fails).
    Loaded* load(int which);
    std::map<int, Loaded> m_loaded;
};

TestForwardReference::Loaded* TestForwardReference::load(int which)
{
    if (auto it = m_loaded.find(which); it != m_loaded.end())
        return &it->second;
    const ReferenceModel& m = kModels[which];
    const std::string path = m.path();
    if (path.empty())
        return nullptr;
    Loaded l;
    l.fixture = open_fixture(m);
    l.model = Model::load(path);
    l.session = std::make_unique<Session>(l.model, make_cpu_backend(l.model, {.threads = 0, .n_ctx = 4096}), 2048);
    return &m_loaded.emplace(which, std::move(l)).first->second;
}

#define LOAD_OR_SKIP(var, which)                                                                                       \
    Loaded* var = load(which);                                                                                         \
    if (!var) {                                                                                                        \
        if (testsupport::model_may_be_missing())                                                                       \
            QSKIP("model not installed (TOKENSCOPE_ALLOW_NO_MODEL=1)");                                                \
        QFAIL(qPrintable(QString("%1 is not installed: run scripts/setup.sh").arg(kModels[which].name)));              \
    }

void TestForwardReference::lastLogitsAndGreedyMatchLlamaCpp_data()
{
    QTest::addColumn<int>("model");
    QTest::addColumn<int>("index");
    for (int m = 0; m < int(std::size(kModels)); ++m) {
        const auto f = open_fixture(kModels[m]);
        for (int i = 0; i < int(*f->get_int("tokenscope.n_prompts")); ++i)
            QTest::newRow(qPrintable(QString("%1/%2").arg(
                kModels[m].name, QString::fromStdString(std::string(*f->get_string(prompt_key(i) + ".name"))))))
                << m << i;
    }
}

void TestForwardReference::lastLogitsAndGreedyMatchLlamaCpp()
{
    QFETCH(int, model);
    QFETCH(int, index);
    LOAD_OR_SKIP(l, model);
    QCOMPARE(std::string(*l->fixture->get_string("tokenscope.model.sha256")), std::string(kModels[model].sha256));
    QVERIFY(*l->fixture->get_int("tokenscope.n_prompts") >= 12);
    const std::string p = prompt_key(index);
    const auto tokens = tensor_values<int32_t>(*l->fixture, p + ".tokens");
    const auto reference = tensor_values<float>(*l->fixture, p + ".logits");
    QVERIFY(!tokens.empty());
    QCOMPARE(reference.size(), std::size_t(l->model->config().n_vocab));
    // The fixture's prompt text tokenizes to the same ids here.
    if (auto text = l->fixture->get_string(p + ".text"))
        QCOMPARE(l->model->tokenizer().encode_ids(*text), tokens);

    // 1. The last position's logits over the whole vocabulary.
    l->session->prefill(tokens);
    const auto ours = l->session->logits();
    const double r = pearson(ours, reference);
    QVERIFY2(r >= 0.9995, qPrintable(QString("Pearson %1 over %2 tokens").arg(r, 0, 'f', 6).arg(tokens.size())));
    float max_delta = 0;
    for (std::size_t i = 0; i < reference.size(); ++i)
        max_delta = std::max(max_delta, std::abs(ours[i] - reference[i]));
    qInfo("%s: %zu tokens, Pearson %.7f, max |Δ| %g", p.c_str(), tokens.size(), r, double(max_delta));

    const auto top_ref = top_ids(reference, 10), top_ours = top_ids(ours, 10);
    QVERIFY2(same_top10(reference, ours), "top-10 sets differ beyond ties");
    for (std::size_t i = 0; i < 10; ++i) {
        const bool separated =
            (i == 0 || reference[std::size_t(top_ref[i - 1])] - reference[std::size_t(top_ref[i])] > 0.1f) &&
            (i == 9 || reference[std::size_t(top_ref[i])] - reference[std::size_t(top_ref[i + 1])] > 0.1f);
        if (separated)
            QVERIFY2(top_ours[i] == top_ref[i], qPrintable(QString("rank %1 differs").arg(i)));
    }

    // 2. The greedy continuation from that cache: identical to llama.cpp's 64 tokens, or parting only
    // where llama.cpp's two leading candidates were within 0.1 logit of each other.
    const auto greedy = tensor_values<int32_t>(*l->fixture, p + ".greedy");
    const auto gap = tensor_values<float>(*l->fixture, p + ".gap");
    QCOMPARE(greedy.size(), std::size_t(64));
    std::size_t step = 0;
    for (; step < greedy.size(); ++step) {
        const int32_t next = argmax(l->session->logits());
        if (next != greedy[step])
            break;
        l->session->decode(next);
    }
    ++l->continued;
    if (step == greedy.size()) {
        ++l->identical;
        return;
    }
    l->divergences
        << QString("%1 at step %2 (llama.cpp top-2 gap %3)").arg(QString::fromStdString(p)).arg(step).arg(gap[step]);
    QVERIFY2(gap[step] < 0.1f, qPrintable("diverged where llama.cpp was decisive: " + l->divergences.last()));
}

void TestForwardReference::greedyContinuationsMatchLlamaCpp_data()
{
    QTest::addColumn<int>("model");
    for (int m = 0; m < int(std::size(kModels)); ++m)
        QTest::newRow(kModels[m].name) << m;
}

void TestForwardReference::greedyContinuationsMatchLlamaCpp()
{
    QFETCH(int, model);
    LOAD_OR_SKIP(l, model);
    const int prompts = int(*l->fixture->get_int("tokenscope.n_prompts"));
    QCOMPARE(l->continued, prompts); // every prompt above was followed (none stopped before its greedy part)
    qInfo("%s: identical greedy continuations: %d of %d%s", kModels[model].name, l->identical, prompts,
          l->divergences.isEmpty() ? "" : qPrintable("; diverged: " + l->divergences.join(", ")));
    QVERIFY(l->identical >= 10);
}

QTEST_GUILESS_MAIN(TestForwardReference)
#include "test_forward_reference.moc"
