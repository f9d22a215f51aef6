// SPDX-License-Identifier: GPL-3.0-or-later
// The CPU forward pass against llama.cpp (fixtures from tests/reference/make_logit_fixtures.py, the
// settings recorded in the fixture file; llama.cpp built for AVX2): on every prompt the last-position logits over the whole
// vocabulary correlate ≥ 0.9995 with llama.cpp's and share its top-10 set (in the same order
// wherever neighbouring logits differ by more than 0.1); greedy 64-token continuations are identical
// on at least 10 of 12 prompts, and wherever they diverge llama.cpp's two leading candidates were
// within 0.1 logit of each other.
#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "session/session.h"
#include "logit_compare.h"
#include "test_paths.h"

#include <QTest>
#include <algorithm>
#include <cmath>
#include <numeric>

using namespace engine;

using namespace testsupport;

class TestForwardReference : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void lastLogitsMatchLlamaCpp_data();
    void lastLogitsMatchLlamaCpp();
    void greedyContinuationsMatchLlamaCpp();

private:
    std::shared_ptr<const gguf::GgufFile> m_fixture;
    std::shared_ptr<const Model> m_model;
    std::unique_ptr<Session> m_session;
    int m_identical = 0;
    int m_prompts = 0;
    QStringList m_divergences;
};

void TestForwardReference::initTestCase()
{
    REQUIRE_DEFAULT_MODEL(path);
    m_fixture = gguf::GgufFile::open(testsupport::data_dir() + "/logits/gemma3-270m.gguf");
    m_model = Model::load(path);
    QCOMPARE(std::string(*m_fixture->get_string("tokenscope.model.sha256")),
             std::string("a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"));
    m_session = std::make_unique<Session>(m_model, make_cpu_backend(m_model, {.threads = 0, .n_ctx = 4096}), 2048);
    m_prompts = int(*m_fixture->get_int("tokenscope.n_prompts"));
    QVERIFY(m_prompts >= 12);
}

void TestForwardReference::lastLogitsMatchLlamaCpp_data()
{
    QTest::addColumn<int>("index");
    const auto f = gguf::GgufFile::open(testsupport::data_dir() + "/logits/gemma3-270m.gguf");
    for (int i = 0; i < int(*f->get_int("tokenscope.n_prompts")); ++i)
        QTest::newRow(std::string(*f->get_string(prompt_key(i) + ".name")).c_str()) << i;
}

void TestForwardReference::lastLogitsMatchLlamaCpp()
{
    QFETCH(int, index);
    const std::string p = prompt_key(index);
    const auto tokens = tensor_values<int32_t>(*m_fixture, p + ".tokens");
    const auto reference = tensor_values<float>(*m_fixture, p + ".logits");
    QVERIFY(!tokens.empty());
    QCOMPARE(reference.size(), std::size_t(m_model->config().n_vocab));
    // The fixture's prompt text tokenizes to the same ids here.
    if (auto text = m_fixture->get_string(p + ".text"))
        QCOMPARE(m_model->tokenizer().encode_ids(*text), tokens);

    m_session->prefill(tokens);
    const auto ours = m_session->logits();
    const double r = pearson(ours, reference);
    QVERIFY2(r >= 0.9995, qPrintable(QString("Pearson %1 over %2 tokens").arg(r, 0, 'f', 6).arg(tokens.size())));

    const auto top_ref = top_ids(reference, 10), top_ours = top_ids(ours, 10);
    QVERIFY2(same_top10(reference, ours), "top-10 sets differ beyond ties");
    for (std::size_t i = 0; i < 10; ++i) {
        const bool separated = (i == 0 || reference[std::size_t(top_ref[i - 1])] - reference[std::size_t(top_ref[i])] > 0.1f) &&
                               (i == 9 || reference[std::size_t(top_ref[i])] - reference[std::size_t(top_ref[i + 1])] > 0.1f);
        if (separated)
            QVERIFY2(top_ours[i] == top_ref[i], qPrintable(QString("rank %1 differs").arg(i)));
    }
}

void TestForwardReference::greedyContinuationsMatchLlamaCpp()
{
    for (int i = 0; i < m_prompts; ++i) {
        const std::string p = prompt_key(i);
        const auto tokens = tensor_values<int32_t>(*m_fixture, p + ".tokens");
        const auto greedy = tensor_values<int32_t>(*m_fixture, p + ".greedy");
        const auto gap = tensor_values<float>(*m_fixture, p + ".gap");
        QCOMPARE(greedy.size(), std::size_t(64));
        m_session->prefill(tokens);
        std::size_t step = 0;
        for (; step < greedy.size(); ++step) {
            const int32_t next = argmax(m_session->logits());
            if (next != greedy[step])
                break;
            m_session->decode(next);
        }
        if (step == greedy.size()) {
            ++m_identical;
        } else {
            m_divergences << QString("%1 at step %2 (llama.cpp top-2 gap %3)").arg(QString::fromStdString(p)).arg(step).arg(gap[step]);
            QVERIFY2(gap[step] < 0.1f, qPrintable("diverged where llama.cpp was decisive: " + m_divergences.last()));
        }
    }
    qInfo("identical greedy continuations: %d of %d%s", m_identical, m_prompts,
          m_divergences.isEmpty() ? "" : qPrintable("; diverged: " + m_divergences.join(", ")));
    QVERIFY(m_identical >= 10);
}

QTEST_GUILESS_MAIN(TestForwardReference)
#include "test_forward_reference.moc"
