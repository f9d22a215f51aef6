// SPDX-License-Identifier: GPL-3.0-or-later
// The "what changed" diff between two tokenizations: exact change ranges on real edits with the
// default model, every kind of change, and randomized properties — applying the changes to the old
// tokens gives the new ones, unchanged tokens really are the same (id and bytes), and as many
// tokens as possible are unchanged (the longest common subsequence, checked by dynamic programming).
#include "gguf/gguf_file.h"
#include "test_paths.h"
#include "tokenizer/token_diff.h"
#include "tokenizer/tokenizer.h"
#include "util/utf8.h"

#include <QElapsedTimer>
#include <QTest>
#include <map>
#include <memory>
#include <random>

using engine::diff_tokens;
using engine::Token;
using engine::TokenChange;
using engine::TokenChangeKind;
using engine::TokenDiff;
using engine::TokenId;
using engine::Tokenizer;

namespace {

const Tokenizer& tokenizer_for(const std::string& path)
{
    static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
    auto& t = cache[path];
    if (!t)
        t = std::make_unique<Tokenizer>(engine::Vocab::from_gguf(*engine::gguf::GgufFile::open(path)));
    return *t;
}

std::vector<Token> tokens_of(const Tokenizer& t, std::string_view text)
{
    return t.encode(text, {.add_special = false, .parse_special = false});
}

TokenDiff diff_texts(const Tokenizer& t, std::string_view old_text, std::string_view new_text)
{
    return diff_tokens(old_text, tokens_of(t, old_text), new_text, tokens_of(t, new_text));
}

bool same_change(const TokenChange& c, TokenChangeKind kind, uint32_t old_first, uint32_t old_count, uint32_t new_first,
                 uint32_t new_count)
{
    return c.kind == kind && c.old_first == old_first && c.old_count == old_count && c.new_first == new_first &&
           c.new_count == new_count;
}

QString describe(const TokenDiff& d)
{
    QStringList s;
    for (const auto& c : d.changes)
        s << QString("%1 old[%2+%3] new[%4+%5]")
                 .arg(QString::fromUtf8(engine::token_change_kind_name(c.kind).data()))
                 .arg(c.old_first)
                 .arg(c.old_count)
                 .arg(c.new_first)
                 .arg(c.new_count);
    return s.join("; ") + QString(" (delta %1)").arg(d.count_delta);
}

std::string_view bytes_of(std::string_view text, const Token& t)
{
    return text.substr(t.byte_begin, t.byte_end - t.byte_begin);
}

// Checks the diff's invariants; returns the number of unchanged tokens, or -1 with `why` set.
long check_diff(std::string_view old_text, const std::vector<Token>& a, std::string_view new_text,
                const std::vector<Token>& b, const TokenDiff& d, QString* why)
{
    if (d.count_delta != static_cast<int64_t>(b.size()) - static_cast<int64_t>(a.size())) {
        *why = "count_delta";
        return -1;
    }
    std::vector<TokenId> rebuilt;
    std::size_t o = 0, n = 0;
    long unchanged = 0;
    auto keep_until = [&](std::size_t old_end, std::size_t new_end) {
        if (old_end < o || new_end < n || old_end - o != new_end - n)
            return false;
        for (; o < old_end; ++o, ++n) {
            if (a[o].id != b[n].id || bytes_of(old_text, a[o]) != bytes_of(new_text, b[n]))
                return false;
            rebuilt.push_back(a[o].id);
            ++unchanged;
        }
        return true;
    };
    for (const auto& c : d.changes) {
        if (c.old_count == 0 && c.new_count == 0) {
            *why = "an empty change";
            return -1;
        }
        if (!keep_until(c.old_first, c.new_first)) {
            *why = "tokens between changes differ or misalign";
            return -1;
        }
        if (c.old_first + c.old_count > a.size() || c.new_first + c.new_count > b.size()) {
            *why = "a change past the end";
            return -1;
        }
        const TokenChangeKind expected = c.old_count == 0                       ? TokenChangeKind::Inserted
                                         : c.new_count == 0                     ? TokenChangeKind::Deleted
                                         : c.old_count == 1 && c.new_count >= 2 ? TokenChangeKind::Split
                                         : c.old_count >= 2 && c.new_count == 1 ? TokenChangeKind::Merged
                                                                                : TokenChangeKind::Replaced;
        if (c.kind != expected) {
            *why = "wrong kind";
            return -1;
        }
        for (uint32_t i = 0; i < c.new_count; ++i)
            rebuilt.push_back(b[c.new_first + i].id);
        o = c.old_first + c.old_count;
        n = c.new_first + c.new_count;
    }
    if (!keep_until(a.size(), b.size())) {
        *why = "the tail after the last change differs";
        return -1;
    }
    std::vector<TokenId> expected_ids;
    for (const auto& t : b)
        expected_ids.push_back(t.id);
    if (rebuilt != expected_ids) {
        *why = "applying the changes does not give the new ids";
        return -1;
    }
    return unchanged;
}

// Length of a longest common subsequence by the textbook dynamic programme.
long lcs_length(std::string_view old_text, const std::vector<Token>& a, std::string_view new_text,
                const std::vector<Token>& b)
{
    std::vector<std::vector<long>> L(a.size() + 1, std::vector<long>(b.size() + 1, 0));
    for (std::size_t i = 1; i <= a.size(); ++i)
        for (std::size_t j = 1; j <= b.size(); ++j)
            L[i][j] = (a[i - 1].id == b[j - 1].id && bytes_of(old_text, a[i - 1]) == bytes_of(new_text, b[j - 1]))
                          ? L[i - 1][j - 1] + 1
                          : std::max(L[i - 1][j], L[i][j - 1]);
    return L[a.size()][b.size()];
}

// Random tokens over a tiny alphabet so that many coincide: id 0..2, 1 or 2 bytes ('a' + id).
// The same id with another length is a different token (its bytes differ).
std::vector<Token> random_tokens(std::mt19937& rng, std::size_t count, std::string& text)
{
    std::vector<Token> out;
    text.clear();
    for (std::size_t i = 0; i < count; ++i) {
        const auto id = static_cast<TokenId>(rng() % 3);
        const std::size_t len = 1 + rng() % 2;
        const auto begin = static_cast<uint32_t>(text.size());
        text.append(len, static_cast<char>('a' + id));
        out.push_back({id, begin, static_cast<uint32_t>(text.size())});
    }
    return out;
}

} // namespace

class TestTokenDiff : public QObject {
    Q_OBJECT
private slots:
    void misspellingSplitsAWord();
    void fixingTheMisspellingMerges();
    void insertAndDeleteAtBothEnds();
    void identicalTextsHaveNoChanges();
    void offsetsDoNotMatterBytesDo();
    void everyKind();
    void randomTokenListsAreOptimal();
    void randomEditsOfRealText();
    void unrelatedLongTextsFallBackToOneReplacement();
    void longTextWithOneEditIsFast();
};

void TestTokenDiff::misspellingSplitsAWord()
{
    REQUIRE_DEFAULT_MODEL(path);
    const Tokenizer& t = tokenizer_for(path);
    // Gemma 3: "The", "▁quick", "▁brown", "▁fox" → "The", "▁qu", "ik", "c", "▁brown", "▁fox".
    const TokenDiff d = diff_texts(t, "The quick brown fox", "The quikc brown fox");
    QCOMPARE(d.changes.size(), std::size_t(1));
    QVERIFY2(same_change(d.changes[0], TokenChangeKind::Split, 1, 1, 1, 3), qPrintable(describe(d)));
    QCOMPARE(d.count_delta, int64_t(2));
    QCOMPARE(engine::token_change_kind_name(d.changes[0].kind), std::string_view("split"));
}

void TestTokenDiff::fixingTheMisspellingMerges()
{
    REQUIRE_DEFAULT_MODEL(path);
    const TokenDiff d = diff_texts(tokenizer_for(path), "The quikc brown fox", "The quick brown fox");
    QCOMPARE(d.changes.size(), std::size_t(1));
    QVERIFY2(same_change(d.changes[0], TokenChangeKind::Merged, 1, 3, 1, 1), qPrintable(describe(d)));
    QCOMPARE(d.count_delta, int64_t(-2));
}

void TestTokenDiff::insertAndDeleteAtBothEnds()
{
    REQUIRE_DEFAULT_MODEL(path);
    const Tokenizer& t = tokenizer_for(path);
    // At the end: "▁jumps" is new, nothing else moves although its offsets are new.
    TokenDiff d = diff_texts(t, "The quick brown fox", "The quick brown fox jumps");
    QCOMPARE(d.changes.size(), std::size_t(1));
    QVERIFY2(same_change(d.changes[0], TokenChangeKind::Inserted, 4, 0, 4, 1), qPrintable(describe(d)));
    QCOMPARE(d.count_delta, int64_t(1));
    d = diff_texts(t, "The quick brown fox jumps", "The quick brown fox");
    QCOMPARE(d.changes.size(), std::size_t(1));
    QVERIFY2(same_change(d.changes[0], TokenChangeKind::Deleted, 4, 1, 4, 0), qPrintable(describe(d)));
    // At the start: "The" becomes "Hello", "▁The" (the word gains its space), the rest shifts unchanged.
    d = diff_texts(t, "The quick brown fox", "Hello The quick brown fox");
    QCOMPARE(d.changes.size(), std::size_t(1));
    QVERIFY2(same_change(d.changes[0], TokenChangeKind::Split, 0, 1, 0, 2), qPrintable(describe(d)));
    QCOMPARE(d.count_delta, int64_t(1));
    d = diff_texts(t, "Hello The quick brown fox", "The quick brown fox");
    QVERIFY2(d.changes.size() == 1 && same_change(d.changes[0], TokenChangeKind::Merged, 0, 2, 0, 1),
             qPrintable(describe(d)));
    // From and to nothing.
    d = diff_texts(t, "", "The quick");
    QVERIFY2(d.changes.size() == 1 && same_change(d.changes[0], TokenChangeKind::Inserted, 0, 0, 0, 2),
             qPrintable(describe(d)));
    d = diff_texts(t, "The quick", "");
    QVERIFY2(d.changes.size() == 1 && same_change(d.changes[0], TokenChangeKind::Deleted, 0, 2, 0, 0),
             qPrintable(describe(d)));
    QVERIFY(diff_texts(t, "", "").changes.empty());
}

void TestTokenDiff::identicalTextsHaveNoChanges()
{
    REQUIRE_DEFAULT_MODEL(path);
    const std::string text = "It was a bright cold day in April, and the clocks were striking thirteen. 東京 🎉";
    const TokenDiff d = diff_texts(tokenizer_for(path), text, text);
    QVERIFY(d.changes.empty());
    QCOMPARE(d.count_delta, int64_t(0));
}

void TestTokenDiff::offsetsDoNotMatterBytesDo()
{
    // Same ids everywhere; only the bytes of token 1 differ ("ab" → "abc"), and the offsets after it shift.
    const std::string old_text = "ab|cd";
    const std::string new_text = "abc|cd";
    const std::vector<Token> a = {{7, 0, 2}, {8, 2, 3}, {9, 3, 5}};
    const std::vector<Token> b = {{7, 0, 3}, {8, 3, 4}, {9, 4, 6}};
    const TokenDiff d = diff_tokens(old_text, a, new_text, b);
    QVERIFY2(d.changes.size() == 1 && same_change(d.changes[0], TokenChangeKind::Replaced, 0, 1, 0, 1),
             qPrintable(describe(d)));
    // Tokens with no bytes (BOS) compare by id.
    const std::vector<Token> with_bos_a = {{1, 0, 0}, {7, 0, 2}};
    const std::vector<Token> with_bos_b = {{1, 0, 0}, {7, 0, 2}};
    QVERIFY(diff_tokens("ab", with_bos_a, "ab", with_bos_b).changes.empty());
}

void TestTokenDiff::everyKind()
{
    // Tokens are single letters; a token's id is its letter, except the merged "XY" (id 100).
    auto tokens = [](std::string_view text) {
        std::vector<Token> out;
        for (uint32_t i = 0; i < text.size(); ++i) {
            if (text.substr(i, 2) == "XY") {
                out.push_back({100, i, i + 2});
                ++i;
            } else {
                out.push_back({static_cast<TokenId>(text[i]), i, i + 1});
            }
        }
        return out;
    };
    auto diff = [&](std::string_view o, std::string_view n) { return diff_tokens(o, tokens(o), n, tokens(n)); };
    TokenDiff d = diff("abXYd", "abXcd");
    QVERIFY2(d.changes.size() == 1 && same_change(d.changes[0], TokenChangeKind::Split, 2, 1, 2, 2),
             qPrintable(describe(d)));
    d = diff("abXcd", "abXYd");
    QVERIFY2(d.changes.size() == 1 && same_change(d.changes[0], TokenChangeKind::Merged, 2, 2, 2, 1),
             qPrintable(describe(d)));
    d = diff("abcd", "abxd");
    QVERIFY2(d.changes.size() == 1 && same_change(d.changes[0], TokenChangeKind::Replaced, 2, 1, 2, 1),
             qPrintable(describe(d)));
    d = diff("abcd", "abxyzd");
    QVERIFY2(d.changes.size() == 1 && same_change(d.changes[0], TokenChangeKind::Split, 2, 1, 2, 3),
             qPrintable(describe(d)));
    d = diff("abcdef", "abxyef");
    QVERIFY2(d.changes.size() == 1 && same_change(d.changes[0], TokenChangeKind::Replaced, 2, 2, 2, 2),
             qPrintable(describe(d)));
    d = diff("abcd", "abzzcd");
    QVERIFY2(d.changes.size() == 1 && same_change(d.changes[0], TokenChangeKind::Inserted, 2, 0, 2, 2),
             qPrintable(describe(d)));
    d = diff("abzzcd", "abcd");
    QVERIFY2(d.changes.size() == 1 && same_change(d.changes[0], TokenChangeKind::Deleted, 2, 2, 2, 0),
             qPrintable(describe(d)));
    // Two separate edits are two changes, in order.
    d = diff("abcdefgh", "aBcdefGh");
    QVERIFY2(d.changes.size() == 2 && same_change(d.changes[0], TokenChangeKind::Replaced, 1, 1, 1, 1) &&
                 same_change(d.changes[1], TokenChangeKind::Replaced, 6, 1, 6, 1),
             qPrintable(describe(d)));
    for (auto kind : {TokenChangeKind::Inserted, TokenChangeKind::Deleted, TokenChangeKind::Split,
                      TokenChangeKind::Merged, TokenChangeKind::Replaced})
        QVERIFY(engine::token_change_kind_name(kind) != "?");
    QCOMPARE(engine::token_change_kind_name(TokenChangeKind::Merged), std::string_view("merged"));
}

void TestTokenDiff::randomTokenListsAreOptimal()
{
    std::mt19937 rng(20240611);
    for (int round = 0; round < 2000; ++round) {
        std::string old_text, new_text;
        const auto a = random_tokens(rng, rng() % 40, old_text);
        auto b = random_tokens(rng, rng() % 40, new_text);
        if (round % 3 == 0) { // a related pair: b is a with a few local edits
            new_text = old_text;
            b = a;
            const int edits = 1 + static_cast<int>(rng() % 3);
            for (int e = 0; e < edits && !b.empty(); ++e)
                b.erase(b.begin() + static_cast<long>(rng() % b.size()));
        }
        const TokenDiff d = diff_tokens(old_text, a, new_text, b);
        QString why;
        const long unchanged = check_diff(old_text, a, new_text, b, d, &why);
        QVERIFY2(unchanged >= 0, qPrintable(QString("round %1: %2: %3").arg(round).arg(why, describe(d))));
        QCOMPARE(unchanged, lcs_length(old_text, a, new_text, b));
    }
}

void TestTokenDiff::randomEditsOfRealText()
{
    // The BPE test vocabulary ships in tests/data, so this runs without the default model too.
    const std::string path = testsupport::data_dir() + "/tokenizer/bpe-llama-bpe.gguf";
    const Tokenizer& t = tokenizer_for(path);
    const std::string base = "The quick brown fox jumps over the lazy dog. It was a bright cold day in April, "
                             "and the clocks were striking thirteen. for (int i = 0; i < 10; ++i) sum += i;";
    const std::string insertions[] = {"x", " ", "the ", "ing", "42", "é", "\n", "ZZ"};
    std::mt19937 rng(7);
    for (int round = 0; round < 300; ++round) {
        std::string edited = base;
        const int edits = 1 + static_cast<int>(rng() % 3);
        for (int e = 0; e < edits; ++e) {
            const std::size_t at = rng() % (edited.size() + 1);
            if (rng() % 2 && at < edited.size())
                edited.erase(at, 1 + rng() % std::min<std::size_t>(4, edited.size() - at));
            else
                edited.insert(at, insertions[rng() % std::size(insertions)]);
        }
        if (!engine::utf8::is_valid(edited))
            continue;
        const auto a = tokens_of(t, base);
        const auto b = tokens_of(t, edited);
        const TokenDiff d = diff_tokens(base, a, edited, b);
        QString why;
        const long unchanged = check_diff(base, a, edited, b, d, &why);
        QVERIFY2(unchanged >= 0, qPrintable(QString::fromStdString(edited) + ": " + why));
        QCOMPARE(unchanged, lcs_length(base, a, edited, b));
    }
}

void TestTokenDiff::unrelatedLongTextsFallBackToOneReplacement()
{
    std::string old_text(3000, 'a'), new_text(3000, 'b');
    std::vector<Token> a, b;
    for (uint32_t i = 0; i < 3000; ++i) {
        a.push_back({static_cast<TokenId>(i), i, i + 1});
        b.push_back({static_cast<TokenId>(100000 + i), i, i + 1});
    }
    // Common first and last tokens are still trimmed.
    a.front() = b.front() = {5, 0, 1};
    old_text[0] = new_text[0] = 'x';
    QElapsedTimer timer;
    timer.start();
    const TokenDiff d = diff_tokens(old_text, a, new_text, b);
    qInfo("3000 vs 3000 unrelated tokens: %lld ms", static_cast<long long>(timer.elapsed()));
    QVERIFY2(d.changes.size() == 1 && same_change(d.changes[0], TokenChangeKind::Replaced, 1, 2999, 1, 2999),
             qPrintable(describe(d)));
    QVERIFY(timer.elapsed() < 2000);
}

void TestTokenDiff::longTextWithOneEditIsFast()
{
    REQUIRE_DEFAULT_MODEL(path);
    const Tokenizer& t = tokenizer_for(path);
    std::string text;
    while (text.size() < 10000)
        text += "The quick brown fox jumps over the lazy dog, and 12 more words follow here. ";
    std::string edited = text;
    edited.replace(5003, 4, "quikc");
    const auto a = tokens_of(t, text);
    const auto b = tokens_of(t, edited);
    QElapsedTimer timer;
    timer.start();
    const TokenDiff d = diff_tokens(text, a, edited, b);
    const double ms = static_cast<double>(timer.nsecsElapsed()) / 1e6;
    qInfo("10,000 characters, one edit: %zu -> %zu tokens, %zu change(s), %.3f ms", a.size(), b.size(),
          d.changes.size(), ms);
    QString why;
    QVERIFY2(check_diff(text, a, edited, b, d, &why) >= 0, qPrintable(why));
    QVERIFY(!d.changes.empty() && d.changes.size() <= 2);
    QVERIFY(ms < 50.0);
}

QTEST_GUILESS_MAIN(TestTokenDiff)
#include "test_token_diff.moc"
