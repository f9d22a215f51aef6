// SPDX-License-Identifier: GPL-3.0-or-later
#include "serve/workload.h"

#include "util/error.h"
#include "util/rng.h"

#include <algorithm>
#include <cmath>
#include <spdlog/fmt/fmt.h>

namespace engine {

namespace {

// What generated prompts are cut from: plain prose, long enough for prompts of a few hundred tokens.
constexpr std::string_view kPassage =
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, counting the steps as his father "
    "had taught him. There were one hundred and twelve of them, worn smooth in the middle by a century of boots. "
    "At the top he trimmed the wick, polished the great lens until it shone like water, and watched the first "
    "beam sweep across the harbour. Ships came and went on the grey sea: fishing boats with gulls wheeling "
    "behind them, a ferry carrying farmers to the market town, now and then a cargo steamer bound for ports he "
    "knew only from the names painted on its stern. In winter the storms came from the west, and the waves broke "
    "over the rocks below with a sound like distant guns. On those nights he did not sleep; he sat by the lamp "
    "with a pot of tea and a book of tide tables, listening for the bell of the buoy at the mouth of the bay. "
    "His daughter wrote to him from the city, where she studied engineering and built small machines that "
    "could tell the weather before the clouds arrived. She promised that one day the light would run itself, "
    "and he laughed, because he knew she was right, and because he could not imagine the tower without "
    "someone in it to listen to the sea. When spring returned he painted the railings white again, mended the "
    "shutters the wind had torn, and planted potatoes in the narrow garden behind the cottage. Travellers "
    "sometimes asked him whether he was lonely. He told them the sea was never the same two days in a row, "
    "and that a person who watches it closely is never short of company.";
constexpr std::string_view kSystemPrompt =
    "You are a careful assistant. Answer briefly and accurately, say when you are unsure, and never invent "
    "facts. Use plain language that a student can follow, and show each step of a calculation. ";

uint32_t uniform_in(Xoshiro256& rng, uint32_t lo, uint32_t hi)
{
    return lo + uint32_t(rng.next() % (uint64_t(hi - lo) + 1));
}

double unit(Xoshiro256& rng)
{
    return double(rng.next() >> 11) * (1.0 / 9007199254740992.0);
}

// `n` tokens of `text` repeated as often as needed (no special tokens).
std::vector<TokenId> tokens_of(const Tokenizer& tokenizer, std::string_view text, std::size_t n, std::size_t offset)
{
    const std::vector<TokenId> ids = tokenizer.encode_ids(text, {.add_special = false, .parse_special = false});
    std::vector<TokenId> out;
    for (std::size_t i = 0; out.size() < n && !ids.empty(); ++i)
        out.push_back(ids[(offset + i) % ids.size()]);
    return out;
}

// `n` words of `text` from word `offset` on, repeated as often as needed, joined by spaces.
std::string words_of(std::string_view text, std::size_t n, std::size_t offset)
{
    std::vector<std::string_view> words;
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t end = std::min(text.find(' ', at), text.size());
        if (end > at)
            words.push_back(text.substr(at, end - at));
        at = end + 1;
    }
    std::string out;
    for (std::size_t i = 0; i < n && !words.empty(); ++i) {
        if (i)
            out += ' ';
        out += words[(offset + i) % words.size()];
    }
    return out;
}

} // namespace

void validate_workload(const WorkloadSpec& s)
{
    if (s.clients == 0 || s.clients > 10000)
        throw Error(fmt::format("{} clients: 1 to 10,000 are possible", s.clients));
    if (!(s.arrival_rate >= 0) || !std::isfinite(s.arrival_rate))
        throw Error("the arrival rate must be 0 (all at once) or a positive number of requests per second");
    if (s.prompts.empty() && (s.prompt_min == 0 || s.prompt_min > s.prompt_max))
        throw Error(
            fmt::format("prompt lengths {} … {}: the range must hold at least one token", s.prompt_min, s.prompt_max));
    if (s.output_min == 0 || s.output_min > s.output_max)
        throw Error(
            fmt::format("reply lengths {} … {}: the range must hold at least one token", s.output_min, s.output_max));
    if (!(s.shared_fraction >= 0 && s.shared_fraction <= 1))
        throw Error("the share of requests with the common system prompt must be between 0 and 1");
    if (s.samples == 0 || s.samples > 16)
        throw Error(fmt::format("{} replies per prompt: 1 to 16 are possible", s.samples));
    if (!(s.temperature >= 0 && s.temperature <= 100))
        throw Error("the temperature must be between 0 (greedy) and 100");
    for (const std::string& p : s.prompts)
        if (p.empty())
            throw Error("a prompt of the list is empty");
}

std::vector<ServeRequest> make_workload(const WorkloadSpec& s, const Tokenizer& tokenizer)
{
    validate_workload(s);
    Xoshiro256 rng(s.seed);
    const Vocab& vocab = tokenizer.vocab();
    const TokenId bos = vocab.add_bos && vocab.bos ? *vocab.bos : -1; // -1: the model adds none
    const std::vector<TokenId> system = tokens_of(tokenizer, kSystemPrompt, s.shared_tokens, 0);
    std::vector<ServeRequest> out;
    double t = 0;
    for (uint32_t i = 0; i < s.clients; ++i) {
        ServeRequest r;
        if (bos >= 0)
            r.prompt.push_back(bos);
        const bool shared = unit(rng) < s.shared_fraction;
        if (shared)
            r.prompt.insert(r.prompt.end(), system.begin(), system.end());
        if (!s.prompts.empty()) {
            const auto own = tokenizer.encode_ids(s.prompts[i % s.prompts.size()], {.add_special = false});
            r.prompt.insert(r.prompt.end(), own.begin(), own.end());
        } else {
            const uint32_t n = uniform_in(rng, s.prompt_min, s.prompt_max);
            const auto own = tokens_of(tokenizer, kPassage, n, std::size_t(rng.next() % 997));
            r.prompt.insert(r.prompt.end(), own.begin(), own.end());
        }
        r.max_new_tokens = uniform_in(rng, s.output_min, s.output_max);
        r.sampling.temperature = s.temperature;
        r.samples = s.samples;
        r.sampling.seed = s.seed * 1000003 + i;
        // a simulated client wants exactly its reply length (as benchmark clients ask for ignore_eos)
        r.stop_at_end_of_generation = false;
        if (s.arrival_rate > 0 && i > 0)
            t += -std::log(1.0 - unit(rng)) / s.arrival_rate;
        r.arrival_s = t;
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<TextRequest> make_text_workload(const WorkloadSpec& s)
{
    validate_workload(s);
    // The draws in make_workload's order, so that a seed gives both the same requests.
    Xoshiro256 rng(s.seed);
    const std::string system = words_of(kSystemPrompt, s.shared_tokens, 0);
    std::vector<TextRequest> out;
    double t = 0;
    for (uint32_t i = 0; i < s.clients; ++i) {
        TextRequest r;
        const bool shared = unit(rng) < s.shared_fraction;
        std::string own;
        if (!s.prompts.empty()) {
            own = s.prompts[i % s.prompts.size()];
        } else {
            const uint32_t n = uniform_in(rng, s.prompt_min, s.prompt_max);
            own = words_of(kPassage, n, std::size_t(rng.next() % 997));
        }
        r.prompt = shared && !system.empty() ? system + "\n\n" + own : own;
        const auto words = [](const std::string& x) {
            return x.empty() ? 0u : uint32_t(std::count(x.begin(), x.end(), ' ') + 1);
        };
        r.prompt_words = words(own) + (shared ? words(system) : 0u);
        r.max_new_tokens = uniform_in(rng, s.output_min, s.output_max);
        r.temperature = s.temperature;
        r.seed = s.seed * 1000003 + i;
        if (s.arrival_rate > 0 && i > 0)
            t += -std::log(1.0 - unit(rng)) / s.arrival_rate;
        r.arrival_s = t;
        for (uint32_t k = 0; k < s.samples; ++k) {
            TextRequest copy = r;
            copy.seed += k;
            out.push_back(std::move(copy));
        }
    }
    return out;
}

} // namespace engine
