// SPDX-License-Identifier: GPL-3.0-or-later
// The two shipped models with a quantized KV cache against llama.cpp (AVX2 build, `-fa on -ctk K -ctv
// V`, --no-repack): tests/data/logits/kv-models/MODEL-K-V.gguf hold, for six prompts (English, code,
// numbers, a ChatML turn, mixed scripts, ~270 tokens of mixed text), llama.cpp's leading 40 logits and a
// seeded sample of 4,096 of the last prompt position, and a 16-token greedy continuation. Every logit
// the fixture holds must be ours bit for bit, and every continuation identical, on the path this CPU
// chooses (real-model suites run once; the forced kernel paths run test_kv_types on generated models).
#include "backend/backend.h"
#include "file_hash.h"
#include "gguf/gguf_file.h"
#include "logit_compare.h"
#include "model/model.h"
#include "quant/vec_dot.h"
#include "session/session.h"
#include "test_paths.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QTest>
#include <bit>

using namespace engine;
using namespace testsupport;

class TestKvTypesModel : public QObject {
    Q_OBJECT
private slots:
    void shippedModelsMatchLlamaCpp_data();
    void shippedModelsMatchLlamaCpp();
};

void TestKvTypesModel::shippedModelsMatchLlamaCpp_data()
{
    QTest::addColumn<QString>("file");
    const QDir dir(QString::fromStdString(data_dir() + "/logits/kv-models"));
    const QStringList files = dir.entryList({"*.gguf"}, QDir::Files, QDir::Name);
    QVERIFY2(files.size() >= 4, "the real models' KV-type fixtures are missing");
    for (const QString& f : files)
        QTest::newRow(qPrintable(f.chopped(5))) << dir.filePath(f);
}

void TestKvTypesModel::shippedModelsMatchLlamaCpp()
{
    QFETCH(QString, file);
    const bool chat = QFileInfo(file).baseName().startsWith("qwen");
    REQUIRE_SHIPPED_MODEL(path, chat);
    const auto fixture = gguf::GgufFile::open(file.toStdString());
    QCOMPARE(QString::fromStdString(std::string(*fixture->get_string("tokenscope.flash_attn"))), QString("enabled"));
    QVERIFY(!*fixture->get_bool("tokenscope.use_extra_bufts"));
    const QByteArray sha = testsupport::sha256_of_file(path);
    if (sha.toStdString() != std::string(*fixture->get_string("tokenscope.model.sha256")))
        QSKIP(
            qPrintable("the model at " + QString::fromStdString(path) + " is not the file the fixture was made from"));
    const KvCacheTypes types{*parse_kv_cache_type(*fixture->get_string("tokenscope.type_k")),
                             *parse_kv_cache_type(*fixture->get_string("tokenscope.type_v"))};
    const auto model = Model::load(path);
    Session session(
        model, make_cpu_backend(model, {.threads = 0, .n_ctx = 2048, .order = WeightOrder::Plain, .kv_types = types}),
        2048);
    const auto sample_ids = tensor_values<int32_t>(*fixture, "sample_ids");
    const int prompts = int(*fixture->get_int("tokenscope.n_prompts"));
    QCOMPARE(prompts, 6);
    int bit_equal = 0, identical = 0;
    QString first;
    for (int i = 0; i < prompts; ++i) {
        const std::string p = prompt_key(i);
        const auto tokens = tensor_values<int32_t>(*fixture, p + ".tokens");
        session.truncate(0);
        session.prefill(tokens);
        const auto ours = session.logits();
        int held = 0, differing = 0;
        const auto check = [&](int32_t id, float reference) {
            ++held;
            differing += std::bit_cast<uint32_t>(ours[std::size_t(id)]) != std::bit_cast<uint32_t>(reference);
        };
        const auto top = tensor_values<int32_t>(*fixture, p + ".top_ids");
        const auto top_logits = tensor_values<float>(*fixture, p + ".top_logits");
        const auto sample = tensor_values<float>(*fixture, p + ".sample_logits");
        for (std::size_t k = 0; k < top.size(); ++k)
            check(top[k], top_logits[k]);
        for (std::size_t k = 0; k < sample.size(); ++k)
            check(sample_ids[k], sample[k]);
        QVERIFY(held >= 4096 + 40);
        bit_equal += differing == 0;
        if (differing && first.isEmpty())
            first = QString("prompt %1: %2 of %3 logits differ").arg(i).arg(differing).arg(held);
        const auto greedy = tensor_values<int32_t>(*fixture, p + ".greedy");
        std::size_t step = 0;
        for (; step < greedy.size() && argmax(session.logits()) == greedy[step]; ++step)
            session.decode(greedy[step]);
        identical += step == greedy.size();
        if (step != greedy.size() && first.isEmpty())
            first = QString("prompt %1: the greedy continuation parted at step %2").arg(i).arg(step);
    }
    qInfo("%s with a %s cache on the %s path: logits bit-equal on %d of %d prompts, greedy identical on %d",
          qPrintable(QFileInfo(path.c_str()).fileName()), kv_cache_types_name(types).c_str(),
          simd_level_name(simd_level()).data(), bit_equal, prompts, identical);
    QVERIFY2(bit_equal == prompts && identical == prompts, qPrintable(first));
}

QTEST_GUILESS_MAIN(TestKvTypesModel)
#include "test_kv_types_model.moc"
