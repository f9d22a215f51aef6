// SPDX-License-Identifier: GPL-3.0-or-later
// The CPU forward pass against llama.cpp on both real models — the default model (Gemma 3 270M) and
// the chat model (Qwen2.5-Coder 0.5B Instruct) — with fixtures from tests/reference/make_logit_fixtures.py
// (llama.cpp built for AVX2, weight repacking and flash attention off; the settings are recorded in
// each file). Two sets per model: the 12 hand-written prompts (all logits kept) and the 96 prompts of
// tests/reference/make_parity_prompts.py (prose, facts, code, chat turns in the model's template,
// ten languages, structured text, numbers, edge cases, texts of 525–910 tokens; the leading 40
// logits and a 4,096-id sample kept, all logits for two), and the 12 hand-written prompts again run
// by llama.cpp with its default weight repacking (the repacked set: the leading 40 and a sample; the
// engine then runs in llama.cpp's repacked order, WeightOrder::Repacked), and once more with llama.cpp's
// default settings as its tools run them — weight repacking and flash attention on (-fa auto, which a
// CPU resolves to on), the engine then as the app and the CLI run by default (the default set).
// TOKENSCOPE_FIXTURES=original|grown|repacked|default picks one set (ctest runs each as its own
// entry); unset, all four.
// TOKENSCOPE_PARITY_STEPS=N follows each greedy continuation for its first N of 64 steps (default 64;
// ctest's grown entry follows 16: its 192 prompts' decode steps were most of CI's longest suite, and
// bench/parity_every_path.sh follows all 64 on every kernel path).
//
// Every kernel path computes the AVX2 kernels' arithmetic (test_vec_dot compares bits), so against
// the AVX2 fixtures the claim is bit-equality: the last position's logits equal llama.cpp's bit for
// bit and every 64-token greedy continuation is identical. The tolerance criteria are checked as
// well, and are what a fixture from another build would be held to: Pearson ≥ 0.9995, the same
// top-10 set (in the same order wherever neighbouring logits differ by more than 0.1), greedy
// continuations parting only where llama.cpp's two leading candidates were within 0.1 logit.
#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "logit_compare.h"
#include "model/model.h"
#include "quant/vec_dot.h"
#include "session/session.h"
#include "test_paths.h"

#include <QTest>
#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>

using namespace engine;

using namespace testsupport;

namespace {

struct ReferenceModel {
    const char* name;
    // under tests/data/logits: the hand-written prompts, the generated ones, the hand-written ones run
    // by llama.cpp with its default weight repacking, and with its default settings (repacking, flash
    // attention)
    const char* fixtures[4];
    std::string (*path)();
    const char* sha256; // of the model file the fixtures were made from
};

const ReferenceModel kModels[] = {
    {"gemma3-270m",
     {"gemma3-270m.gguf", "grown-gemma3-270m.gguf", "gemma3-270m-repack.gguf", "gemma3-270m-default.gguf"},
     testsupport::default_model_path,
     "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"},
    {"qwen2.5-coder-0.5b",
     {"qwen2.5-coder-0.5b.gguf", "grown-qwen2.5-coder-0.5b.gguf", "qwen2.5-coder-0.5b-repack.gguf",
      "qwen2.5-coder-0.5b-default.gguf"},
     testsupport::chat_model_path,
     "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"},
};
const char* const kSetNames[5] = {"original", "grown", "repacked", "default", "file"};
constexpr int kMinPrompts[5] = {12, 96, 12, 12, 1};
constexpr int kFileSet = 4; // TOKENSCOPE_FIXTURES=/path/to/fixture.gguf: one file, for the model it was made from

// The fixture sets this run checks (TOKENSCOPE_FIXTURES=original|grown|repacked|default|a fixture file
// made with make_logit_fixtures.py, e.g. from prompts of your own; all four sets when unset).
std::vector<int> selected_sets()
{
    const QByteArray only = qgetenv("TOKENSCOPE_FIXTURES");
    if (only.isEmpty())
        return {0, 1, 2, 3};
    for (int s = 0; s < kFileSet; ++s)
        if (only == kSetNames[s])
            return {s};
    if (only.endsWith(".gguf"))
        return {kFileSet};
    qFatal("TOKENSCOPE_FIXTURES=%s: expected original, grown, repacked, default or a .gguf fixture", only.constData());
}

// How many of a continuation's 64 steps are followed (TOKENSCOPE_PARITY_STEPS, 1 … 64; 64 when unset).
std::size_t greedy_steps()
{
    const QByteArray text = qgetenv("TOKENSCOPE_PARITY_STEPS");
    if (text.isEmpty())
        return 64;
    bool ok = false;
    const int n = text.toInt(&ok);
    if (!ok || n < 1 || n > 64)
        qFatal("TOKENSCOPE_PARITY_STEPS=%s: expected a number of steps from 1 to 64", text.constData());
    return std::size_t(n);
}

std::shared_ptr<const gguf::GgufFile> open_fixture(int model, int set)
{
    if (set == kFileSet)
        return gguf::GgufFile::open(qgetenv("TOKENSCOPE_FIXTURES").toStdString());
    return gguf::GgufFile::open(testsupport::data_dir() + "/logits/" + kModels[model].fixtures[set]);
}

// Whether a fixture was made from model m (a given file is checked against its own model only).
bool made_from(const gguf::GgufFile& f, int m)
{
    return f.get_string("tokenscope.model.sha256").value_or("") == kModels[m].sha256;
}

// llama.cpp's last-position logits as a fixture keeps them: all of them, or the leading 40 and a
// seeded sample of the vocabulary (compact fixtures).
struct ReferenceLogits {
    std::vector<float> all;          // every logit (empty for a compact prompt)
    std::vector<int32_t> sample_ids; // compact: the sampled ids and their logits
    std::vector<float> sample;
    std::vector<int32_t> top; // the leading ids, best first (ties to the lower id)
    std::vector<float> top_values;

    static ReferenceLogits read(const gguf::GgufFile& f, const std::string& p)
    {
        ReferenceLogits r;
        r.all = tensor_values<float>(f, p + ".logits");
        if (!r.all.empty()) {
            r.top = top_ids(r.all, 40);
            for (int32_t id : r.top)
                r.top_values.push_back(r.all[std::size_t(id)]);
            return r;
        }
        r.sample_ids = tensor_values<int32_t>(f, "sample_ids");
        r.sample = tensor_values<float>(f, p + ".sample_logits");
        r.top = tensor_values<int32_t>(f, p + ".top_ids");
        r.top_values = tensor_values<float>(f, p + ".top_logits");
        return r;
    }
    bool valid(std::size_t n_vocab) const
    {
        return (all.size() == n_vocab || (!sample.empty() && sample.size() == sample_ids.size())) && top.size() >= 10 &&
               top.size() == top_values.size();
    }
    // Calls f(id, llama.cpp's logit) for every logit the fixture holds.
    template <typename F> void for_each(F&& f) const
    {
        if (!all.empty()) {
            for (std::size_t i = 0; i < all.size(); ++i)
                f(int32_t(i), all[i]);
            return;
        }
        for (std::size_t i = 0; i < sample.size(); ++i)
            f(sample_ids[i], sample[i]);
        for (std::size_t i = 0; i < top.size(); ++i)
            f(top[i], top_values[i]);
    }
    double correlation(std::span<const float> ours) const
    {
        if (!all.empty())
            return pearson(ours, all);
        std::vector<float> mine;
        for (int32_t id : sample_ids)
            mine.push_back(ours[std::size_t(id)]);
        return pearson(mine, sample);
    }
};

// The top-10 rule on a reference that may hold only its leading logits: the same ten ids, where an
// id may cross the boundary only if llama.cpp's logit for it is within 0.1 of its 10th; an id of
// ours beyond the reference's leading 40 counts as tied only if the 40th itself is within 0.1.
QString top10_difference(const ReferenceLogits& ref, std::span<const float> ours)
{
    const float tenth = ref.top_values[9];
    const auto reference_logit = [&](int32_t id) -> std::optional<float> {
        for (std::size_t i = 0; i < ref.top.size(); ++i)
            if (ref.top[i] == id)
                return ref.top_values[i];
        return std::nullopt;
    };
    const auto mine = top_ids(ours, 10);
    for (std::size_t i = 0; i < 10; ++i) {
        if (std::find(mine.begin(), mine.end(), ref.top[i]) == mine.end() && ref.top_values[i] - tenth > 0.1f)
            return QString("llama.cpp's rank %1 (id %2) is not in our top 10").arg(i).arg(ref.top[i]);
        const auto r = reference_logit(mine[i]);
        const bool tied = r ? std::fabs(*r - tenth) <= 0.1f : ref.top_values.back() >= tenth - 0.1f;
        if (std::find(ref.top.begin(), ref.top.begin() + 10, mine[i]) == ref.top.begin() + 10 && !tied)
            return QString("our rank %1 (id %2) is not in llama.cpp's top 10").arg(i).arg(mine[i]);
    }
    for (std::size_t i = 0; i < 10; ++i) {
        const bool separated = (i == 0 || ref.top_values[i - 1] - ref.top_values[i] > 0.1f) &&
                               (i == 9 || ref.top_values[i] - ref.top_values[i + 1] > 0.1f);
        if (separated && mine[i] != ref.top[i])
            return QString("rank %1 differs (ours %2, llama.cpp %3)").arg(i).arg(mine[i]).arg(ref.top[i]);
    }
    return {};
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
    void everyPromptAndStepMatched_data();
    void everyPromptAndStepMatched();

private:
    struct Loaded {
        std::shared_ptr<const Model> model;
        std::unique_ptr<Session> session; // llama.cpp's plain order (--no-repack -fa off)
        // its repacked order, and with flash attention too (made when first needed)
        std::unique_ptr<Session> repacked_session, flash_session;
        // The session in the order the fixture was made in (tokenscope.use_extra_bufts: repacking on;
        // tokenscope.flash_attn: enabled, its long decode steps split among tokenscope.n_threads threads).
        Session& session_for(const gguf::GgufFile& fixture)
        {
            const bool repacked = fixture.get_bool("tokenscope.use_extra_bufts").value_or(false);
            const bool flash = fixture.get_string("tokenscope.flash_attn").value_or("") == "enabled";
            if (!repacked && !flash)
                return *session;
            std::unique_ptr<Session>& s = flash ? flash_session : repacked_session;
            if (!s)
                s = std::make_unique<Session>(
                    model,
                    make_cpu_backend(model,
                                     {.threads = 0,
                                      .n_ctx = 4096,
                                      .order = repacked ? WeightOrder::Repacked : WeightOrder::Plain,
                                      .flash_attention = flash,
                                      .flash_splits = uint32_t(fixture.get_int("tokenscope.n_threads").value_or(0))}),
                    2048);
            return *s;
        }
    };
    struct Tally {
        int continued = 0;   // prompts whose greedy continuation was followed
        int identical = 0;   // …and matched llama.cpp's for every step followed
        int bit_equal = 0;   // prompts whose compared logits were llama.cpp's bits
        float max_delta = 0; // over every compared logit
        double min_pearson = 1;
        QStringList divergences;
    };
    // The model of row `which`, loaded once; nullptr when it is not installed (the caller skips or fails).
    Loaded* load(int which);
    std::map<int, Loaded> m_loaded;
    std::map<std::pair<int, int>, Tally> m_tally; // (model, set)
};

TestForwardReference::Loaded* TestForwardReference::load(int which)
{
    if (auto it = m_loaded.find(which); it != m_loaded.end())
        return &it->second;
    const std::string path = kModels[which].path();
    if (path.empty())
        return nullptr;
    Loaded l;
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
    QTest::addColumn<int>("set");
    QTest::addColumn<int>("index");
    for (int set : selected_sets())
        for (int m = 0; m < int(std::size(kModels)); ++m) {
            const auto f = open_fixture(m, set);
            if (set == kFileSet && !made_from(*f, m))
                continue;
            for (int i = 0; i < int(*f->get_int("tokenscope.n_prompts")); ++i)
                QTest::newRow(
                    qPrintable(QString("%1/%2/%3")
                                   .arg(kModels[m].name, kSetNames[set],
                                        QString::fromStdString(std::string(*f->get_string(prompt_key(i) + ".name"))))))
                    << m << set << i;
        }
}

void TestForwardReference::lastLogitsAndGreedyMatchLlamaCpp()
{
    QFETCH(int, model);
    QFETCH(int, set);
    QFETCH(int, index);
    LOAD_OR_SKIP(l, model);
    const auto fixture = open_fixture(model, set);
    Tally& tally = m_tally[{model, set}];
    QCOMPARE(std::string(*fixture->get_string("tokenscope.model.sha256")), std::string(kModels[model].sha256));
    QVERIFY(*fixture->get_int("tokenscope.n_prompts") >= kMinPrompts[set]);
    const bool bits_claimed = fixture->get_string("tokenscope.llama_cpp.cpu_variant").value_or("") == "avx2";
    const std::string p = prompt_key(index);
    const auto tokens = tensor_values<int32_t>(*fixture, p + ".tokens");
    const ReferenceLogits reference = ReferenceLogits::read(*fixture, p);
    QVERIFY(!tokens.empty());
    QVERIFY(reference.valid(std::size_t(l->model->config().n_vocab)));
    // The fixture's prompt text tokenizes to the same ids here.
    if (auto text = fixture->get_string(p + ".text"))
        QCOMPARE(l->model->tokenizer().encode_ids(*text), tokens);

    // 1. The last position's logits: llama.cpp's bits where that is claimed, close to them everywhere.
    // From an empty cache, as llama.cpp evaluated it: a prefix kept from the previous prompt (its BOS
    // at least) would leave a batch one or more rows shorter, and batch sizes choose summation orders.
    Session& session = l->session_for(*fixture);
    session.truncate(0);
    session.prefill(tokens);
    const auto ours = session.logits();
    QCOMPARE(ours.size(), std::size_t(l->model->config().n_vocab));
    const double r = reference.correlation(ours);
    float max_delta = 0;
    int compared = 0, differing = 0;
    reference.for_each([&](int32_t id, float want) {
        const float got = ours[std::size_t(id)];
        max_delta = std::max(max_delta, std::abs(got - want));
        differing += std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(want);
        ++compared;
    });
    qInfo("%s: %zu tokens, Pearson %.7f, max |Δ| %g over %d logits", p.c_str(), tokens.size(), r, double(max_delta),
          compared);
    tally.max_delta = std::max(tally.max_delta, max_delta);
    tally.min_pearson = std::min(tally.min_pearson, r);
    tally.bit_equal += differing == 0;
    if (bits_claimed)
        QVERIFY2(differing == 0, qPrintable(QString("%1 of %2 logits differ from llama.cpp's AVX2 build (max |Δ| %3)")
                                                .arg(differing)
                                                .arg(compared)
                                                .arg(double(max_delta))));
    QVERIFY2(r >= 0.9995, qPrintable(QString("Pearson %1 over %2 tokens").arg(r, 0, 'f', 6).arg(tokens.size())));
    const QString top10 = top10_difference(reference, ours);
    QVERIFY2(top10.isEmpty(), qPrintable(top10));

    // 2. The greedy continuation from that cache: identical to llama.cpp's 64 tokens (or the first
    // TOKENSCOPE_PARITY_STEPS of them), or (where bit-equality is not claimed) parting only where
    // llama.cpp's two leading candidates were within 0.1 logit of each other.
    const auto greedy = tensor_values<int32_t>(*fixture, p + ".greedy");
    const auto gap = tensor_values<float>(*fixture, p + ".gap");
    QCOMPARE(greedy.size(), std::size_t(64));
    QCOMPARE(gap.size(), greedy.size());
    const std::size_t steps = greedy_steps();
    std::size_t step = 0;
    QString gap_difference; // each step's logits, to the bit: their top-1 − top-2 gap is llama.cpp's
    for (; step < steps; ++step) {
        const auto top = top_ids(session.logits(), 2);
        if (top[0] != greedy[step])
            break;
        const float our_gap = session.logits()[std::size_t(top[0])] - session.logits()[std::size_t(top[1])];
        if (gap_difference.isEmpty() && std::bit_cast<uint32_t>(our_gap) != std::bit_cast<uint32_t>(gap[step]))
            gap_difference = QString("step %1: top-2 gap %2, llama.cpp's %3")
                                 .arg(step)
                                 .arg(double(our_gap), 0, 'g', 9)
                                 .arg(double(gap[step]), 0, 'g', 9);
        session.decode(top[0]);
    }
    ++tally.continued;
    if (step == steps) {
        ++tally.identical;
        if (bits_claimed)
            QVERIFY2(gap_difference.isEmpty(),
                     qPrintable("a decode step's logits differ from llama.cpp's AVX2 build: " + gap_difference));
        return;
    }
    tally.divergences
        << QString("%1 at step %2 (llama.cpp top-2 gap %3)").arg(QString::fromStdString(p)).arg(step).arg(gap[step]);
    QVERIFY2(!bits_claimed,
             qPrintable("greedy continuation parted from llama.cpp's AVX2 build: " + tally.divergences.last()));
    QVERIFY2(gap[step] < 0.1f, qPrintable("diverged where llama.cpp was decisive: " + tally.divergences.last()));
}

void TestForwardReference::everyPromptAndStepMatched_data()
{
    QTest::addColumn<int>("model");
    QTest::addColumn<int>("set");
    for (int set : selected_sets())
        for (int m = 0; m < int(std::size(kModels)); ++m)
            if (set != kFileSet || made_from(*open_fixture(m, set), m))
                QTest::newRow(qPrintable(QString("%1/%2").arg(kModels[m].name, kSetNames[set]))) << m << set;
}

void TestForwardReference::everyPromptAndStepMatched()
{
    QFETCH(int, model);
    QFETCH(int, set);
    LOAD_OR_SKIP(l, model);
    const auto fixture = open_fixture(model, set);
    const int prompts = int(*fixture->get_int("tokenscope.n_prompts"));
    const Tally& t = m_tally[{model, set}];
    QCOMPARE(t.continued, prompts); // every prompt above was followed (none stopped before its greedy part)
    qInfo("%s/%s: %d prompts; last logits bit-equal on %d, min Pearson %.7f, max |Δ| %g; identical greedy "
          "continuations (%zu steps): %d of %d%s",
          kModels[model].name, kSetNames[set], prompts, t.bit_equal, t.min_pearson, double(t.max_delta), greedy_steps(),
          t.identical, prompts, t.divergences.isEmpty() ? "" : qPrintable("; diverged: " + t.divergences.join(", ")));
    if (fixture->get_string("tokenscope.llama_cpp.cpu_variant").value_or("") == "avx2") {
        QCOMPARE(t.bit_equal, prompts);
        QCOMPARE(t.identical, prompts);
    }
}

QTEST_GUILESS_MAIN(TestForwardReference)
#include "test_forward_reference.moc"
