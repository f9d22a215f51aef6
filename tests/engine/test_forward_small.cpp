// SPDX-License-Identifier: GPL-3.0-or-later
// The llama, qwen2, qwen3 and (small) gemma3 paths against llama.cpp: the test regenerates each
// random-weight model with the project's seeded generator (byte-identical: its sha256 must equal the
// one llama.cpp ran, recorded in tests/data/logits/test-<arch>.gguf), then requires the same
// criteria as for the default model: last-position logits with Pearson ≥ 0.9995 and the same
// top-10, and greedy continuations that only diverge where llama.cpp's two leading candidates were
// within 0.1 logit.
#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "logit_compare.h"
#include "model/model.h"
#include "model/test_model.h"
#include "session/session.h"
#include "test_paths.h"

#include <QCryptographicHash>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <cmath>
#include <numeric>

using namespace engine;

using namespace testsupport;

class TestForwardSmall : public QObject {
    Q_OBJECT
private slots:
    void matchesLlamaCpp_data();
    void matchesLlamaCpp();
};

void TestForwardSmall::matchesLlamaCpp_data()
{
    QTest::addColumn<QString>("arch");
    for (const char* a : {"llama", "qwen2", "qwen3", "gemma3"})
        QTest::newRow(a) << QString(a);
}

void TestForwardSmall::matchesLlamaCpp()
{
    QFETCH(QString, arch);
    const auto fixture = gguf::GgufFile::open(testsupport::data_dir() + "/logits/test-" + arch.toStdString() + ".gguf");
    QTemporaryDir dir;
    const QString path = dir.filePath(arch + ".gguf");
    make_test_model(arch.toStdString(), 1).write(path.toStdString());
    QFile file(path);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QByteArray sha = QCryptographicHash::hash(file.readAll(), QCryptographicHash::Sha256).toHex();
    QCOMPARE(sha.toStdString(), std::string(*fixture->get_string("tokenscope.model.sha256")));

    const auto model = Model::load(path.toStdString());
    QCOMPARE(std::string(architecture_name(model->architecture())), arch.toStdString());
    Session session(model, make_cpu_backend(model, {.threads = 0, .n_ctx = 2048}), 2048);
    const int prompts = int(*fixture->get_int("tokenscope.n_prompts"));
    QVERIFY(prompts >= 6);
    int identical = 0;
    for (int i = 0; i < prompts; ++i) {
        const std::string p = prompt_key(i);
        const auto tokens = tensor_values<int32_t>(*fixture, p + ".tokens");
        const auto reference = tensor_values<float>(*fixture, p + ".logits");
        const auto greedy = tensor_values<int32_t>(*fixture, p + ".greedy");
        const auto gap = tensor_values<float>(*fixture, p + ".gap");
        if (auto text = fixture->get_string(p + ".text"))
            QCOMPARE(model->tokenizer().encode_ids(*text), tokens);
        session.prefill(tokens);
        const auto ours = session.logits();
        const double r = pearson(ours, reference);
        QVERIFY2(r >= 0.9995, qPrintable(QString("%1: Pearson %2").arg(QString::fromStdString(p)).arg(r, 0, 'f', 6)));
        auto top_ref = top_ids(reference, 10), top_ours = top_ids(ours, 10);
        for (std::size_t k = 0; k < 10; ++k) {
            const bool separated =
                (k == 0 || reference[std::size_t(top_ref[k - 1])] - reference[std::size_t(top_ref[k])] > 0.1f) &&
                (k == 9 || reference[std::size_t(top_ref[k])] - reference[std::size_t(top_ref[k + 1])] > 0.1f);
            if (separated)
                QCOMPARE(top_ours[k], top_ref[k]);
        }
        QVERIFY2(same_top10(reference, ours),
                 qPrintable(QString::fromStdString(p) + ": top-10 sets differ beyond ties"));
        std::size_t step = 0;
        for (; step < greedy.size(); ++step) {
            if (argmax(session.logits()) != greedy[step])
                break;
            session.decode(greedy[step]);
        }
        if (step == greedy.size())
            ++identical;
        else
            QVERIFY2(gap[step] < 0.1f, qPrintable(QString("%1 diverged at step %2 where llama.cpp's gap was %3")
                                                      .arg(QString::fromStdString(p))
                                                      .arg(step)
                                                      .arg(gap[step])));
    }
    qInfo("%s: identical greedy continuations on %d of %d prompts", qPrintable(arch), identical, prompts);
}

QTEST_GUILESS_MAIN(TestForwardSmall)
#include "test_forward_small.moc"
