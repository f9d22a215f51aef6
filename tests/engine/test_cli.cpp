// SPDX-License-Identifier: GPL-3.0-or-later
// tokenscope-cli as a user runs it: `info` and `tokenize` on the default model (found without
// flags), `chat` on the chat model, JSON output, and clean errors with a non-zero exit on bad input.
#include "backend/cuda/cuda_backend.h"
#include "backend/vulkan/vulkan_backend.h"
#include "gguf/gguf_writer.h"
#include "gguf_builder.h"
#include "model/test_model.h"
#include "test_paths.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <thread>

namespace {

struct Run {
    int exit_code;
    QString out;
    QString err;
};

Run cli(const QStringList& args, const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment())
{
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(TOKENSCOPE_CLI_PATH, args);
    p.waitForFinished(120000);
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
            QString::fromUtf8(p.readAllStandardError())};
}

} // namespace

class TestCli : public QObject {
    Q_OBJECT
private slots:
    void infoOnDefaultModelWithoutFlags();
    void infoJson();
    void tokenizeShowsSpans();
    void tokenizeJsonFromFile();
    void generateStreamsAndReportsSpeed();
    void traceWritesJson();
    void chatAnswersWithTheChatModel();
    void chatJsonIsThePanelsPrompt();
    void modelKindSaysWhichRuleDecided_data();
    void modelKindSaysWhichRuleDecided();
    void absurdFlagsAreClampedOrRefused();
    void nPredictZeroAndMinusOneAsInLlamaCpp();
    void benchPrintsBothTests();
    void serveSimJsonContract();
    void speculativeGenerateJsonContract();
    void expertsJsonContract();
    void vulkanArithmeticIsChosen();
    void cudaBackendChosenOrRefused();
    void gigabyteNameIsRefused();
    void patchJsonContract();
    void attributeJsonPartsAddUp();
    void errorsGoToStderr_data();
    void errorsGoToStderr();
    void aDeepTestModelWithTheChatModelsVocabulary();
    void aTestModelsVocabularyPadded();
    void flashAttentionIsLlamaCppsDefault();
};

void TestCli::infoOnDefaultModelWithoutFlags()
{
    REQUIRE_DEFAULT_MODEL(path);
    const Run r = cli({"info"});
    QCOMPARE(r.exit_code, 0);
    QVERIFY2(r.out.contains(QRegularExpression("architecture\\s+gemma3")), qPrintable(r.out));
    QVERIFY(r.out.contains(QRegularExpression("layers\\s+18\\n")));
    QVERIFY(r.out.contains(QRegularExpression("heads\\s+4 \\(query\\), 1 \\(key/value\\)")));
    QVERIFY(r.out.contains(QRegularExpression("head dimension\\s+256 \\(key\\), 256 \\(value\\)")));
    QVERIFY(r.out.contains(QRegularExpression("context length\\s+32768")));
    QVERIFY(r.out.contains(QRegularExpression("vocabulary\\s+262144")));
    QVERIFY(r.out.contains(QRegularExpression("sliding window\\s+512 tokens on 15 layers; global layers: 5, 11, 17")));
    QVERIFY(r.out.contains("token_embd.weight"));
    QVERIFY(r.out.contains(QRegularExpression("tokenizer\\s+SentencePiece \\(llama\\), 262144 tokens")));
    QVERIFY(r.out.contains(QRegularExpression("chat template\\s+(present|absent)")));
    QVERIFY2(r.out.contains(
                 QRegularExpression("tuning\\s+base \\(no chat template, and its name does not say instruct\\)\\n")),
             qPrintable(r.out));
}

void TestCli::patchJsonContract()
{
    REQUIRE_DEFAULT_MODEL(path);
    const Run r = cli({"patch", "--clean", "The Eiffel Tower is in the city of", "--corrupt",
                       "The Colosseum is in the city of", "--tokens", " Paris, Rome", "--over", "heads", "--json"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const auto j = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(j["layers"].toInt(), 18);
    QCOMPARE(j["heads"].toInt(), 4);
    QCOMPARE(j["runs"].toInt(), 72);
    QVERIFY(j["clean_metric"].toDouble() > j["corrupted_metric"].toDouble());
    const auto effect = j["effect"].toArray();
    QCOMPARE(effect.size(), 18);
    double largest = 0.0;
    for (const auto& row : effect) {
        QCOMPARE(row.toArray().size(), 4);
        for (const auto& v : row.toArray()) {
            QVERIFY(v.isDouble());
            largest = std::max(largest, std::abs(v.toDouble()));
        }
    }
    QVERIFY(largest > 0.05); // some head carries the subject

    // prompts of different lengths: both counts named, exit 1
    const Run bad =
        cli({"patch", "--clean", "The Eiffel Tower is in", "--corrupt", "Rome is", "--tokens", " Paris, Rome"});
    QCOMPARE(bad.exit_code, 1);
    QVERIFY2(bad.err.contains("same number of tokens"), qPrintable(bad.err));
    const Run two = cli({"patch", "--clean", "a b", "--corrupt", "a c", "--tokens", " Paris"});
    QCOMPARE(two.exit_code, 1);
    QVERIFY2(two.err.contains("--tokens A,B"), qPrintable(two.err));
}

void TestCli::attributeJsonPartsAddUp()
{
    REQUIRE_DEFAULT_MODEL(path);
    const Run r = cli({"attribute", "-p", "The Eiffel Tower is in the city of", "--token", " Paris", "--json"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const auto j = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(j["token"].toString(), QString("▁Paris"));
    const double logit = j["logit"].toDouble();
    double sum = 0.0;
    int heads = 0;
    for (const auto& p : j["parts"].toArray()) {
        sum += p.toObject()["value"].toDouble();
        heads += p.toObject()["head"].isDouble() ? 1 : 0;
    }
    QCOMPARE(heads, 18 * 4);
    QVERIFY2(std::abs(sum - logit) <= 1e-4 * std::abs(logit), qPrintable(QString("%1 vs %2").arg(sum).arg(logit)));
    const Run bad = cli({"attribute", "-p", "x", "--token", " Parisiennes extraordinaire"});
    QCOMPARE(bad.exit_code, 1);
    QVERIFY2(bad.err.contains("not one"), qPrintable(bad.err));
}

void TestCli::infoJson()
{
    REQUIRE_DEFAULT_MODEL(path);
    const Run r = cli({"info", QString::fromStdString(path), "--json"});
    QCOMPARE(r.exit_code, 0);
    const auto j = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(j["architecture"].toString(), QString("gemma3"));
    QCOMPARE(j["n_layer"].toInt(), 18);
    QCOMPARE(j["tensors"].toArray().size(), 236);
    QCOMPARE(j["tokenizer"].toObject()["tokens"].toInt(), 262144);
    QCOMPARE(j["sliding_window"].toInt(), 512);
    QCOMPARE(j["model_kind"].toString(), QString("base"));
    QCOMPARE(j["model_kind_reason"].toString(), QString("no chat template, and its name does not say instruct"));
}

void TestCli::tokenizeShowsSpans()
{
    REQUIRE_DEFAULT_MODEL(path);
    const Run r = cli({"tokenize", "Hello world"});
    QCOMPARE(r.exit_code, 0);
    QVERIFY2(r.out.startsWith("3 tokens, 11 bytes"), qPrintable(r.out));
    QVERIFY(r.out.contains("<bos>"));
    QVERIFY(r.out.contains("[5, 11)"));
}

void TestCli::tokenizeJsonFromFile()
{
    REQUIRE_DEFAULT_MODEL(path);
    QTemporaryDir dir;
    const QString file = dir.filePath("t.txt");
    const QByteArray text = "  two spaces\nand a newline\n";
    {
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(text);
    }
    const Run r = cli({"tokenize", QString::fromStdString(path), "--file", file, "--json", "--no-special"});
    QCOMPARE(r.exit_code, 0);
    const auto tokens = QJsonDocument::fromJson(r.out.toUtf8()).object()["tokens"].toArray();
    QVERIFY(!tokens.isEmpty());
    // Spans tile the text exactly: each token starts where the previous one ended.
    int expected_begin = 0;
    for (const auto& t : tokens) {
        QCOMPARE(t.toObject()["begin"].toInt(), expected_begin);
        expected_begin = t.toObject()["end"].toInt();
    }
    QCOMPARE(expected_begin, int(text.size()));
}

void TestCli::generateStreamsAndReportsSpeed()
{
    REQUIRE_DEFAULT_MODEL(path);
    const Run r = cli({"generate", "-p", "The old lighthouse keeper climbed the stairs every evening and", "-n", "12",
                       "--temp", "0", "-t", "2"});
    QCOMPARE(r.exit_code, 0);
    // Greedy: the continuation llama.cpp also produces (tests/data/logits, prompt short_en).
    QVERIFY2(r.out.contains("and watched the sun set over the harbor."), qPrintable(r.out));
    QVERIFY2(r.err.contains(QRegularExpression(
                 "TTFT [0-9.]+ ms; 12 tokens generated, decode [0-9.]+ tokens/s; stopped: maximum tokens")),
             qPrintable(r.err));
}

void TestCli::traceWritesJson()
{
    REQUIRE_DEFAULT_MODEL(path);
    QTemporaryDir dir;
    const QString out = dir.filePath("trace.json");
    const Run r =
        cli({"trace", "-p", "The river bank", "-n", "4", "--temp", "0", "--json", out, "--attention", "5:0,11:3"});
    QCOMPARE(r.exit_code, 0);
    QFile f(out);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const auto j = QJsonDocument::fromJson(f.readAll()).object();
    const auto steps = j["steps"].toArray();
    QCOMPARE(steps.size(), 4);
    for (const auto& s : steps) {
        QVERIFY(!s.toObject()["top"].toArray().isEmpty());
        QVERIFY(s.toObject()["kv"].toObject()["bytes_in_use"].toDouble() > 0);
    }
    QVERIFY(j["timings_ms"].toObject()["prefill"].toDouble() > 0);
    const auto att = j["attention"].toArray();
    QCOMPARE(att.size(), 2);
    QCOMPARE(att[0].toObject()["layer"].toInt(), 5);
    QCOMPARE(att[1].toObject()["head"].toInt(), 3);
}

void TestCli::chatAnswersWithTheChatModel()
{
    REQUIRE_CHAT_MODEL(chat_path);
    // No model named: `chat` takes the installed chat model.
    const Run r = cli({"chat", "What is the capital of France? Answer in one word.", "--temp", "0", "-n", "16"});
    QCOMPARE(r.exit_code, 0);
    QVERIFY2(r.out.contains("Paris"), qPrintable(r.out + r.err));
    QVERIFY(r.err.contains("stopped: end of generation"));
    // A base model answers too, but is named as one.
    REQUIRE_DEFAULT_MODEL(base);
    const Run b = cli({"chat", QString::fromStdString(base), "Hello", "--temp", "0", "-n", "4"});
    QCOMPARE(b.exit_code, 0);
    QVERIFY2(b.err.contains("is a base model"), qPrintable(b.err));
    const Run empty = cli({"chat", "   "});
    QCOMPARE(empty.exit_code, 1);
    QVERIFY2(empty.err.contains("the message is empty"), qPrintable(empty.err));
}

// --json gives the rendered prompt — the same bytes llama.cpp's Jinja path renders (the committed
// template fixture) — its tokens, and the reply; --system replaces the template's default.
void TestCli::chatJsonIsThePanelsPrompt()
{
    REQUIRE_CHAT_MODEL(chat_path);
    QFile f(QString::fromStdString(testsupport::data_dir()) + "/chat/qwen2.5-coder-0.5b-templates.json");
    QVERIFY(f.open(QIODevice::ReadOnly));
    QString expected_no_system, expected_system;
    for (const auto& c : QJsonDocument::fromJson(f.readAll())["cases"].toArray()) {
        if (c.toObject()["name"] == "no_system")
            expected_no_system = c.toObject()["prompt"].toString();
        if (c.toObject()["name"] == "with_system")
            expected_system = c.toObject()["prompt"].toString();
    }
    QVERIFY(!expected_no_system.isEmpty() && !expected_system.isEmpty());

    const Run r = cli({"chat", QString::fromStdString(chat_path), "What is the capital of France? Answer in one word.",
                       "--temp", "0", "-n", "16", "--json"});
    QCOMPARE(r.exit_code, 0);
    const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(j["kind"].toString(), QString("instruct"));
    QCOMPARE(j["model_kind"].toString(), QString("instruct"));
    QCOMPARE(j["model_kind_reason"].toString(), QString(R"(general.finetune says "Instruct-AWQ")"));
    QCOMPARE(j["chat_format"].toString(), QString("chatml"));
    // Rendered by the model's own template (our Jinja interpreter), which writes Qwen's default system message.
    QCOMPARE(j["chat_template"].toString(), QString("model template (Jinja; chatml family)"));
    QCOMPARE(j["template_notice"].toString(), QString());
    QCOMPARE(j["default_system"].toString(),
             QString("You are Qwen, created by Alibaba Cloud. You are a helpful assistant."));
    QCOMPARE(j["prompt"].toString(), expected_no_system);
    const QJsonArray tokens = j["prompt_tokens"].toArray();
    QVERIFY(tokens.size() > 20);
    QCOMPARE(tokens.first().toObject()["piece"].toString(), QString("<|im_start|>"));
    QCOMPARE(tokens.first().toObject()["id"].toInt(), 151644);
    QString joined;
    for (const auto& t : tokens)
        joined += t.toObject()["piece"].toString();
    QCOMPARE(joined, expected_no_system); // the pieces spell the prompt: nothing added or lost
    QVERIFY2(j["reply"].toString().contains("Paris"), qPrintable(j["reply"].toString()));

    const Run s = cli({"chat", QString::fromStdString(chat_path), "What is the capital of France?", "--system",
                       "You are a terse geography tutor.", "--temp", "0", "-n", "8", "--json"});
    QCOMPARE(s.exit_code, 0);
    QCOMPARE(QJsonDocument::fromJson(s.out.toUtf8())["prompt"].toString(), expected_system);
}

// Flags as an attacker (or a typo) gives them: --threads 100000 runs with the machine's count and
// says so (it used to start ~32,000 threads); sampling values outside their range are refused with
// the range; a prompt longer than the context is refused before it is computed.
// A small random-weight llama model carrying a ChatML template and the names of each row: `info`
// (text and --json) and `chat --json` give the kind and the rule that decided it, and `chat` names
// the rule in its note about a base model.
void TestCli::modelKindSaysWhichRuleDecided_data()
{
    QTest::addColumn<QString>("finetune"); // empty: absent
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("reason");
    QTest::newRow("template, finetune Base") << "Base"
                                             << "Qwen2.5 0.5B"
                                             << "base"
                                             << R"(general.finetune says "Base")";
    QTest::newRow("template, name without a tuning word") << ""
                                                          << "Qwen2.5 0.5B"
                                                          << "instruct"
                                                          << "it has a chat template";
    QTest::newRow("template, finetune Instruct") << "Instruct"
                                                 << "Qwen2.5 0.5B"
                                                 << "instruct"
                                                 << R"(general.finetune says "Instruct")";
}

void TestCli::modelKindSaysWhichRuleDecided()
{
    QFETCH(QString, finetune);
    QFETCH(QString, name);
    QFETCH(QString, kind);
    QFETCH(QString, reason);
    QTemporaryDir dir;
    const QString model = dir.filePath("tiny.gguf");
    engine::gguf::GgufWriter w = engine::make_test_model("llama", 1);
    w.set_string("general.name", name.toStdString());
    if (!finetune.isEmpty())
        w.set_string("general.finetune", finetune.toStdString());
    w.set_string("tokenizer.chat_template",
                 "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
    w.write(model.toStdString());

    const Run info = cli({"info", model});
    QCOMPARE(info.exit_code, 0);
    QVERIFY2(info.out.contains(QString("tuning            %1 (%2)\n").arg(kind, reason)), qPrintable(info.out));
    const QJsonObject j = QJsonDocument::fromJson(cli({"info", model, "--json"}).out.toUtf8()).object();
    QCOMPARE(j["model_kind"].toString(), kind);
    QCOMPARE(j["model_kind_reason"].toString(), reason);

    const Run chat = cli({"chat", model, "Hello", "--temp", "0", "-n", "2", "--json"});
    QCOMPARE(chat.exit_code, 0);
    const QJsonObject c = QJsonDocument::fromJson(chat.out.toUtf8()).object();
    QCOMPARE(c["model_kind"].toString(), kind);
    QCOMPARE(c["model_kind_reason"].toString(), reason);
    QCOMPARE(chat.err.contains(QString("is a base model (%1)").arg(reason)), kind == "base");
}

// -n as llama.cpp reads it: 0 generates nothing (only the prompt is read), -1 runs until the end of
// text or a full context (which stops the reply, not an error), below -1 is refused.
void TestCli::nPredictZeroAndMinusOneAsInLlamaCpp()
{
    REQUIRE_DEFAULT_MODEL(model);
    const QString m = QString::fromStdString(model);
    const Run none = cli({"generate", m, "-p", "Hello there", "-n", "0", "--temp", "0"});
    QCOMPARE(none.exit_code, 0);
    QCOMPARE(none.out, QString("Hello there\n\n"));
    QVERIFY2(none.err.contains("; 0 tokens generated"), qPrintable(none.err));
    const Run chat = cli({"chat", m, "Hi", "-n", "0", "--temp", "0", "--json"});
    QCOMPARE(chat.exit_code, 0);
    QCOMPARE(QJsonDocument::fromJson(chat.out.toUtf8()).object()["reply"].toString(), QString());

    // A context of 24 tokens: a base model's greedy run of "1, 2, 3," goes on until it is full.
    const Run all = cli({"generate", m, "-p", "1, 2, 3, 4, 5,", "-n", "-1", "--temp", "0", "-c", "24"});
    QCOMPARE(all.exit_code, 0);
    const QRegularExpression generated("; ([0-9]+) tokens generated, .*stopped: ([a-z ]+);");
    const auto match = generated.match(all.err);
    QVERIFY2(match.hasMatch(), qPrintable(all.err));
    QVERIFY2(match.captured(2) == "context full" || match.captured(2) == "end of generation", qPrintable(all.err));
    QVERIFY(match.captured(1).toInt() > 0);

    const Run below = cli({"generate", m, "-p", "Hello", "-n", "-2"});
    QVERIFY(below.exit_code != 0); // CLI11's usage error, as for any option's range
    QVERIFY2(below.err.contains("n-predict") && below.err.contains("-2"), qPrintable(below.err));
}

void TestCli::absurdFlagsAreClampedOrRefused()
{
    REQUIRE_DEFAULT_MODEL(model);
    const int cores = int(std::thread::hardware_concurrency());
    const Run t = cli(
        {"generate", QString::fromStdString(model), "-p", "Hello", "-n", "2", "--temp", "0", "--threads", "100000"});
    QCOMPARE(t.exit_code, 0);
    QVERIFY2(
        t.err.contains(
            QString("note: --threads 100000 is more than this machine's %1 hardware threads; using %1").arg(cores)),
        qPrintable(t.err));
    QVERIFY2(
        t.err.contains(QString("backend CPU (%1 thread%2, llama.cpp order: ").arg(cores).arg(cores == 1 ? "" : "s")),
        qPrintable(t.err));

    for (const QStringList& bad :
         {QStringList{"--temp", "1e-45"}, QStringList{"--temp", "inf"}, QStringList{"--top-p", "2"},
          QStringList{"--min-p", "-1"}, QStringList{"--repeat-penalty", "0"}}) {
        const Run r = cli(QStringList{"generate", QString::fromStdString(model), "-p", "Hello", "-n", "2"} + bad);
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains("invalid sampling setting"), qPrintable(bad.join(' ') + ": " + r.err));
    }
    const Run negative = cli({"generate", QString::fromStdString(model), "-p", "Hello", "--threads", "-3"});
    QCOMPARE(negative.exit_code, 1);
    QVERIFY2(negative.err.contains("--threads must be 0"), qPrintable(negative.err));

    const Run longer =
        cli({"generate", QString::fromStdString(model), "-p", QString("word ").repeated(300), "-c", "64", "-n", "2"});
    QCOMPARE(longer.exit_code, 1);
    QVERIFY2(longer.err.contains("tokens but the context holds 64"), qPrintable(longer.err));
}

void TestCli::benchPrintsBothTests()
{
    REQUIRE_DEFAULT_MODEL(path);
    const Run r = cli({"bench", "-p", "32", "-n", "8", "-r", "1", "-t", "2", "--json"});
    QCOMPARE(r.exit_code, 0);
    const auto j = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QVERIFY(j["pp"].toObject()["tokens_per_second"].toDouble() > 0);
    QVERIFY(j["tg"].toObject()["tokens_per_second"].toDouble() > 0);
    QCOMPARE(j["pp"].toObject()["n"].toInt(), 32);
}

// `serve-sim`: the same clients served one at a time, in static batches and continuously; in
// deterministic mode with greedy replies the three give every request the same tokens, each of its
// asked length, and only the batching modes put several sequences in a pass. Bad workloads are named.
// generate --speculate lookup --json: the tokens asked for, the counts adding up, the same tokens
// as the plain loop in deterministic mode; sampling is refused by name (the speculation is greedy).
// `experts` on a random qwen3moe model: every layer, every token its k experts with their weights
// (normalised: they sum to 1); --remove keeps that expert out of every route; a dense model and an empty
// prompt are refused with a message.
void TestCli::expertsJsonContract()
{
    QTemporaryDir dir;
    const QString moe = dir.filePath("qwen3moe.gguf");
    QCOMPARE(cli({"make-test-model", "--arch", "qwen3moe", "--seed", "3", "--out", moe}).exit_code, 0);
    const Run r = cli({"experts", moe, "-p", "route these words", "-t", "1", "--json"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(j["n_expert"].toInt(), 8);
    QCOMPARE(j["n_expert_used"].toInt(), 2);
    QVERIFY(j["weights_normalized"].toBool());
    const int n = int(j["tokens"].toArray().size());
    QVERIFY(n > 0);
    QCOMPARE(j["layers"].toArray().size(), 4);
    for (const QJsonValue layer : j["layers"].toArray()) {
        QCOMPARE(layer["routes"].toArray().size(), n);
        for (const QJsonValue route : layer["routes"].toArray()) {
            QCOMPARE(route.toArray().size(), 2);
            const double w = route[0]["weight"].toDouble() + route[1]["weight"].toDouble();
            QVERIFY(std::abs(w - 1.0) < 1e-5);
            QVERIFY(route[0]["weight"].toDouble() >= route[1]["weight"].toDouble()); // slot order
        }
    }
    const int top = j["layers"][0]["routes"][0][0]["expert"].toInt();
    const Run removed =
        cli({"experts", moe, "-p", "route these words", "-t", "1", "--json", "--remove", QString::number(top)});
    QVERIFY2(removed.exit_code == 0, qPrintable(removed.err));
    for (const QJsonValue layer : QJsonDocument::fromJson(removed.out.toUtf8())["layers"].toArray())
        for (const QJsonValue route : layer["routes"].toArray())
            for (const QJsonValue slot : route.toArray())
                QVERIFY(slot["expert"].toInt() != top);
    const Run empty = cli({"experts", moe, "-p", ""});
    QCOMPARE(empty.exit_code, 1);
    QVERIFY2(empty.err.contains("the prompt is empty"), qPrintable(empty.err));
    const QString dense = dir.filePath("llama.gguf");
    QCOMPARE(cli({"make-test-model", "--arch", "llama", "--out", dense}).exit_code, 0);
    const Run d = cli({"experts", dense, "-p", "x"});
    QCOMPARE(d.exit_code, 1);
    QVERIFY2(d.err.contains("dense model (llama)"), qPrintable(d.err));
}

void TestCli::speculativeGenerateJsonContract()
{
    REQUIRE_DEFAULT_MODEL(path);
    const Run r = cli({"generate", "-p", "one two three one two three one two", "-n", "12", "--temp", "0",
                       "--speculate", "lookup", "--draft-max", "4", "--deterministic", "-t", "2", "--json"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(j["tokens"].toArray().size(), 12);
    QCOMPARE(j["source"].toString(), QString("lookup"));
    const int drafted = j["drafted"].toInt(), accepted = j["accepted"].toInt(), passes = j["passes"].toInt();
    QVERIFY(drafted > 0 && accepted <= drafted);
    QCOMPARE(passes + accepted + 1, 12); // each pass gives its token and the accepted ones; the last needs none
    QCOMPARE(j["steps"].toArray().size(), passes);
    QVERIFY(j["parts_from_plain_at"].isNull()); // deterministic: the plain loop's tokens
    QVERIFY(j["speedup"].toDouble() > 0);
    int along = 0; // the per-position counts add up to the totals
    for (const auto& pv : j["acceptance_by_position"].toArray()) {
        const QJsonObject p = pv.toObject();
        QVERIFY(p["accepted"].toInt() <= p["drafted"].toInt());
        along += p["accepted"].toInt();
    }
    QCOMPARE(along, accepted);

    // early exit, sampled: the verdicts carry both probabilities and the draft–target KL
    const Run early = cli({"generate", "-p", "The capital of France is", "-n", "10", "--temp", "0.8", "--seed", "3",
                           "--speculate", "early-exit:9", "--draft-max", "3", "-t", "2", "--json"});
    QVERIFY2(early.exit_code == 0, qPrintable(early.err));
    const QJsonObject e = QJsonDocument::fromJson(early.out.toUtf8()).object();
    QCOMPARE(e["tokens"].toArray().size(), 10);
    QCOMPARE(e["drafter"].toString(), QString("early exit after 9 of 18 layers"));
    QVERIFY(e["drafted"].toInt() > 0);
    for (const auto& step : e["steps"].toArray())
        for (const auto& vv : step.toObject()["verdicts"].toArray()) {
            const QJsonObject v = vv.toObject();
            QVERIFY(v["q"].toDouble() > 0.0 && v["q"].toDouble() <= 1.0);
            QVERIFY(v["p"].toDouble() >= 0.0 && v["p"].toDouble() <= 1.0);
            QVERIFY(v["kl"].toDouble() >= 0.0);
        }
    // refused by name before anything runs
    const Run deep = cli({"generate", "-p", "x", "-n", "4", "--speculate", "early-exit:18"});
    QVERIFY(deep.exit_code != 0);
    QVERIFY2(deep.err.contains("the model has 18"), qPrintable(deep.err));
    const Run missing = cli({"generate", "-p", "x", "-n", "4", "--speculate", "draft:/nonexistent/draft.gguf"});
    QVERIFY(missing.exit_code != 0);
    QVERIFY2(missing.err.contains("draft.gguf"), qPrintable(missing.err));
    const Run unknown = cli({"generate", "-p", "x", "-n", "4", "--speculate", "medusa"});
    QVERIFY(unknown.exit_code != 0);
    QVERIFY2(unknown.err.contains("not a draft source"), qPrintable(unknown.err));
}

void TestCli::serveSimJsonContract()
{
    REQUIRE_DEFAULT_MODEL(path);
    QTemporaryDir dir;
    const QString csv = dir.filePath("runs.csv");
    const Run r = cli({"serve-sim", "--clients",
                       "4",         "--rate",
                       "0",         "--prompt-min",
                       "8",         "--prompt-max",
                       "20",        "--output-min",
                       "3",         "--output-max",
                       "6",         "--shared-fraction",
                       "1",         "--shared-tokens",
                       "40",        "--block-tokens",
                       "16",        "--deterministic",
                       "-t",        "2",
                       "--json",    "--csv",
                       csv});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QJsonArray runs = QJsonDocument::fromJson(r.out.toUtf8()).array();
    QCOMPARE(runs.size(), 3);
    QStringList modes;
    std::vector<QJsonArray> tokens(4);
    for (const auto& v : runs) {
        const QJsonObject run = v.toObject();
        modes << run["mode"].toString();
        const QJsonObject summary = run["summary"].toObject();
        const QJsonArray requests = run["requests"].toArray();
        QCOMPARE(requests.size(), 4);
        int generated = 0;
        for (int i = 0; i < 4; ++i) {
            const QJsonObject q = requests[i].toObject();
            QCOMPARE(q["tokens"].toArray().size(), q["max_new_tokens"].toInt());
            QCOMPARE(q["finish_reason"].toString(), QString("length"));
            QVERIFY(q["ttft_ms"].toDouble() > 0);
            generated += int(q["tokens"].toArray().size());
            if (tokens[std::size_t(i)].isEmpty())
                tokens[std::size_t(i)] = q["tokens"].toArray();
            else
                QCOMPARE(q["tokens"].toArray(), tokens[std::size_t(i)]);
        }
        QCOMPARE(summary["generated_tokens"].toInt(), generated);
        QVERIFY(summary["generated_per_s"].toDouble() > 0);
        const int widest = summary["max_batch_sequences"].toInt();
        if (run["mode"].toString() == "one-at-a-time")
            QCOMPARE(widest, 1);
        else
            QVERIFY2(widest > 1, qPrintable(run["mode"].toString()));
        QVERIFY(run["options"].toObject()["deterministic"].toBool());
    }
    QCOMPARE(modes, (QStringList{"one-at-a-time", "static", "continuous"}));
    QFile file(csv);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(file.readAll()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 1 + 3 * 4);
    QVERIFY(lines[0].startsWith("mode,request,"));

    // parallel sampling: two replies per prompt, the second a fork that copies the prompt's last block
    const Run forked =
        cli({"serve-sim", "--clients",    "2",          "--rate",       "0", "--prompt-min", "10", "--prompt-max",
             "20",        "--output-min", "3",          "--output-max", "3", "--samples",    "2",  "--temperature",
             "1",         "--mode",       "continuous", "-t",           "2", "--json"});
    QVERIFY2(forked.exit_code == 0, qPrintable(forked.err));
    const QJsonObject fork_run = QJsonDocument::fromJson(forked.out.toUtf8()).array()[0].toObject();
    QCOMPARE(fork_run["requests"].toArray().size(), 4);
    QCOMPARE(fork_run["requests"].toArray()[2].toObject()["parent"].toInt(), 0);
    QCOMPARE(fork_run["summary"].toObject()["copy_on_write"].toInt(), 2);

    const Run none = cli({"serve-sim", "--clients", "0"});
    QCOMPARE(none.exit_code, 1);
    QVERIFY2(none.err.contains("0 clients"), qPrintable(none.err));
    const Run upside = cli({"serve-sim", "--prompt-min", "10", "--prompt-max", "5"});
    QCOMPARE(upside.exit_code, 1);
    QVERIFY2(upside.err.contains("prompt lengths 10 … 5"), qPrintable(upside.err));
    const Run no_block = cli({"serve-sim", "--clients", "1", "--block-tokens", "0"}); // divided by before
    QCOMPARE(no_block.exit_code, 1);
    QVERIFY2(no_block.err.contains("at least one position"), qPrintable(no_block.err));
    const Run vulkan = cli({"serve-sim", "--clients", "1", "--backend", "vulkan"});
    QCOMPARE(vulkan.exit_code, 1);
    QVERIFY2(vulkan.err.contains("CPU backend only"), qPrintable(vulkan.err));
}

// `make-test-model --arch qwen2 --layers 30 --vocab CHAT_MODEL`: a 30-layer random model with the chat
// model's tokenizer (the model the layout checks use); it loads and generates.
void TestCli::aDeepTestModelWithTheChatModelsVocabulary()
{
    REQUIRE_CHAT_MODEL(chat);
    QTemporaryDir dir;
    const QString model = dir.filePath("deep.gguf");
    const Run made = cli({"make-test-model", "--arch", "qwen2", "--layers", "30", "--vocab",
                          QString::fromStdString(chat), "--out", model});
    QVERIFY2(made.exit_code == 0, qPrintable(made.err));
    const Run info = cli({"info", model, "--json"});
    QCOMPARE(info.exit_code, 0);
    const auto j = QJsonDocument::fromJson(info.out.toUtf8()).object();
    QCOMPARE(j["n_layer"].toInt(), 30);
    QCOMPARE(j["n_vocab"].toInt(), 151936); // the chat model's vocabulary
    const Run gen = cli({"generate", "-m", model, "-p", "Hello", "-n", "3", "--temp", "0"});
    QVERIFY2(gen.exit_code == 0, qPrintable(gen.err));
    QCOMPARE(cli({"make-test-model", "--preset", "gemma3-270m", "--layers", "30", "--out", model}).exit_code, 1);
}

// `make-test-model --vocab-size N` pads the built-in vocabulary to N tokens (the repacked fixtures'
// 768); fewer than its own tokens, or with --vocab or --preset, is refused with a message.
void TestCli::aTestModelsVocabularyPadded()
{
    QTemporaryDir dir;
    const QString model = dir.filePath("padded.gguf");
    const Run made =
        cli({"make-test-model", "--arch", "qwen2", "--type", "Q4_0", "--vocab-size", "768", "--out", model});
    QVERIFY2(made.exit_code == 0, qPrintable(made.err));
    const Run info = cli({"info", model, "--json"});
    QCOMPARE(info.exit_code, 0);
    QCOMPARE(QJsonDocument::fromJson(info.out.toUtf8()).object()["n_vocab"].toInt(), 768);
    const Run fewer = cli({"make-test-model", "--arch", "qwen2", "--vocab-size", "100", "--out", model});
    QCOMPARE(fewer.exit_code, 1);
    QVERIFY2(fewer.err.contains("a vocabulary of 100 tokens"), qPrintable(fewer.err));
    const Run preset = cli({"make-test-model", "--preset", "qwen3-0.6b", "--vocab-size", "1024", "--out", model});
    QCOMPARE(preset.exit_code, 1);
    QVERIFY2(preset.err.contains("--vocab-size only applies"), qPrintable(preset.err));
}

// --flash-attn as llama.cpp's -fa: auto (the default) and on run its flash-attention order on the CPU,
// off its plain attention; the backend's name says which; anything else is refused by name.
void TestCli::flashAttentionIsLlamaCppsDefault()
{
    QTemporaryDir dir;
    const QString model = dir.filePath("llama.gguf");
    QCOMPARE(cli({"make-test-model", "--arch", "llama", "--out", model}).exit_code, 0);
    QMap<QString, QString> text;
    for (const QString fa : {"", "auto", "on", "off"}) {
        QStringList args{"bench", "-m", model, "-p", "8", "-n", "2", "-r", "1", "-t", "1", "--json"};
        if (!fa.isEmpty())
            args << "--flash-attn" << fa;
        const Run r = cli(args);
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        const QString backend = QJsonDocument::fromJson(r.out.toUtf8()).object()["backend"].toString();
        QVERIFY2(backend.contains("flash attention") == (fa != "off"), qPrintable(fa + ": " + backend));
        QStringList gen{"generate", model, "-p", "one two three four five", "-n", "12", "--temp", "0", "-t", "1"};
        if (!fa.isEmpty())
            gen << "--flash-attn" << fa;
        const Run g = cli(gen);
        QVERIFY2(g.exit_code == 0, qPrintable(g.err));
        text[fa.isEmpty() ? "default" : fa] = g.out;
    }
    QCOMPARE(text["default"], text["on"]);
    QCOMPARE(text["auto"], text["on"]);
    const Run bad = cli({"bench", "-m", model, "-p", "8", "-n", "2", "--flash-attn", "maybe"});
    QVERIFY(bad.exit_code != 0);
    QVERIFY2(bad.err.contains("--flash-attn"), qPrintable(bad.err));
}

// --backend vulkan runs the f32 arithmetic; --vulkan-exact the 64-bit one; both say so in the
// backend's name (a small random-weight model: lavapipe is slow).
void TestCli::vulkanArithmeticIsChosen()
{
    if (engine::list_vulkan_devices().empty())
        QSKIP("no Vulkan device (install mesa-vulkan-drivers for lavapipe)");
    QTemporaryDir dir;
    const QString model = dir.filePath("llama.gguf");
    QCOMPARE(cli({"make-test-model", "--arch", "llama", "--out", model}).exit_code, 0);
    for (const bool exact : {false, true}) {
        QStringList args{"bench", "-m", model, "-p", "8", "-n", "2", "-r", "1", "--backend", "vulkan", "--json"};
        if (exact)
            args << "--vulkan-exact";
        const Run r = cli(args);
        QCOMPARE(r.exit_code, 0);
        const QString backend = QJsonDocument::fromJson(r.out.toUtf8()).object()["backend"].toString();
        QVERIFY2(backend.startsWith("Vulkan") && backend.endsWith(exact ? ", exact)" : ", f32)"), qPrintable(backend));
    }
}

// Without a CUDA device (no driver, or no module): `devices` says why, and `--backend cuda` is an
// error naming the reason (not a quiet run on the CPU); with one, both show the device.
void TestCli::cudaBackendChosenOrRefused()
{
    const engine::CudaDeviceListing listing = engine::list_cuda_devices();
    const Run devices = cli({"devices"});
    QCOMPARE(devices.exit_code, 0);
    const Run json = cli({"devices", "--json"});
    QCOMPARE(json.exit_code, 0);
    const auto j = QJsonDocument::fromJson(json.out.toUtf8()).object();
    QVERIFY(j["cuda"].isArray() && j["vulkan"].isArray());
    QCOMPARE(j["cuda"].toArray().size(), qsizetype(listing.devices.size()));
    QTemporaryDir dir;
    const QString model = dir.filePath("llama.gguf");
    QCOMPARE(cli({"make-test-model", "--arch", "llama", "--out", model}).exit_code, 0);
    const Run r = cli({"generate", "-m", model, "-p", "Hello", "-n", "2", "--backend", "cuda"});
    if (listing.devices.empty()) {
        const QString why = QString::fromStdString(listing.why_unavailable);
        QVERIFY2(devices.out.contains("CUDA: unavailable (" + why + ")"), qPrintable(devices.out));
        QCOMPARE(j["cuda_unavailable"].toString(), why);
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains("--backend cuda") && r.err.contains(why), qPrintable(r.err));
    } else {
        QVERIFY2(devices.out.contains("CUDA 0  " + QString::fromStdString(listing.devices[0].name)),
                 qPrintable(devices.out));
        QCOMPARE(r.exit_code, 0);
    }
}

void TestCli::gigabyteNameIsRefused()
{
    QTemporaryDir dir;
    const QString file = dir.filePath("long-name.gguf");
    QVERIFY(testsupport::write_gguf_with_long_name(file.toStdString(), 1ull << 30));
    const Run r = cli({"info", file});
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.contains("string value of 'general.name' has length 1073741824, more than the limit"),
             qPrintable(r.err));
}

void TestCli::errorsGoToStderr_data()
{
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("expected");
    QTest::newRow("missing file") << QStringList{"info", "/nonexistent/model.gguf"} << "cannot open";
    QTest::newRow("not a gguf") << QStringList{"info", TOKENSCOPE_TEST_DATA_DIR "/../CMakeLists.txt"}
                                << "not a GGUF file";
    QTest::newRow("nothing to tokenize") << QStringList{"tokenize", "--model", "x.gguf"} << "nothing to tokenize";
    QTest::newRow("empty prompt") << QStringList{"generate", "-p", ""} << "prompt is empty";
    QTest::newRow("attention out of range")
        << QStringList{"trace", "-p", "hi", "--json", "/tmp/x.json", "--attention", "99:0"} << "outside the model";
    QTest::newRow("vocab of an unknown model")
        << QStringList{"tokenize", TOKENSCOPE_TEST_DATA_DIR "/quant/blocks.gguf", "hi"} << "no tokenizer";
}

void TestCli::errorsGoToStderr()
{
    QFETCH(QStringList, args);
    QFETCH(QString, expected);
    const Run r = cli(args);
    QVERIFY(r.exit_code > 0);
    QVERIFY2(r.err.startsWith("error: ") && r.err.contains(expected), qPrintable(r.err));
    QVERIFY(r.out.isEmpty());
}

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
