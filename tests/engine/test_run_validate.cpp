// SPDX-License-Identifier: GPL-3.0-or-later
// Saved runs are untrusted input: hostile documents, re-signed after editing as an attacker would
// (the checksum is only a guard against damage), are refused by the validator naming the field and
// the limit — the cases that crashed, hung or took gigabytes in the app before the validator existed.
// What the app does with them (refuses, keeps what it showed) is test_saved_runs' hostileRuns...
#include "gguf/gguf_file.h"
#include "gguf_builder.h"
#include "run/run_document.h"
#include "run/run_file.h"
#include "run/run_validate.h"
#include "run_mutator.h"
#include "sanitizers.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <functional>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

using json = nlohmann::ordered_json;
using engine::run::RunContents;

namespace {

const std::string kFixture = std::string(TOKENSCOPE_TEST_DATA_DIR) + "/runs/app-gemma3-tiny.tsrun";

struct Base {
    engine::run::OpenedRun opened;
    json doc;
};

Base base()
{
    // The fixture with a patching, an attribution, a head scan and an ablation added beside its parts,
    // so that each edit below starts from a run that opens.
    Base b{engine::run::read_run_file(kFixture), {}};
    b.doc = json::parse(testsupport::with_every_lab_part(b.opened.contents.document));
    return b;
}

// The edited run, signed and read back as the app reads it; empty when it opens, else the refusal.
std::string open_edited(const Base& b, const std::function<void(json&, RunContents&)>& edit)
{
    RunContents c = b.opened.contents;
    json doc = b.doc;
    edit(doc, c);
    if (c.document == b.opened.contents.document)
        c.document = doc.dump();
    const std::vector<std::byte> bytes = engine::run::run_file_bytes(c, b.opened.file.get());
    try {
        const auto opened = engine::run::read_run_bytes(bytes, "hostile.tsrun");
        engine::run::checked_document(opened);
        return {};
    } catch (const engine::FormatError& e) {
        return e.what();
    }
}

json many(std::size_t n, const json& item)
{
    json a = json::array();
    for (std::size_t i = 0; i < n; ++i)
        a.push_back(item);
    return a;
}

struct Case {
    const char* name;
    std::function<void(json&, RunContents&)> edit;
    std::vector<std::string> said; // each must appear in the refusal
};

} // namespace

class TestRunValidate : public QObject {
    Q_OBJECT
private slots:
    void theBaseRunOpens();
    void hostileRunsAreRefusedNamingTheFieldAndLimit();
    void whatIsWrittenReadsBackValid();
    void aByteTokenThatIsNotHexReadsAsItsText();
    void openingAHostileRunStaysWithinMemory();
};

void TestRunValidate::theBaseRunOpens()
{
    // The starting point of every case below opens: each refusal is the edit's doing.
    const Base b = base();
    QCOMPARE(QString::fromStdString(open_edited(b, [](json&, RunContents&) {})), QString());
}

void TestRunValidate::hostileRunsAreRefusedNamingTheFieldAndLimit()
{
    const Base b = base();
    const std::vector<Case> cases = {
        // ---- documents that disagree with themselves (crashes in the panels) ----
        {"head weights missing",
         [](json& d, RunContents&) { d["attention"]["heads"][0].erase("weights"); },
         {"attention.heads[0].weights", "n × n"}},
        {"head q missing",
         [](json& d, RunContents&) { d["attention"]["heads"][1].erase("q"); },
         {"attention.heads[1].q"}},
        {"head weights array gone from the file",
         [](json&, RunContents& c) { c.arrays.erase(c.arrays.begin()); },
         {"does not hold"}},
        {"one array named by two heads",
         [](json& d, RunContents&) { d["attention"]["heads"][1]["weights"] = d["attention"]["heads"][0]["weights"]; },
         {"attention.heads[1].weights", "already uses"}},
        {"head of a layer that does not exist",
         [](json& d, RunContents&) { d["attention"]["heads"][0]["layer"] = 99; },
         {"attention.heads[0].layer", "99"}},
        {"head n unlike the tokens",
         [](json& d, RunContents&) { d["attention"]["heads"][0]["n"] = 3; },
         {"attention.heads[0]"}},
        {"patching pieces of different lengths",
         [](json& d, RunContents&) { d["lab"]["patching"]["corrupted_pieces"].erase(0); },
         {"lab.patching.corrupted_pieces", "n_columns"}},
        {"patching grid rows of different lengths",
         [](json& d, RunContents&) { d["lab"]["patching"]["effect"][1].erase(0); },
         {"lab.patching.effect[1]", "n_columns"}},
        {"patching grid of 2^31-1 columns",
         [](json& d, RunContents&) { d["lab"]["patching"]["n_columns"] = 2147483647; },
         {"lab.patching.n_columns", "131072"}},
        {"patching grid of 5e7 columns (one number, gigabytes)",
         [](json& d, RunContents&) {
             d["lab"]["patching"]["settings"]["over"] = 3;
             d["lab"]["patching"]["n_columns"] = 50000000;
         },
         {"lab.patching.n_columns"}},
        {"head classes fewer than layers × heads",
         [](json& d, RunContents&) {
             d["lab"]["head_classes"]["heads"].erase(d["lab"]["head_classes"]["heads"].size() - 1);
         },
         {"lab.head_classes.heads", "n_layers × n_heads"}},
        {"scan fewer than layers × heads",
         [](json& d, RunContents&) { d["lab"]["head_scan"]["heads"].erase(0); },
         {"lab.head_scan.heads"}},
        {"scan of another layout than the classes",
         [](json& d, RunContents&) {
             json& s = d["lab"]["head_scan"];
             s["n_heads"] = s["n_heads"].get<int>() * 2;
             json heads = json::array();
             for (int i = 0; i < s["n_layers"].get<int>() * s["n_heads"].get<int>(); ++i)
                 heads.push_back({{"layer", i / s["n_heads"].get<int>()}, {"head", i % s["n_heads"].get<int>()}});
             s["heads"] = heads;
         },
         {"lab.head_scan", "another layout"}},
        {"distribution at position -1",
         [](json& d, RunContents&) { d["stepper"]["distributions"][0]["position"] = -1; },
         {"stepper.distributions[0].position", "-1"}},
        {"lens rows of different widths",
         [](json& d, RunContents&) {
             d["stepper"]["lens"] = {{{{"id", 1}, {"text", "a"}, {"p", 0.5}}, {{"id", 2}, {"text", "b"}, {"p", 0.2}}},
                                     {{{"id", 1}, {"text", "a"}, {"p", 0.5}}}};
         },
         {"stepper.lens[1]"}},
        {"attribution part that is not a number",
         [](json& d, RunContents&) { d["lab"]["attribution"]["parts"][1]["value"] = nullptr; },
         {"lab.attribution.parts[1].value"}},
        {"steering layer past the model",
         [](json& d, RunContents&) { d["lab"]["steering"]["settings"]["layer"] = 1000; },
         {"lab.steering.settings.layer", "1000"}},
        {"timeline stage that does not exist",
         [](json& d, RunContents&) { d["timeline"]["events"][0][0] = 99; },
         {"timeline.events[0][0]"}},
        // ---- ids and numbers outside their ranges ----
        {"token id outside the saved vocabulary",
         [](json& d, RunContents&) { d["stepper"]["tokens"][0]["id"] = 100000; },
         {"stepper.tokens[0].id", "outside the saved vocabulary of 767"}},
        {"token id of 2^40",
         [](json& d, RunContents&) { d["stepper"]["tokens"][0]["id"] = int64_t(1) << 40; },
         {"stepper.tokens[0].id", "1099511627776", "out of range"}},
        {"token id spelled as a string",
         [](json& d, RunContents&) { d["stepper"]["tokens"][0]["id"] = "7"; },
         {"stepper.tokens[0].id", "expected an integer"}},
        {"a count of 1e300", [](json& d, RunContents&) { d["kv"]["bytes_in_use"] = 1e300; }, {"kv.bytes_in_use"}},
        {"a KV cache of Q5_0 values",
         [](json& d, RunContents&) { d["kv"]["cache_types"] = "K Q8_0, V Q5_0"; },
         {"kv.cache_types", "K Q8_0, V Q5_0", "not a KV cache's types"}},
        {"KV cache types that are not text",
         [](json& d, RunContents&) { d["kv"]["cache_types"] = 8; },
         {"kv.cache_types", "expected a string"}},
        {"a probability of 1e308",
         [](json& d, RunContents&) { d["stepper"]["tokens"][0]["probability"] = 1e308; },
         {"stepper.tokens[0].probability", "not a probability"}},
        // ---- sizes that hung the app ----
        {"200,000 stepper tokens",
         [](json& d, RunContents&) {
             d["stepper"]["tokens"] = many(200000, {{"id", 1}, {"text", "a"}});
         },
         {"stepper.tokens", "200000 tokens", "limit of 131072"}},
        {"a token text of 100,000 characters",
         [](json& d, RunContents&) { d["stepper"]["tokens"][0]["text"] = std::string(100000, 'x'); },
         {"stepper.tokens[0].text", "100000 bytes", "limit of 4096"}},
        {"an analysed text past 1 MiB",
         [](json& d, RunContents&) {
             d["text_analysis"]["tokens"] = many(300, {{"id", 1}, {"text", std::string(4000, 'y')}});
         },
         {"text_analysis.tokens", "limit of 1048576"}},
        {"a generated text of 5,000,000 characters",
         [](json& d, RunContents&) { d["stepper"]["generated_text"] = std::string(5000000, 'z'); },
         {"stepper.generated_text", "limit of 1048576"}},
        {"10^7 KV blocks per layer",
         [](json& d, RunContents&) { d["kv"]["blocks_per_layer"] = 10000000; },
         {"kv.blocks_per_layer", "10000000"}},
        {"2^31-1 KV blocks per layer",
         [](json& d, RunContents&) { d["kv"]["blocks_per_layer"] = 2147483647; },
         {"kv.blocks_per_layer"}},
        {"a context of 2^24 tokens drawn as blocks",
         [](json& d, RunContents&) {
             d["kv"]["n_ctx"] = 1 << 24;
             d["kv"]["block_tokens"] = 1;
             d["kv"]["blocks_per_layer"] = 1 << 24;
         },
         {"kv.blocks_per_layer", "limit of 4194304"}},
        {"a timeline event ending at 10^15 ns",
         [](json& d, RunContents&) { d["timeline"]["events"][0][3] = 1e15; },
         {"timeline.events[0][3] (end, ns)", "1000000000000000"}},
        {"a timeline event ending at 9·10^18 ns",
         [](json& d, RunContents&) { d["timeline"]["events"][0][3] = int64_t(9000000000000000000); },
         {"timeline.events[0][3] (end, ns)"}},
        // ---- markup and structure ----
        {"markup in the model's SHA-256",
         [](json& d, RunContents&) {
             std::string markup(64, 'a');
             markup.replace(0, 4, "<!--");
             d["model"]["sha256"] = markup;
         },
         {"model.sha256", "64 lowercase hexadecimal"}},
        {"a top-level array",
         [](json&, RunContents& c) { c.document = "[1, 2, 3]"; },
         {"its top level", "expected an object, found array"}},
        {"brackets nested 10,000 deep",
         [](json&, RunContents& c) {
             std::string nest = "{\"a\":";
             nest.append(10000, '[');
             nest.append(10000, ']');
             nest.push_back('}');
             c.document = nest;
         },
         {"nests deeper than 16"}},
        {"a part that is not an object", [](json& d, RunContents&) { d["kv"] = 5; }, {"kv", "expected an object"}},
        // ---- the experts view: experts in range and distinct per token, weights probabilities in slot order ----
        {"experts: an expert the model does not have",
         [](json& d, RunContents&) { d["experts"]["layers"][0]["experts"][1] = 4; },
         {"experts.layers[0].experts[1]", "not an expert of 0 … 3"}},
        {"experts: one expert twice for a token",
         [](json& d, RunContents&) { d["experts"]["layers"][1]["experts"][1] = 3; },
         {"experts.layers[1].experts[1]", "repeats expert 3"}},
        {"experts: a weight of 1.5",
         [](json& d, RunContents&) { d["experts"]["layers"][0]["weights"][0] = 1.5; },
         {"experts.layers[0].weights[0]", "not a probability"}},
        {"experts: normalised weights that do not sum to 1",
         [](json& d, RunContents&) { d["experts"]["layers"][0]["weights"][3] = 0.25; },
         {"experts.layers[0].weights[2]", "sum to 0.75"}},
        {"experts: a route shorter than the tokens",
         [](json& d, RunContents&) { d["experts"]["layers"][1]["experts"].erase(5); },
         {"experts.layers[1]", "holds 5 experts"}},
        {"experts: layers out of order",
         [](json& d, RunContents&) { d["experts"]["layers"][1]["layer"] = 0; },
         {"experts.layers[1].layer", "not after the layer before it"}},
        {"experts: no k (a routing of zero experts per token)",
         [](json& d, RunContents&) { d["experts"].erase("k"); },
         {"experts.k"}},
        {"experts: no tokens",
         [](json& d, RunContents&) {
             d["experts"]["ids"] = json::array();
             for (auto& l : d["experts"]["layers"]) {
                 l["experts"] = json::array();
                 l["weights"] = json::array();
             }
         },
         {"experts.ids", "is empty"}},
        {"experts: no layers",
         [](json& d, RunContents&) { d["experts"]["layers"] = json::array(); },
         {"experts.layers", "is empty"}},
        {"experts: a token outside the vocabulary",
         [](json& d, RunContents&) { d["experts"]["ids"][0] = 99999999; },
         {"experts.ids"}},
        // ---- the speculation view: its steps must rebuild the tokens, its verdicts obey the rule ----
        {"speculation: a step opened by a token the tokens do not have",
         [](json& d, RunContents&) { d["speculation"]["steps"][1]["opened"] = 3; },
         {"speculation.steps[1].opened"}},
        {"speculation: more accepted than drafted",
         [](json& d, RunContents&) { d["speculation"]["steps"][0]["accepted"] = 4; },
         {"speculation.steps[0].accepted"}},
        {"speculation: a draft accepted after the first rejection",
         [](json& d, RunContents&) { d["speculation"]["steps"][0]["verdicts"][1]["accepted"] = true; },
         {"speculation.steps[0].verdicts[1].accepted"}},
        {"speculation: a probability of 3",
         [](json& d, RunContents&) { d["speculation"]["steps"][0]["verdicts"][0]["p"] = 3.0; },
         {"speculation.steps[0].verdicts[0].p", "not a probability"}},
        {"speculation: a token outside the vocabulary",
         [](json& d, RunContents&) { d["speculation"]["plain_tokens"][0] = 99999999; },
         {"speculation.plain_tokens"}},
        {"speculation: parting where both runs agree",
         [](json& d, RunContents&) { d["speculation"]["parted"] = 0; },
         {"speculation.parted"}},
        // ---- the serving lab: its lanes, pool map and table index requests by the numbers saved ----
        {"serving: a pass naming request 99 of 2",
         [](json& d, RunContents&) { d["serving"]["runs"][0]["steps"][0]["slices"][1][0] = 99; },
         {"serving.runs[0].steps[0].slices[1][0]", "of 2 requests"}},
        {"serving: an event naming request 7 of 2",
         [](json& d, RunContents&) { d["serving"]["runs"][0]["steps"][1]["events"][0][1] = 7; },
         {"serving.runs[0].steps[1].events[0][1]", "of 2 requests"}},
        {"serving: a block owned by request 5 of 2",
         [](json& d, RunContents&) { d["serving"]["runs"][0]["pool"]["blocks"][0][0] = 5; },
         {"serving.runs[0].pool.blocks[0][0]", "of 2 requests"}},
        {"serving: fewer blocks than the pool had",
         [](json& d, RunContents&) { d["serving"]["runs"][0]["pool"]["blocks"].erase(0); },
         {"serving.runs[0].pool.blocks", "options.pool_blocks"}},
        {"serving: a request whose id is not its place",
         [](json& d, RunContents&) { d["serving"]["runs"][0]["requests"][1]["id"] = 0; },
         {"serving.runs[0].requests[1].id"}},
        {"serving: a reply longer than asked for",
         [](json& d, RunContents&) { d["serving"]["runs"][0]["requests"][0]["output"].push_back(6); },
         {"serving.runs[0].requests[0].output", "max_new_tokens"}},
        {"serving: token times unlike the tokens",
         [](json& d, RunContents&) { d["serving"]["runs"][0]["requests"][1]["token_times"].erase(0); },
         {"serving.runs[0].requests[1].token_times", "1 times for 2 tokens"}},
        {"serving: a prompt token outside the vocabulary",
         [](json& d, RunContents&) { d["serving"]["runs"][0]["requests"][0]["prompt"][1] = 1 << 30; },
         {"serving.runs[0].requests[0].prompt[1]", "outside the saved vocabulary"}},
        {"serving: a reply forked from a later request",
         [](json& d, RunContents&) { d["serving"]["runs"][0]["requests"][0]["parent"] = 1; },
         {"serving.runs[0].requests[0].parent", "not an earlier request"}},
        {"serving: a time that is not a number",
         [](json& d, RunContents&) { d["serving"]["runs"][0]["steps"][0]["end_s"] = nullptr; },
         {"serving.runs[0].steps[0].end_s", "not a time"}},
        {"serving: a pass that ends before it starts",
         [](json& d, RunContents&) { d["serving"]["runs"][0]["steps"][1]["end_s"] = 0.05; },
         {"serving.runs[0].steps[1].end_s", "before its start"}},
        {"serving: an unknown batching mode",
         [](json& d, RunContents&) { d["serving"]["runs"][0]["mode"] = "speculative"; },
         {"serving.runs[0].mode", "speculative"}},
        {"serving: nine runs",
         [](json& d, RunContents&) { d["serving"]["runs"] = many(9, d["serving"]["runs"][0]); },
         {"serving.runs", "limit of 8"}},
        {"serving: 65,537 requests in one run",
         [](json& d, RunContents&) {
             d["serving"]["runs"][0]["requests"] = many((1 << 16) + 1, json{{"id", 0}}); // fields left out: defaults
         },
         {"serving.runs[0].requests", "limit of 65536"}},
    };
    int refused = 0;
    for (const Case& c : cases) {
        const std::string error = open_edited(b, c.edit);
        QVERIFY2(!error.empty(), (std::string(c.name) + ": the run opened").c_str());
        for (const std::string& word : c.said)
            QVERIFY2(error.find(word) != std::string::npos,
                     (std::string(c.name) + ": '" + word + "' is not in: " + error).c_str());
        ++refused;
    }
    QCOMPARE(refused, int(cases.size()));
}

void TestRunValidate::whatIsWrittenReadsBackValid()
{
    // The writer and the reader are one schema: a document written from the parsed fixture parses to
    // the same JSON and passes the validator again.
    const Base b = base();
    RunContents c = b.opened.contents;
    c.document = b.doc.dump();
    const engine::run::Document d = engine::run::parse_document(c);
    engine::run::validate(d, b.opened.tokenizer.get());
    const RunContents again = engine::run::to_contents(d, "test");
    const engine::run::Document d2 = engine::run::parse_document(again);
    engine::run::validate(d2, b.opened.tokenizer.get());
    QCOMPARE(QString::fromStdString(engine::run::to_contents(d2, "test").document),
             QString::fromStdString(again.document));
    QVERIFY(d2.patching && d2.attribution && d2.head_scan && d2.ablation && d2.attention && d2.stepper);
    QCOMPARE(d2.patching->effect.size(), std::size_t(2));
    QVERIFY(std::isnan(d2.patching->effect[0][2])); // null: a cell not run
    QCOMPARE(again.arrays.size(), c.arrays.size());
}

void TestRunValidate::aByteTokenThatIsNotHexReadsAsItsText()
{
    // A vocabulary (a model's or a saved run's) whose byte token is "<0xZZ>" threw std::invalid_argument
    // from stoi when the token was shown.
    testsupport::GgufBuilder g;
    g.add_string("general.architecture", "llama");
    g.add_string("tokenizer.ggml.model", "llama");
    g.add_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0xZZ>", "<0x41>", "▁a"});
    g.add_f32_array("tokenizer.ggml.scores", {0, 0, 0, 0, 0, -1});
    g.add_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 6, 6, 1});
    const std::vector<uint8_t> bytes = g.build();
    const auto file = engine::gguf::GgufFile::parse(std::as_bytes(std::span(bytes)), "bytes.gguf");
    const engine::Tokenizer tok(engine::Vocab::from_gguf(*file));
    QCOMPARE(QString::fromStdString(tok.token_to_piece(3)), QString("<0xZZ>"));
    QCOMPARE(QString::fromStdString(tok.token_to_piece(4)), QString("A"));
}

void TestRunValidate::openingAHostileRunStaysWithinMemory()
{
    if (testsupport::kUnderAddressSanitizer)
        QSKIP("memory is measured in the Release tree (ASan's shadow memory is not the reader's)");
    // The largest documents a run holds (16 MiB of JSON), shaped to cost the most memory per byte:
    // a million stepper tokens, millions of one-digit numbers, a grid claiming 5·10^7 columns. Each is
    // refused by `check-run` (the app's reader without a window) in under 1 GiB.
    QTemporaryDir dir;
    const Base b = base();
    const std::vector<std::pair<const char*, std::function<void(json&)>>> runs = {
        {"a million tokens",
         [](json& d) {
             d["stepper"]["tokens"] = many(1000000, {{"id", 1}});
         }},
        {"seven million numbers", [](json& d) { d["stepper"]["history"] = many(7000000, 0); }},
        {"a million empty arrays", [](json& d) { d["stepper"]["lens"] = many(1000000, json::array()); }},
        {"5e7 columns", [](json& d) { d["lab"]["patching"]["n_columns"] = 50000000; }},
    };
    for (const auto& [name, edit] : runs) {
        json doc = b.doc;
        edit(doc);
        RunContents c = b.opened.contents;
        c.document = doc.dump();
        QVERIFY2(c.document.size() <= engine::run::kMaxDocumentBytes, name);
        const QString path = dir.filePath("hostile.tsrun");
        engine::run::write_run_file(path.toStdString(), c, b.opened.file.get());
        QProcess cli;
        cli.start(TOKENSCOPE_CLI_PATH, {"check-run", path});
        QVERIFY(cli.waitForFinished(120000));
        const QString err = QString::fromUtf8(cli.readAllStandardError());
        QVERIFY2(cli.exitCode() == 1 && err.contains("refused"), qPrintable(QString(name) + ": " + err));
    }
    rusage usage{};
    getrusage(RUSAGE_CHILDREN, &usage);
    qInfo("largest check-run: %.0f MiB", double(usage.ru_maxrss) / 1024.0);
    QVERIFY2(usage.ru_maxrss < 1024 * 1024, qPrintable(QString("%1 KiB").arg(usage.ru_maxrss))); // KiB
}

QTEST_GUILESS_MAIN(TestRunValidate)
#include "test_run_validate.moc"
