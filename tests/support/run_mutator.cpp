// SPDX-License-Identifier: GPL-3.0-or-later
#include "run_mutator.h"

#include "gguf/gguf_file.h"
#include "util/error.h"

#include <nlohmann/json.hpp>

namespace testsupport {

namespace {

using json = nlohmann::ordered_json;

struct Bytes {
    std::span<const uint8_t> in;
    std::size_t at = 0;
    bool empty() const { return at >= in.size(); }
    uint8_t next() { return at < in.size() ? in[at++] : 0; }
    uint32_t u32()
    {
        return uint32_t(next()) | uint32_t(next()) << 8 | uint32_t(next()) << 16 | uint32_t(next()) << 24;
    }
};

json hostile_number(Bytes& b)
{
    switch (b.next() % 16) {
    case 0:
        return 0;
    case 1:
        return -1;
    case 2:
        return 1;
    case 3:
        return 2147483647;
    case 4:
        return -2147483647 - 1;
    case 5:
        return int64_t(1) << 40;
    case 6:
        return 1e15;
    case 7:
        return 9.2e18;
    case 8:
        return 1e308;
    case 9:
        return nullptr; // NaN
    case 10:
        return "inf";
    case 11:
        return "-inf";
    case 12:
        return 0.5;
    case 13:
        return -0.5;
    case 14:
        return uint64_t(18446744073709551615ull);
    default:
        return int64_t(b.u32() % 100000) - 100;
    }
}

json hostile_string(Bytes& b)
{
    switch (b.next() % 8) {
    case 0:
        return "";
    case 1:
        return std::string(5000, 'a');
    case 2:
        return "<b>bold</b><!--";
    case 3:
        return "<0xZZ>";
    case 4:
        return std::string("\xff\xfe\xc3", 3); // not UTF-8
    case 5:
        return "attention.0.0.weights"; // another field's array
    case 6:
        return "12345678901234567890123";
    default: {
        std::string s;
        for (int n = b.next() % 24; n > 0; --n)
            s.push_back(char(b.next()));
        return s;
    }
    }
}

// Walks from `v` to a child chosen by the input, a few levels down, and edits what it reaches.
void edit(json& v, Bytes& b, int depth)
{
    const bool descend = depth < 6 && (v.is_object() || v.is_array()) && !v.empty() && b.next() % 4 != 0;
    if (descend) {
        const std::size_t i = b.next() % v.size();
        if (v.is_object()) {
            auto it = v.begin();
            std::advance(it, long(i));
            edit(it.value(), b, depth + 1);
        } else {
            edit(v[i], b, depth + 1);
        }
        return;
    }
    switch (b.next() % 10) {
    case 0:
    case 1:
        v = hostile_number(b);
        break;
    case 2:
        v = hostile_string(b);
        break;
    case 3:
        v = bool(b.next() & 1);
        break;
    case 4: // grow: an element repeated (lengths that disagree with their counts)
        if (v.is_array() && !v.empty()) {
            const json e = v[b.next() % v.size()];
            for (int n = 1 + b.next() % 64; n > 0; --n)
                v.push_back(e);
        }
        break;
    case 5: // shrink
        if (v.is_array() && !v.empty())
            v.erase(b.next() % v.size());
        else if (v.is_object() && !v.empty()) {
            auto it = v.begin();
            std::advance(it, long(b.next() % v.size()));
            v.erase(it.key());
        }
        break;
    case 6:
        v = json::array();
        break;
    case 7:
        v = json::object();
        break;
    case 8: // a number nudged by one (off-by-one lengths and indices)
        if (v.is_number_integer())
            v = v.get<int64_t>() + ((b.next() & 1) ? 1 : -1);
        break;
    default: // a type swapped for its container
        v = json::array({v});
        break;
    }
}

void edit_arrays(std::vector<engine::run::RunArray>& arrays, Bytes& b)
{
    if (arrays.empty())
        return;
    engine::run::RunArray& a = arrays[b.next() % arrays.size()];
    switch (b.next() % 4) {
    case 0: // dropped from the file
        arrays.erase(arrays.begin() + long(&a - arrays.data()));
        break;
    case 1: // one value fewer: the dims say so too
        if (a.values.size() > 1) {
            a.values.pop_back();
            a.dims = {a.values.size()};
        }
        break;
    case 2: // a value that is not a number
        if (!a.values.empty())
            a.values[b.next() % a.values.size()] =
                (b.next() & 1) ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
        break;
    default: // renamed to another array's name is refused by the GGUF reader; to a new one is unnamed
        a.name += "x";
        break;
    }
}

json lab_parts(const json& head_classes)
{
    json lab = json::object();
    lab["patching"] = {{"settings", {{"clean", "a b c"}, {"corrupted", "a b d"}, {"metric", 0}, {"over", 0}}},
                       {"clean_pieces", {"a", " b", " c"}},
                       {"corrupted_pieces", {"a", " b", " d"}},
                       {"n_layers", 2},
                       {"n_columns", 3},
                       {"effect", {{0.1, 0.2, nullptr}, {0.5, 1.0, 0.0}}},
                       {"raw", {{0.1, 0.2, nullptr}, {0.5, 1.0, 0.0}}},
                       {"runs", 6}};
    lab["attribution"] = {{"token", " c"},
                          {"token_id", 5},
                          {"logit", 3.5},
                          {"parts",
                           {{{"kind", 0}, {"name", "embedding"}, {"value", 1.5}},
                            {{"kind", 1}, {"name", "L0 attention"}, {"layer", 0}, {"value", -0.5}}}}};
    if (!head_classes.is_null()) {
        lab["head_classes"] = head_classes;
        json scan = head_classes;
        scan["kind"] = "scan";
        lab["head_scan"] = scan;
    }
    lab["ablation"] = {
        {"heads", {{0, 1}}}, {"before", {{5, " c", 0.5}}}, {"after", {{6, " d", 0.4}}}, {"kl", 0.1}, {"positions", 3}};
    return lab;
}

} // namespace

// Lists no count refers to, cut short: a fuzzer's execution is mostly parsing, and these lengths add
// nothing the first few elements do not already exercise.
void trim_free_lists(json& doc)
{
    const auto cut = [](json& a, std::size_t n) {
        if (a.is_array() && a.size() > n)
            a.erase(a.begin() + long(n), a.end());
    };
    if (doc.contains("text_analysis")) {
        json& t = doc["text_analysis"];
        cut(t["tokens"], 6);
        for (json& k : t["tokens"]) {
            cut(k["top"], 3);
            cut(k["candidates"], 3);
        }
    }
    if (doc.contains("stepper"))
        for (json& r : doc["stepper"]["distributions"])
            for (json& stage : r["stages"])
                cut(stage["top"], 4);
}

namespace {

// A serving lab's part (two requests, three passes, a pool of four blocks): what a real one holds,
// small enough for the fuzzer's edits to reach every field.
json serving_part()
{
    const json percentiles = {{"p50", 0.1}, {"p90", 0.1}, {"p99", 0.12}, {"max", 0.12}, {"count", 2}};
    const auto request = [](int id, json prompt, json output, json times) {
        return json{{"id", id},
                    {"parent", -1},
                    {"prompt", prompt},
                    {"max_new_tokens", 2},
                    {"arrival_s", 0.0},
                    {"temperature", 0.0},
                    {"seed", 1},
                    {"samples", 1},
                    {"phase", "done"},
                    {"output", output},
                    {"n_computed", 4},
                    {"reused_tokens", 0},
                    {"computed_tokens", 4},
                    {"preemptions", 0},
                    {"swaps", 0},
                    {"admitted_s", 0.0},
                    {"first_token_s", 0.1},
                    {"finish_s", 0.2},
                    {"token_times", times},
                    {"finish_reason", "length"}};
    };
    const auto step = [](double start, double end, json slices, json events) {
        return json{{"start_s", start}, {"end_s", end},     {"tokens", 6},        {"running", 2},
                    {"waiting", 0},     {"blocks_held", 2}, {"blocks_cached", 0}, {"host_store_bytes", 0},
                    {"slices", slices}, {"events", events}};
    };
    json run = {
        {"mode", "continuous"},
        {"options",
         {{"max_running", 2},
          {"step_tokens", 16},
          {"pool_blocks", 4},
          {"block_tokens", 32},
          {"preemption", "recompute"},
          {"host_store_bytes", 1024},
          {"prefix_caching", true},
          {"deterministic", false},
          {"n_ctx", 64}}},
        {"cancelled", false},
        {"makespan_s", 0.2},
        {"busy_s", 0.2},
        {"prompt_tokens", 6},
        {"generated_tokens", 4},
        {"computed_tokens", 8},
        {"reused_tokens", 0},
        {"preemptions", 0},
        {"swaps", 0},
        {"max_batch_sequences", 2},
        {"max_batch_tokens", 6},
        {"ttft", percentiles},
        {"itl", percentiles},
        {"latency", percentiles},
        {"pool",
         {{"blocks", {{0, 1, false}, {1, 1, false}, {-1, 0, false}, {0, 0, true}}},
          {"prefix_hits", 0},
          {"cow_copies", 0},
          {"evictions", 0},
          {"allocations", 2}}},
        {"requests", {request(0, {1, 2, 3}, {4, 5}, {0.1, 0.2}), request(1, {3, 2, 1}, {5, 4}, {0.1, 0.2})}},
        {"steps",
         {step(0.0, 0.1, {{0, 3, true, true}, {1, 3, true, true}}, {{"admitted", 0, 0}, {"admitted", 1, 0}}),
          step(0.1, 0.2, {{0, 1, false, true}, {1, 1, false, true}}, {{"finished", 0, 2}, {"finished", 1, 2}})}}};
    return {{"model", "tiny"},
            {"backend", "CPU (1 thread)"},
            {"cancelled", false},
            {"workload",
             {{"clients", 2},
              {"arrival_rate", 0.0},
              {"prompt_min", 3},
              {"prompt_max", 3},
              {"output_min", 2},
              {"output_max", 2},
              {"shared_fraction", 0.0},
              {"shared_tokens", 0},
              {"prompts", json::array()},
              {"temperature", 0.0},
              {"seed", 1}}},
            {"runs", {run}}};
}

// A speculation comparison's part: two steps (one drafted token accepted then one rejected and
// corrected; then every draft accepted and a bonus), the plain loop parting at the last token.
json speculation_part()
{
    const auto verdict = [](int token, bool accepted) {
        return json{
            {"token", token}, {"q", 1.0},   {"p", accepted ? 0.9 : 0.05}, {"target_top", 9}, {"target_top_p", 0.9},
            {"overlap", 0.5}, {"kl", -1.0}, {"accepted", accepted}};
    };
    const auto step = [](int opened, json drafted, int accepted, int next, bool corrected, json verdicts) {
        return json{{"opened", opened},       {"drafted", drafted}, {"accepted", accepted}, {"next", next},
                    {"corrected", corrected}, {"draft_ms", 0.1},    {"verify_ms", 30.0},    {"verdicts", verdicts}};
    };
    return {
        {"model", "tiny"},
        {"drafter", "prompt lookup"},
        {"source", "lookup"},
        {"backend", "CPU"},
        {"deterministic", false},
        {"cancelled", false},
        {"draft_max", 3},
        {"temperature", 0.0},
        {"seed", 0},
        {"prompt_text", "a b a b"},
        {"prompt", {1, 2, 1, 2}},
        {"tokens", {5, 6, 9, 10, 11, 12}},
        {"steps",
         {step(5, {6, 7, 8}, 1, 9, true, {verdict(6, true), verdict(7, false)}),
          step(9, {10, 11}, 2, 12, false, {verdict(10, true), verdict(11, true)})}},
        {"plain_tokens", {5, 6, 9, 10, 11, 13}},
        {"speculative_s", 0.1},
        {"plain_s", 0.2},
        {"parted", 5},
        {"at_parting",
         {{"speculative", {{"token", 12}, {"best", 12}, {"best_logit", 3.5}, {"second", 13}, {"second_logit", 3.49}}},
          {"plain", {{"token", 13}, {"best", 13}, {"best_logit", 3.51}, {"second", 12}, {"second_logit", 3.5}}}}}};
}

// An experts view's part: three tokens through two MoE layers of 4 experts, 2 per token, normalised.
json experts_part()
{
    return {{"architecture", "qwen3moe"},
            {"source", "prompt"},
            {"n_expert", 4},
            {"k", 2},
            {"normalized", true},
            {"random_weights", true},
            {"ids", {1, 2, 3}},
            {"layers",
             {{{"layer", 0}, {"experts", {0, 1, 2, 3, 1, 0}}, {"weights", {0.75, 0.25, 0.5, 0.5, 0.625, 0.375}}},
              {{"layer", 2}, {"experts", {3, 2, 1, 0, 2, 3}}, {"weights", {0.875, 0.125, 0.5, 0.5, 0.5625, 0.4375}}}}}};
}

} // namespace

std::string with_every_lab_part(const std::string& document)
{
    json doc = json::parse(document);
    if (!doc.contains("serving"))
        doc["serving"] = serving_part();
    if (!doc.contains("speculation"))
        doc["speculation"] = speculation_part();
    if (!doc.contains("experts"))
        doc["experts"] = experts_part();
    const json classes =
        doc.contains("lab") && doc["lab"].contains("head_classes") ? doc["lab"]["head_classes"] : json();
    json lab = lab_parts(classes);
    if (doc.contains("lab"))
        for (auto& [k, v] : doc["lab"].items())
            if (!lab.contains(k))
                lab[k] = v;
    doc["lab"] = lab;
    return doc.dump();
}

const RunSeeds& RunSeeds::get()
{
    static const RunSeeds seeds = [] {
        RunSeeds s;
        for (const char* name : {"app-gemma3-tiny.tsrun", "cli-trace-gemma3-tiny.tsrun"}) {
            engine::run::OpenedRun r =
                engine::run::read_run_file(std::string(TOKENSCOPE_TEST_DATA_DIR "/runs/") + name);
            json doc = json::parse(with_every_lab_part(r.contents.document));
            trim_free_lists(doc);
            r.contents.document = doc.dump();
            s.runs.push_back(std::move(r));
        }
        return s;
    }();
    return seeds;
}

std::vector<std::byte> mutated_run(std::span<const uint8_t> input)
{
    Bytes b{input};
    const RunSeeds& seeds = RunSeeds::get();
    static const std::vector<json> parsed = [&] {
        std::vector<json> v;
        for (const auto& r : seeds.runs)
            v.push_back(json::parse(r.contents.document));
        return v;
    }();
    const std::size_t which = b.next() % seeds.runs.size();
    const engine::run::OpenedRun& seed = seeds.runs[which];
    engine::run::RunContents c = seed.contents;
    json doc = parsed[which];
    for (int n = 1 + b.next() % 6; n > 0 && !b.empty(); --n) {
        if (b.next() % 8 == 0)
            edit_arrays(c.arrays, b);
        else
            edit(doc, b, 0);
    }
    c.document = doc.dump(-1, ' ', false, json::error_handler_t::replace);
    if (c.document.size() > engine::run::kMaxDocumentBytes)
        return {};
    try {
        return engine::run::run_file_bytes(c, seed.file.get());
    } catch (const engine::Error&) {
        return {}; // an array whose dims no longer match: the writer refuses it, nothing to read
    }
}

} // namespace testsupport
