// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A random-weight model against its llama.cpp fixture (make_logit_fixtures.py --test-model): the model
// regenerated here must be the file llama.cpp ran (its sha256), then every prompt of the fixture from an
// empty cache: last logits bit for bit, and the greedy continuation.
#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "logit_compare.h"
#include "model/model.h"
#include "quant/vec_dot.h"
#include "session/session.h"

#include <QCryptographicHash>
#include <QFile>
#include <QString>
#include <QTemporaryDir>
#include <QTest>
#include <bit>
#include <memory>

namespace testsupport {

// Writes `writer` to dir/name.gguf and loads it when its sha256 is the fixture's; null otherwise.
inline std::shared_ptr<const engine::Model> fixture_model(const QTemporaryDir& dir, const QString& name,
                                                          const engine::gguf::GgufWriter& writer,
                                                          const engine::gguf::GgufFile& fixture)
{
    const QString path = dir.filePath(name + ".gguf");
    writer.write(path.toStdString());
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return nullptr;
    const QByteArray sha = QCryptographicHash::hash(file.readAll(), QCryptographicHash::Sha256).toHex();
    if (sha.toStdString() != std::string(*fixture.get_string("tokenscope.model.sha256")))
        return nullptr;
    return engine::Model::load(path.toStdString());
}

struct Agreement {
    int prompts = 0, bit_equal = 0, identical = 0;
    // prompts whose every greedy step's top-1 − top-2 logit gap is llama.cpp's to the bit (the logits
    // of each decode step, not only the prompt's: a bit-level check of the decode path)
    int steps_bit_equal = 0;
    double min_pearson = 1.0;
    QString first_difference;
};

// Every prompt of the fixture from an empty cache: last logits bit for bit, greedy continuation.
inline Agreement agreement(engine::Session& session, const engine::gguf::GgufFile& fixture)
{
    Agreement a;
    a.prompts = int(*fixture.get_int("tokenscope.n_prompts"));
    for (int i = 0; i < a.prompts; ++i) {
        const std::string p = prompt_key(i);
        const auto tokens = tensor_values<int32_t>(fixture, p + ".tokens");
        const auto reference = tensor_values<float>(fixture, p + ".logits");
        const auto greedy = tensor_values<int32_t>(fixture, p + ".greedy");
        session.truncate(0); // from an empty cache: the batch is the whole prompt, as llama.cpp ran it
        session.prefill(tokens);
        const auto ours = session.logits();
        int differing = 0;
        for (std::size_t k = 0; k < ours.size() && k < reference.size(); ++k)
            differing += std::bit_cast<uint32_t>(ours[k]) != std::bit_cast<uint32_t>(reference[k]);
        a.bit_equal += differing == 0 && ours.size() == reference.size();
        if (ours.size() == reference.size())
            a.min_pearson = std::min(a.min_pearson, pearson(ours, reference));
        if (differing && a.first_difference.isEmpty())
            a.first_difference =
                QString("%1 of %2 logits differ after %3 tokens").arg(differing).arg(ours.size()).arg(tokens.size());
        const auto gaps = tensor_values<float>(fixture, p + ".gap");
        bool gaps_equal = gaps.size() == greedy.size();
        std::size_t step = 0;
        for (; step < greedy.size() && argmax(session.logits()) == greedy[step]; ++step) {
            const auto top = top_ids(session.logits(), 2);
            const float gap = session.logits()[std::size_t(top[0])] - session.logits()[std::size_t(top[1])];
            if (gaps_equal && std::bit_cast<uint32_t>(gap) != std::bit_cast<uint32_t>(gaps[step])) {
                gaps_equal = false;
                if (a.first_difference.isEmpty())
                    a.first_difference = QString("greedy step %1 after %2 tokens: top-2 gap %3, llama.cpp's %4")
                                             .arg(step)
                                             .arg(tokens.size())
                                             .arg(double(gap), 0, 'g', 9)
                                             .arg(double(gaps[step]), 0, 'g', 9);
            }
            session.decode(greedy[step]);
        }
        a.identical += step == greedy.size();
        a.steps_bit_equal += gaps_equal && step == greedy.size();
        if (step != greedy.size() && a.first_difference.isEmpty())
            a.first_difference =
                QString("the greedy continuation parted at step %1 after %2 tokens").arg(step).arg(tokens.size());
    }
    return a;
}

// The claim of the random-model suites: on a fixture of llama.cpp's AVX2 build, every prompt's last
// logits bit-equal and every greedy continuation identical (on the CPU backend, the path this process
// chose); on any fixture, a Pearson correlation of at least 0.9999. `label` names the case.
inline void require_llama_cpp_agreement(const std::shared_ptr<const engine::Model>& model,
                                        const engine::gguf::GgufFile& fixture, const QString& label)
{
    engine::Session session(model, engine::make_cpu_backend(model, {.threads = 0, .n_ctx = 2048}), 2048);
    const bool bits_claimed = fixture.get_string("tokenscope.llama_cpp.cpu_variant").value_or("") == "avx2";
    const Agreement a = agreement(session, fixture);
    QCOMPARE(a.prompts, 8);
    qInfo("%s on the %s path: last logits bit-equal on %d of %d prompts (min Pearson %.7f), greedy continuations "
          "identical on %d",
          qPrintable(label), engine::simd_level_name(engine::simd_level()).data(), a.bit_equal, a.prompts,
          a.min_pearson, a.identical);
    if (bits_claimed)
        QVERIFY2(a.bit_equal == a.prompts && a.identical == a.prompts, qPrintable(label + ": " + a.first_difference));
    QVERIFY2(a.min_pearson >= 0.9999, qPrintable(QString("%1: Pearson %2").arg(label).arg(a.min_pearson)));
}

} // namespace testsupport
