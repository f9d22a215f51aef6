// SPDX-License-Identifier: GPL-3.0-or-later
// A long generation on the default model with resident memory sampled: after the first 64 tokens
// (buffers sized, pages touched), the growth of the process's resident set stays within what the KV
// cache allocated meanwhile plus a fixed 32 MiB — nothing else may grow with the sequence. Tokens/s
// early and late are printed (not asserted). CI runs 1,000 tokens; `bench/soak.sh` runs 10,000
// (TOKENSCOPE_SOAK_TOKENS).
#include "backend/backend.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "session/session.h"
#include "test_paths.h"

#include <QTest>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <unistd.h>

using namespace engine;

namespace {
uint64_t resident_bytes()
{
    std::ifstream statm("/proc/self/statm");
    uint64_t size = 0, resident = 0;
    statm >> size >> resident;
    return resident * uint64_t(::sysconf(_SC_PAGESIZE));
}
} // namespace

class TestSoak : public QObject {
    Q_OBJECT
private slots:
    void residentMemoryStaysWithinTheCache();
};

void TestSoak::residentMemoryStaysWithinTheCache()
{
    REQUIRE_DEFAULT_MODEL(path);
    const char* env = std::getenv("TOKENSCOPE_SOAK_TOKENS");
    const int n_tokens = env ? std::atoi(env) : 1000;
    QVERIFY(n_tokens > 128);
    const auto model = Model::load(path);
    Session session(model, make_cpu_backend(model, {.threads = 0, .n_ctx = uint32_t(n_tokens + 256)}));
    SamplerConfig sc;
    sc.seed = 11;
    Sampler sampler(sc);
    std::vector<int32_t> history = model->tokenizer().encode_ids("Once upon a time, in a village by the sea,");
    session.prefill(history);

    constexpr int kWarmup = 64;
    uint64_t rss0 = 0, kv0 = 0, peak_growth = 0, peak_allowed = 0;
    auto t0 = std::chrono::steady_clock::now();
    double early_tps = 0;
    for (int i = 0; i < n_tokens; ++i) {
        const int32_t token = sampler.sample(session.logits(), history).token;
        history.push_back(token);
        session.decode(token);
        if (i + 1 == kWarmup) {
            rss0 = resident_bytes();
            kv0 = session.backend().kv_cache().accounting().bytes_allocated;
            early_tps = kWarmup / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            t0 = std::chrono::steady_clock::now();
        }
        if (i + 1 > kWarmup && (i + 1) % 64 == 0) {
            const uint64_t rss = resident_bytes();
            const uint64_t kv = session.backend().kv_cache().accounting().bytes_allocated;
            const uint64_t growth = rss > rss0 ? rss - rss0 : 0;
            const uint64_t allowed = (kv - kv0) + (32ull << 20);
            peak_growth = std::max(peak_growth, growth);
            peak_allowed = std::max(peak_allowed, allowed);
            QVERIFY2(growth <= allowed,
                     qPrintable(QString("after %1 tokens the resident set grew by %2 MiB; the KV cache by %3 MiB")
                                    .arg(i + 1)
                                    .arg(double(growth) / 1048576.0, 0, 'f', 1)
                                    .arg(double(kv - kv0) / 1048576.0, 0, 'f', 1)));
        }
    }
    const double late_tps =
        (n_tokens - kWarmup) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    qInfo("%d tokens: resident set grew at most %.1f MiB after token %d (bound %.1f MiB = KV cache growth + 32 MiB); "
          "%.1f tokens/s over the first %d, %.1f over the rest",
          n_tokens, double(peak_growth) / 1048576.0, kWarmup, double(peak_allowed) / 1048576.0, early_tps, kWarmup,
          late_tps);
}

QTEST_GUILESS_MAIN(TestSoak)
#include "test_soak.moc"
