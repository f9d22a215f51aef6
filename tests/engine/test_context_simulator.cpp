// SPDX-License-Identifier: GPL-3.0-or-later
// The context-window fill simulator: inputs grow by the whole history, prefix caching recomputes
// only what changed, every overflow policy keeps each request within the window, and turn counts
// come from the real tokenizer.
#include "chat/context_simulator.h"
#include "model/model.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

#include <QTest>
#include <random>

using namespace engine;

namespace {

std::vector<SimTurn> conversation(uint32_t system, uint32_t pairs, uint32_t user, uint32_t reply)
{
    std::vector<SimTurn> turns;
    if (system)
        turns.push_back({"system", system});
    for (uint32_t i = 0; i < pairs; ++i) {
        turns.push_back({"user", user});
        turns.push_back({"assistant", reply});
    }
    return turns;
}

} // namespace

class TestContextSimulator : public QObject {
    Q_OBJECT
private slots:
    void historyIsResentEveryTurn();
    void dropOldestDropsTheSystemPromptFirst();
    void keepSystemPromptKeepsIt();
    void slidingWindowCutsTheOldestTurn();
    void everyPolicyStaysWithinTheWindow();
    void aTurnTooLargeForTheWindowIsReported();
    void countsComeFromTheTokenizer();
};

void TestContextSimulator::historyIsResentEveryTurn()
{
    const auto r = simulate_context(conversation(50, 5, 100, 200), 8192, OverflowPolicy::DropOldest);
    QCOMPARE(r.size(), std::size_t(5));
    uint64_t without = 0;
    for (uint32_t i = 0; i < 5; ++i) {
        QCOMPARE(r[i].input_tokens, 50 + i * 300 + 100);
        QCOMPARE(r[i].output_tokens, 200u);
        QVERIFY(!r[i].overflow);
        QCOMPARE(r[i].recomputed_tokens, i == 0 ? 150u : 100u); // only the new user turn
        without += r[i].input_tokens;
        QCOMPARE(r[i].processed_without_cache, without);
    }
    QCOMPARE(r.back().processed_with_cache, uint64_t(150 + 4 * 100));
}

void TestContextSimulator::dropOldestDropsTheSystemPromptFirst()
{
    const auto r = simulate_context(conversation(50, 6, 100, 200), 1000, OverflowPolicy::DropOldest);
    // Request 3 (turn 7): 50 + 3·300 + 100 = 1,050 + reply 200 > 1,000: the input may hold 800.
    QVERIFY(!r[1].overflow);
    QVERIFY(r[3].overflow);
    // Dropping the system prompt (50), then turn 1 (100) leaves 900: turn 2 (200) goes too.
    QCOMPARE(r[3].kept.front(), 3u);
    QCOMPARE(r[3].dropped_turns, 3u);
    QCOMPARE(r[3].input_tokens, 700u);
    QCOMPARE(r[3].recomputed_tokens, r[3].input_tokens); // the front changed: nothing to reuse
}

void TestContextSimulator::keepSystemPromptKeepsIt()
{
    const auto r = simulate_context(conversation(50, 6, 100, 200), 1000, OverflowPolicy::KeepSystemPrompt);
    for (const SimRequest& q : r) {
        QCOMPARE(q.kept.front(), 0u);
        QVERIFY(q.input_tokens + q.output_tokens <= 1000);
    }
    QVERIFY(r[3].overflow);
    QCOMPARE(r[3].recomputed_tokens, r[3].input_tokens - 50); // the system prompt stays cached
}

void TestContextSimulator::slidingWindowCutsTheOldestTurn()
{
    const auto r = simulate_context(conversation(50, 6, 100, 200), 1000, OverflowPolicy::SlidingWindow);
    for (const SimRequest& q : r) {
        if (q.overflow)
            QCOMPARE(q.input_tokens + q.output_tokens, 1000u); // the window exactly full
        QCOMPARE(q.kept.back(), q.turn);
    }
    QVERIFY(r[3].overflow);
    QCOMPARE(r[3].input_tokens, 800u);
    // Turns 7…3 hold 700 of the 800 tokens: 100 of turn 2 (a 200-token reply) are kept, 100 cut.
    QCOMPARE(r[3].kept.front(), 2u);
    QCOMPARE(r[3].kept_tokens.front(), 100u);
    QCOMPARE(r[3].cut_tokens, 100u);
}

void TestContextSimulator::everyPolicyStaysWithinTheWindow()
{
    std::mt19937 rng(5);
    const auto draw = [&](uint32_t n) { return uint32_t(rng() % n); };
    for (int trial = 0; trial < 300; ++trial) {
        std::vector<SimTurn> turns;
        if (rng() % 2)
            turns.push_back({"system", 1 + draw(300)});
        const int pairs = 1 + int(draw(12));
        for (int i = 0; i < pairs; ++i) {
            turns.push_back({"user", 1 + draw(400)});
            if (i + 1 < pairs || rng() % 2)
                turns.push_back({"assistant", 1 + draw(400)});
        }
        const uint32_t window = 500 + draw(3000);
        for (OverflowPolicy p :
             {OverflowPolicy::DropOldest, OverflowPolicy::KeepSystemPrompt, OverflowPolicy::SlidingWindow}) {
            const auto requests = simulate_context(turns, window, p);
            uint64_t previous_with = 0, previous_without = 0;
            for (const SimRequest& q : requests) {
                if (q.fits)
                    QVERIFY2(q.input_tokens + q.output_tokens <= window,
                             qPrintable(QString("policy %1 trial %2").arg(int(p)).arg(trial)));
                QVERIFY(q.recomputed_tokens <= q.input_tokens);
                QVERIFY(q.processed_with_cache >= previous_with && q.processed_without_cache >= previous_without);
                QVERIFY(q.processed_with_cache <= q.processed_without_cache);
                QCOMPARE(q.kept.size(), q.kept_tokens.size());
                QCOMPARE(uint32_t(q.kept.size()) + q.dropped_turns, q.turn + 1);
                previous_with = q.processed_with_cache;
                previous_without = q.processed_without_cache;
            }
        }
    }
}

void TestContextSimulator::aTurnTooLargeForTheWindowIsReported()
{
    std::vector<SimTurn> turns{{"user", 900}, {"assistant", 200}};
    const auto r = simulate_context(turns, 1000, OverflowPolicy::DropOldest);
    QCOMPARE(r.size(), std::size_t(1));
    QVERIFY(r[0].overflow);
    QVERIFY(!r[0].fits);
}

void TestContextSimulator::countsComeFromTheTokenizer()
{
    REQUIRE_DEFAULT_MODEL(path);
    const auto model = Model::load(path);
    const ChatMessage m{"user", "Why is the sky blue? Explain with Rayleigh scattering."};
    const uint32_t n = count_turn_tokens(model->tokenizer(), ChatFormat::Gemma, m);
    const std::string rendered = render_chat(ChatFormat::Gemma, {m}, false);
    QCOMPARE(n,
             uint32_t(model->tokenizer().encode_ids(rendered, {.add_special = false, .parse_special = true}).size()));
    QVERIFY(n > uint32_t(
                    model->tokenizer().encode_ids(m.content, {.add_special = false}).size())); // turn markers count too
}

QTEST_GUILESS_MAIN(TestContextSimulator)
#include "test_context_simulator.moc"
