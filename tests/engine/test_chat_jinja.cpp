// SPDX-License-Identifier: GPL-3.0-or-later
// Every real chat template of llama.cpp's models/templates/ rendered by our interpreter equals what
// llama.cpp's own Jinja path returns (`llama-server --jinja --chat-template-file F`, POST
// /apply-template) for the same conversations, bos/eos texts and date: the committed fixtures
// tests/data/chat/jinja/*.json (tests/reference/make_jinja_fixtures.py writes them). The templates
// are read from llama.cpp's sources ($TOKENSCOPE_LLAMA_CPP_SRC), checked by SHA-256 against the
// fixture. A case llama.cpp refuses must be refused by us too, by name.
#include "chat/chat_prompt.h"
#include "chat/chat_template.h"
#include "chat/model_template.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/test_model.h"
#include "test_paths.h"
#include "util/sha256.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>
#include <ctime>

using engine::ChatMessage;
using engine::ModelTemplate;

namespace {

QString fixture_dir()
{
    return QString::fromStdString(testsupport::data_dir()) + "/chat/jinja";
}

QJsonObject read_json(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

std::time_t parse_utc(const QString& iso)
{
    std::tm tm{};
    const QByteArray s = iso.toUtf8();
    if (std::sscanf(s.constData(), "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                    &tm.tm_sec) != 6)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return timegm(&tm);
}

std::vector<ChatMessage> messages_of(const QJsonArray& array)
{
    std::vector<ChatMessage> out;
    for (const auto& m : array)
        out.push_back(
            {m.toObject()["role"].toString().toStdString(), m.toObject()["content"].toString().toStdString()});
    return out;
}

} // namespace

class TestChatJinja : public QObject {
    Q_OBJECT

private slots:
    void initTestCase()
    {
        const QStringList files = QDir(fixture_dir()).entryList({"*.json"}, QDir::Files);
        QVERIFY2(files.size() >= 70, qPrintable(QString("only %1 template fixtures").arg(files.size())));
    }

    void llamaCppTemplates_data()
    {
        QTest::addColumn<QString>("fixture");
        for (const QString& f : QDir(fixture_dir()).entryList({"*.json"}, QDir::Files, QDir::Name))
            QTest::newRow(qPrintable(f.chopped(5))) << fixture_dir() + "/" + f;
    }
    void llamaCppTemplates()
    {
        REQUIRE_REFERENCE_DIR(llama_src, "TOKENSCOPE_LLAMA_CPP_SRC");
        QFETCH(QString, fixture);
        const QJsonObject fx = read_json(fixture);
        QVERIFY2(!fx.isEmpty(), qPrintable("cannot read " + fixture));
        const std::string path = llama_src + "/models/templates/" + fx["template"].toString().toStdString();
        QCOMPARE(QString::fromStdString(engine::sha256_file(path)), fx["template_sha256"].toString());
        QFile file(QString::fromStdString(path));
        QVERIFY(file.open(QIODevice::ReadOnly));
        const std::string source = file.readAll().toStdString();

        if (!fx["load_error"].isNull()) { // llama.cpp refuses the template: so do we, by name
            try {
                ModelTemplate::compile(source, {}, {});
                QFAIL(qPrintable("llama.cpp refuses this template (" + fx["load_error"].toString() + "), we ran it"));
            } catch (const engine::jinja::TemplateError& e) {
                qInfo("refused as llama.cpp refuses it: %s", e.what());
            }
            return;
        }
        std::optional<ModelTemplate> tmpl;
        try {
            tmpl = ModelTemplate::compile(source, fx["bos_token"].toString().toStdString(),
                                          fx["eos_token"].toString().toStdString());
        } catch (const engine::jinja::TemplateError& e) {
            QFAIL(qPrintable(QString("our interpreter refuses it: ") + e.what()));
        }
        // What llama.cpp found the template accepts, and so how it rewrote the messages.
        const QJsonObject caps = fx["llama_cpp"].toObject()["caps"].toObject();
        QVERIFY2(tmpl->supports_system_role() == caps["supports_system_role"].toBool(true),
                 "llama.cpp and we disagree on whether the template takes a system message");
        QVERIFY2(tmpl->typed_content_only() ==
                     (!caps["supports_string_content"].toBool(true) && caps["supports_typed_content"].toBool(false)),
                 "llama.cpp and we disagree on whether the template takes only typed content");

        const std::time_t now = parse_utc(fx["now"].toString());
        // llama-server decides enable_thinking per template family; the fixture says what it passed.
        const QJsonValue thinking = fx["llama_cpp"].toObject()["enable_thinking"];
        engine::TemplateOptions options;
        if (thinking.isBool())
            options.enable_thinking = thinking.toBool();
        // llama-server keeps earlier replies' reasoning by default where the template can.
        if (caps["supports_preserve_reasoning"].toBool())
            options.preserve_reasoning = true;
        int matched = 0, total = 0;
        for (const auto& c : fx["cases"].toArray()) {
            const QJsonObject kase = c.toObject();
            ++total;
            const auto messages = messages_of(kase["messages"].toArray());
            const bool add_generation_prompt = kase["add_generation_prompt"].toBool(true);
            const QString name = kase["name"].toString();
            std::string ours, error;
            try {
                ours = tmpl->render(messages, add_generation_prompt, now, options);
            } catch (const engine::jinja::TemplateError& e) {
                error = e.what();
            }
            if (!kase["error"].isNull()) {
                if (error.empty())
                    QFAIL(qPrintable(name + ": llama.cpp raised (" + kase["error"].toString() + "), we rendered"));
                ++matched;
                continue;
            }
            if (!error.empty())
                QFAIL(qPrintable(name + ": we raised: " + QString::fromStdString(error)));
            const QString expected = kase["prompt"].toString();
            if (QString::fromStdString(ours) != expected) {
                // The first difference, with context, is what a reader needs.
                const QString got = QString::fromStdString(ours);
                qsizetype at = 0;
                while (at < got.size() && at < expected.size() && got[at] == expected[at])
                    ++at;
                const auto around = [&](const QString& s) { return s.mid(std::max<qsizetype>(0, at - 60), 140); };
                QFAIL(qPrintable(QString("%1: differs at char %2\n  ours:      %3\n  llama.cpp: %4")
                                     .arg(name)
                                     .arg(at)
                                     .arg(around(got).toHtmlEscaped(), around(expected).toHtmlEscaped())));
            }
            ++matched;
        }
        qInfo("%d of %d cases equal llama.cpp's rendering", matched, total);
        QCOMPARE(matched, total);
    }

    // A model we have never seen, whose template writes a default system message when the
    // conversation has none (SmolLM2's, with real newlines inside its strings): the prompt the chat
    // sends has it, as llama.cpp --jinja, LM Studio and Ollama send it; a system message of the
    // user's replaces it.
    void modelTemplateWritesItsDefaultSystem()
    {
        REQUIRE_CHAT_MODEL(vocab_path); // for a vocabulary with the ChatML tokens
        const auto vocab = engine::gguf::GgufFile::open(vocab_path);
        engine::gguf::GgufWriter w = engine::make_test_model("llama", 3, vocab.get());
        w.set_string("general.name", "Tiny Helper 135M");
        w.set_string("tokenizer.chat_template",
                     "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
                     "{{ '<|im_start|>system\nYou are a helpful AI assistant named Tiny, trained by us<|im_end|>\n' }}"
                     "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
                     "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}");
        QTemporaryDir dir;
        const std::string path = (dir.path() + "/tiny-helper.gguf").toStdString();
        w.write(path);
        const auto model = engine::Model::load(path);

        const auto chat = engine::build_chat_prompt(*model, {{"user", "Hi"}}, 512, 16);
        QVERIFY(chat.style.model_template);
        QCOMPARE(QString::fromStdString(chat.text),
                 QString("<|im_start|>system\nYou are a helpful AI assistant named Tiny, trained by us<|im_end|>\n"
                         "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
        QVERIFY(chat.template_notice.empty());
        QCOMPARE(chat.style.default_system, std::string("You are a helpful AI assistant named Tiny, trained by us"));
        const auto with_system = engine::build_chat_prompt(*model, {{"system", "Be brief."}, {"user", "Hi"}}, 512, 16);
        QCOMPARE(QString::fromStdString(with_system.text),
                 QString("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                         "<|im_start|>assistant\n"));
        QCOMPARE(QString::fromStdString(engine::chat_style_description(chat.style)),
                 QString("model template (Jinja; chatml family)"));
    }

    // A template our interpreter refuses, or one that raises on a conversation: the prompt uses the
    // family's fixed layout and a notice names what happened and the layout used — never silently.
    void refusedTemplateFallsBackWithNotice()
    {
        engine::TemplateTokens tokens;
        const engine::ChatStyle refused = engine::model_chat_style(
            std::string("{% include 'x' %}<|im_start|>{{ messages[0].content }}"), "qwen2", tokens);
        QVERIFY(!refused.model_template);
        QCOMPARE(refused.format, engine::ChatFormat::ChatML);
        QVERIFY2(QString::fromStdString(refused.notice).contains("the tag 'include' is not supported"),
                 refused.notice.c_str());
        QVERIFY2(QString::fromStdString(refused.notice).contains("chatml layout instead"), refused.notice.c_str());

        const engine::ChatStyle raises = engine::model_chat_style(
            std::string("{% if messages|length > 1 %}{{ raise_exception('one message only') }}{% endif %}"
                        "<|im_start|>user\n{{ messages[0].content }}<|im_end|>\n"),
            "qwen2", tokens);
        QVERIFY(raises.model_template);
        std::string notice;
        const std::string one = engine::render_chat(raises, {{"user", "a"}}, true, &notice);
        QCOMPARE(QString::fromStdString(one), QString("<|im_start|>user\na<|im_end|>")); // Jinja drops the last newline
        QVERIFY(notice.empty());
        const std::string two =
            engine::render_chat(raises, {{"user", "a"}, {"assistant", "b"}, {"user", "c"}}, true, &notice);
        QCOMPARE(QString::fromStdString(two),
                 QString::fromStdString(engine::render_chat(engine::ChatFormat::ChatML,
                                                            {{"user", "a"}, {"assistant", "b"}, {"user", "c"}}, true)));
        QVERIFY2(QString::fromStdString(notice).contains("one message only"), notice.c_str());
    }
};

QTEST_GUILESS_MAIN(TestChatJinja)
#include "test_chat_jinja.moc"
