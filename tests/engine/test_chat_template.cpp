// SPDX-License-Identifier: GPL-3.0-or-later
// Chat prompts against llama.cpp's built-in formatter (src/llama-chat.cpp): every format renders
// the conversation of llama.cpp's tests/test-chat-template.cpp exactly as llm_chat_apply_template
// does, templates are classified as llm_chat_detect_template classifies them (first match in its
// order), the default model's prompt tokenizes to llama.cpp's ids, the chat model's prompts equal
// what llama.cpp's Jinja path renders from its own template (default system message included), and
// the context policy drops the oldest turns with exact notices.
#include "chat/chat_template.h"
#include "chat/context_policy.h"
#include "gguf/gguf_file.h"
#include "model/model_locator.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>
#include <algorithm>

using engine::ChatFormat;
using engine::ChatMessage;

namespace {

// llama.cpp's test conversation: a system prompt, two full turns (the second reply padded with
// spaces, which shows who trims) and a third question.
const std::vector<ChatMessage>& conversation()
{
    static const std::vector<ChatMessage> c{
        {"system", "You are a helpful assistant"},
        {"user", "Hello"},
        {"assistant", "Hi there"},
        {"user", "Who are you"},
        {"assistant", "   I am an assistant   "},
        {"user", "Another question"},
    };
    return c;
}

std::string str(const QByteArray& b)
{
    return std::string(b.constData(), static_cast<std::size_t>(b.size()));
}

// Bytes as tokens: the context-policy cases below are then exact arithmetic.
std::size_t count_bytes(const std::string& s)
{
    return s.size();
}

// A ChatML message of exactly n bytes: "<|im_start|>" role "\n" content "<|im_end|>\n" is 24
// bytes plus the role and the content.
ChatMessage chatml_message(const std::string& role, std::size_t n, char fill)
{
    return {role, std::string(n - 24 - role.size(), fill)};
}

} // namespace

class TestChatTemplate : public QObject {
    Q_OBJECT
private slots:
    void rendersLikeLlamaCpp_data();
    void rendersLikeLlamaCpp();
    void chatModelRendersLikeLlamaCppJinja_data();
    void chatModelRendersLikeLlamaCppJinja();
    void defaultSystemIsReadFromTheTemplate();
    void assistantPrefixOnlyWhenAsked();
    void gemmaSystemPromptWaitsForAUserTurn();
    void plainFallback();
    void stopStrings();
    void namesRoundTrip();
    void detectsTemplates_data();
    void detectsTemplates();
    void defaultModelIsGemmaAndTokenizesLikeLlamaCpp();
    void contextFitsWithoutDropping();
    void contextDropsOldestTurns();
    void contextCannotFit();
    void contextWithRealTokenizer();
};

// ---------------------------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------------------------

// Expected strings written from llm_chat_apply_template's code; they equal the expected_output of
// the matching cases in llama.cpp's tests/test-chat-template.cpp.
void TestChatTemplate::rendersLikeLlamaCpp_data()
{
    QTest::addColumn<QString>("name");
    QTest::addColumn<QByteArray>("expected");
    QTest::newRow("chatml") << "chatml"
                            << QByteArray("<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
                                          "<|im_start|>user\nHello<|im_end|>\n"
                                          "<|im_start|>assistant\nHi there<|im_end|>\n"
                                          "<|im_start|>user\nWho are you<|im_end|>\n"
                                          "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n"
                                          "<|im_start|>user\nAnother question<|im_end|>\n"
                                          "<|im_start|>assistant\n");
    QTest::newRow("phi4") << "phi4"
                          << QByteArray("<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|>"
                                        "<|im_start|>user<|im_sep|>Hello<|im_end|>"
                                        "<|im_start|>assistant<|im_sep|>Hi there<|im_end|>"
                                        "<|im_start|>user<|im_sep|>Who are you<|im_end|>"
                                        "<|im_start|>assistant<|im_sep|>   I am an assistant   <|im_end|>"
                                        "<|im_start|>user<|im_sep|>Another question<|im_end|>"
                                        "<|im_start|>assistant<|im_sep|>");
    // Llama 2 without <<SYS>> (Mistral 7B Instruct v0.1/v0.2 templates land here).
    QTest::newRow("llama2") << "llama2"
                            << QByteArray("[INST] You are a helpful assistant\nHello [/INST]Hi there</s>"
                                          "[INST] Who are you [/INST]   I am an assistant   </s>"
                                          "[INST] Another question [/INST]");
    QTest::newRow("llama2-sys")
        << "llama2-sys"
        << QByteArray("[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>"
                      "[INST] Who are you [/INST]   I am an assistant   </s>"
                      "[INST] Another question [/INST]");
    QTest::newRow("llama2-sys-bos")
        << "llama2-sys-bos"
        << QByteArray("[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>"
                      "<s>[INST] Who are you [/INST]   I am an assistant   </s>"
                      "<s>[INST] Another question [/INST]");
    QTest::newRow("llama2-sys-strip")
        << "llama2-sys-strip"
        << QByteArray("[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>"
                      "[INST] Who are you [/INST]I am an assistant</s>"
                      "[INST] Another question [/INST]");
    QTest::newRow("mistral-v1") << "mistral-v1"
                                << QByteArray(" [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s>"
                                              " [INST] Who are you [/INST]    I am an assistant   </s>"
                                              " [INST] Another question [/INST]");
    QTest::newRow("mistral-v3") << "mistral-v3"
                                << QByteArray("[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>"
                                              "[INST] Who are you[/INST] I am an assistant</s>"
                                              "[INST] Another question[/INST]");
    QTest::newRow("mistral-v3-tekken") << "mistral-v3-tekken"
                                       << QByteArray("[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>"
                                                     "[INST]Who are you[/INST]   I am an assistant   </s>"
                                                     "[INST]Another question[/INST]");
    QTest::newRow("mistral-v7") << "mistral-v7"
                                << QByteArray("[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT]"
                                              "[INST] Hello[/INST] Hi there</s>"
                                              "[INST] Who are you[/INST]    I am an assistant   </s>"
                                              "[INST] Another question[/INST]");
    QTest::newRow("mistral-v7-tekken") << "mistral-v7-tekken"
                                       << QByteArray("[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT]"
                                                     "[INST]Hello[/INST]Hi there</s>"
                                                     "[INST]Who are you[/INST]   I am an assistant   </s>"
                                                     "[INST]Another question[/INST]");
    QTest::newRow("phi3") << "phi3"
                          << QByteArray("<|system|>\nYou are a helpful assistant<|end|>\n"
                                        "<|user|>\nHello<|end|>\n"
                                        "<|assistant|>\nHi there<|end|>\n"
                                        "<|user|>\nWho are you<|end|>\n"
                                        "<|assistant|>\n   I am an assistant   <|end|>\n"
                                        "<|user|>\nAnother question<|end|>\n"
                                        "<|assistant|>\n");
    QTest::newRow("gemma") << "gemma"
                           << QByteArray("<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n"
                                         "<start_of_turn>model\nHi there<end_of_turn>\n"
                                         "<start_of_turn>user\nWho are you<end_of_turn>\n"
                                         "<start_of_turn>model\nI am an assistant<end_of_turn>\n"
                                         "<start_of_turn>user\nAnother question<end_of_turn>\n"
                                         "<start_of_turn>model\n");
    QTest::newRow("llama3") << "llama3"
                            << QByteArray(
                                   "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>"
                                   "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                                   "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
                                   "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
                                   "<|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|>"
                                   "<|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|>"
                                   "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

void TestChatTemplate::rendersLikeLlamaCpp()
{
    QFETCH(QString, name);
    QFETCH(QByteArray, expected);
    const auto format = engine::chat_format_from_name(name.toStdString());
    QVERIFY(format);
    QCOMPARE(QByteArray::fromStdString(engine::render_chat(*format, conversation(), true)), expected);
}

void TestChatTemplate::assistantPrefixOnlyWhenAsked()
{
    const auto without = [](ChatFormat f) { return engine::render_chat(f, conversation(), false); };
    const auto with = [](ChatFormat f) { return engine::render_chat(f, conversation(), true); };
    QCOMPARE(with(ChatFormat::Gemma), without(ChatFormat::Gemma) + "<start_of_turn>model\n");
    QCOMPARE(with(ChatFormat::ChatML), without(ChatFormat::ChatML) + "<|im_start|>assistant\n");
    QCOMPARE(with(ChatFormat::Phi4), without(ChatFormat::Phi4) + "<|im_start|>assistant<|im_sep|>");
    QCOMPARE(with(ChatFormat::Phi3), without(ChatFormat::Phi3) + "<|assistant|>\n");
    QCOMPARE(with(ChatFormat::Llama3),
             without(ChatFormat::Llama3) + "<|start_header_id|>assistant<|end_header_id|>\n\n");
    QCOMPARE(with(ChatFormat::Plain), without(ChatFormat::Plain) + "Assistant:");
    // The [INST] families end with [/INST] either way (llama.cpp ignores add_ass for them).
    for (auto f : {ChatFormat::Llama2, ChatFormat::Llama2Sys, ChatFormat::Llama2SysBos, ChatFormat::Llama2SysStrip,
                   ChatFormat::MistralV1, ChatFormat::MistralV3, ChatFormat::MistralV3Tekken, ChatFormat::MistralV7,
                   ChatFormat::MistralV7Tekken})
        QCOMPARE(with(f), without(f));
    QCOMPARE(engine::render_chat(ChatFormat::Gemma, {}, true), std::string("<start_of_turn>model\n"));
}

// llama.cpp keeps Gemma's system text until the first user turn, trims it, and concatenates
// several system messages without a separator.
void TestChatTemplate::gemmaSystemPromptWaitsForAUserTurn()
{
    const std::vector<ChatMessage> chat{
        {"system", "  Be brief. "}, {"system", "Be kind.\n"}, {"assistant", "Welcome!"}, {"user", " Hi "}};
    QCOMPARE(engine::render_chat(ChatFormat::Gemma, chat, true),
             std::string("<start_of_turn>model\nWelcome!<end_of_turn>\n"
                         "<start_of_turn>user\nBe brief.Be kind.\n\nHi<end_of_turn>\n"
                         "<start_of_turn>model\n"));
}

void TestChatTemplate::plainFallback()
{
    QCOMPARE(engine::render_chat(ChatFormat::Plain, conversation(), true),
             std::string("System: You are a helpful assistant\n"
                         "User: Hello\n"
                         "Assistant: Hi there\n"
                         "User: Who are you\n"
                         "Assistant: I am an assistant\n"
                         "User: Another question\n"
                         "Assistant:"));
    // The reply the model writes after "Assistant:" ends where it starts the next user line.
    const std::string reply = " Fine.\nUser: and you?";
    const auto stops = engine::stop_strings(ChatFormat::Plain);
    QCOMPARE(stops, std::vector<std::string>{"\nUser:"});
    QCOMPARE(reply.find(stops[0]), std::size_t(6));
}

void TestChatTemplate::stopStrings()
{
    using V = std::vector<std::string>;
    QCOMPARE(engine::stop_strings(ChatFormat::Gemma), V{"<end_of_turn>"});
    QCOMPARE(engine::stop_strings(ChatFormat::ChatML), V{"<|im_end|>"});
    QCOMPARE(engine::stop_strings(ChatFormat::Phi4), V{"<|im_end|>"});
    QCOMPARE(engine::stop_strings(ChatFormat::Llama3), V{"<|eot_id|>"});
    QCOMPARE(engine::stop_strings(ChatFormat::Phi3), V{"<|end|>"});
    for (auto f : {ChatFormat::Llama2, ChatFormat::Llama2Sys, ChatFormat::MistralV3, ChatFormat::MistralV7Tekken})
        QCOMPARE(engine::stop_strings(f), V{"</s>"});
    // Each format's stop string is what closes an assistant turn in its own rendering.
    for (auto f : {ChatFormat::Gemma, ChatFormat::ChatML, ChatFormat::Phi4, ChatFormat::Llama3, ChatFormat::Phi3,
                   ChatFormat::Llama2, ChatFormat::MistralV1, ChatFormat::MistralV7, ChatFormat::Plain}) {
        const std::string with_reply =
            engine::render_chat(f, {{"user", "Q"}, {"assistant", "@@"}, {"user", "R"}}, false);
        const auto at = with_reply.find("@@");
        QVERIFY2(with_reply.compare(at + 2, engine::stop_strings(f)[0].size(), engine::stop_strings(f)[0]) == 0,
                 engine::chat_format_name(f).data());
    }
}

void TestChatTemplate::namesRoundTrip()
{
    for (int i = 0; i <= static_cast<int>(ChatFormat::Llama3); ++i) {
        const auto f = static_cast<ChatFormat>(i);
        QCOMPARE(engine::chat_format_from_name(engine::chat_format_name(f)), std::optional<ChatFormat>(f));
    }
    QCOMPARE(engine::chat_format_from_name("zephyr"), std::optional<ChatFormat>());
}

// ---------------------------------------------------------------------------------------------
// Detection
// ---------------------------------------------------------------------------------------------

// Short templates in the style of the models' tokenizer_config.json (Jinja string literals keep
// their backslash escapes, as in the GGUF). Each expectation is what llm_chat_detect_template
// returns for the same string; "gemma"/"plain" rows for families we do not render show the
// architecture fallback.
void TestChatTemplate::detectsTemplates_data()
{
    QTest::addColumn<QByteArray>("jinja");
    QTest::addColumn<QString>("arch");
    QTest::addColumn<QString>("expected");

    QTest::newRow("gemma-3-it")
        << QByteArray(
               R"J({{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = "" -%}{%- set loop_messages = messages -%}{%- endif -%}{%- for message in loop_messages -%}{%- if (message['role'] == 'assistant') -%}{%- set role = "model" -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}{%- endfor -%}{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}{%- endif -%})J")
        << "gemma3"
        << "gemma";
    QTest::newRow("qwen2-chatml")
        << QByteArray(
               R"J({% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})J")
        << "qwen2"
        << "chatml";
    QTest::newRow("phi-4")
        << QByteArray(
               R"J({% for message in messages %}{% if (message['role'] == 'system') %}{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}{% elif (message['role'] == 'user') %}{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|>'}}{% elif (message['role'] == 'assistant') %}{{'<|im_start|>assistant<|im_sep|>' + message['content'] + '<|im_end|>'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %})J")
        << "phi3"
        << "phi4";
    QTest::newRow("smolvlm-not-chatml")
        << QByteArray(
               R"J(<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}: {{ message['content'] }}<end_of_utterance>
{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %})J")
        << "llama"
        << "plain";
    QTest::newRow("llama-3-instruct")
        << QByteArray(
               R"J({% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %})J")
        << "llama"
        << "llama3";
    // Meta's Llama 2 chat template strips messages: llama.cpp files it under llama2-sys-strip.
    QTest::newRow("llama-2-chat")
        << QByteArray(
               R"J({% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %})J")
        << "llama"
        << "llama2-sys-strip";
    QTest::newRow("llama2-sys-bos")
        << QByteArray(
               R"J({% for message in messages %}{% if message['role'] == 'system' %}{{ '[INST] <<SYS>>\n' + message['content'] + '\n<</SYS>>\n\n' }}{% elif message['role'] == 'user' %}{% if not loop.first %}{{ bos_token + '[INST] ' }}{% endif %}{{ message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %})J")
        << "llama"
        << "llama2-sys-bos";
    QTest::newRow("llama2-sys")
        << QByteArray(
               R"J({% for message in messages %}{% if message['role'] == 'system' %}{{ '<<SYS>>\n' + message['content'] + '\n<</SYS>>\n\n' }}{% elif message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %})J")
        << "llama"
        << "llama2-sys";
    QTest::newRow("mistral-7b-v0.2")
        << QByteArray(
               R"J({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})J")
        << "llama"
        << "llama2";
    QTest::newRow("mistral-v1")
        << QByteArray(
               R"J({{- bos_token }}{%- for message in loop_messages %}{%- if message['role'] == 'user' %}{%- if loop.first and system_message is defined %}{{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}{%- else %}{{- ' [INST] ' + message['content'] + ' [/INST]' }}{%- endif %}{%- elif message['role'] == 'assistant' %}{{- ' ' + message['content'] + eos_token}}{%- endif %}{%- endfor %})J")
        << "llama"
        << "mistral-v1";
    QTest::newRow("mistral-v3")
        << QByteArray(
               R"J({%- for message in loop_messages %}{%- if message["role"] == "user" %}{%- if tools is not none and (message == user_messages[-1]) %}{{- "[AVAILABLE_TOOLS] [" }}{{- "[/AVAILABLE_TOOLS]" }}{%- endif %}{{- "[INST] " + message["content"] + "[/INST]" }}{%- elif message["role"] == "assistant" %}{{- " " + message["content"]|trim + eos_token}}{%- endif %}{%- endfor %})J")
        << "llama"
        << "mistral-v3";
    QTest::newRow("mistral-v3-tekken")
        << QByteArray(
               R"J({%- for message in loop_messages %}{%- if message["role"] == "user" %}{%- if tools is not none and (message == user_messages[-1]) %}{{- "[AVAILABLE_TOOLS][" }}{{- "[/AVAILABLE_TOOLS]" }}{%- endif %}{{- "[INST]" + message["content"] + "[/INST]" }}{%- elif message["role"] == "assistant" %}{{- message["content"] + eos_token}}{%- endif %}{%- endfor %})J")
        << "llama"
        << "mistral-v3-tekken";
    QTest::newRow("mistral-v7")
        << QByteArray(
               R"J({{- bos_token }}{%- if messages[0]['role'] == 'system' %}{{- '[SYSTEM_PROMPT]' + messages[0]['content'] + '[/SYSTEM_PROMPT]' }}{%- endif %}{%- for message in loop_messages %}{%- if message['role'] == 'user' %}{{- '[INST]' + message['content'] + '[/INST]' }}{%- elif message['role'] == 'assistant' %}{{- message['content'] + eos_token }}{%- endif %}{%- endfor %})J")
        << "llama"
        << "mistral-v7";
    QTest::newRow("phi-3-mini")
        << QByteArray(
               R"J({% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %})J")
        << "phi3"
        << "phi3";
    // Built-in names are accepted as llama.cpp accepts them (the only way to get v7-tekken).
    QTest::newRow("name-mistral-v7-tekken") << QByteArray("mistral-v7-tekken") << "llama"
                                            << "mistral-v7-tekken";
    QTest::newRow("name-gemma") << QByteArray("gemma") << "llama"
                                << "gemma";
    QTest::newRow("mistral-prefix") << QByteArray("mistral-nemo custom") << "llama"
                                    << "llama2";

    // Order: the first family in llama.cpp's order wins.
    QTest::newRow("order-chatml-before-gemma")
        << QByteArray(R"J({{ '<|im_start|>' + role }}{{ '<start_of_turn>' }})J") << "gemma3"
        << "chatml";
    QTest::newRow("order-inst-before-phi3")
        << QByteArray(R"J({{ '[INST] ' }}{{ '<|assistant|>' + '<|end|>' }})J") << "llama"
        << "llama2";
    QTest::newRow("order-phi3-before-gemma")
        << QByteArray(R"J({{ '<|assistant|>\n' }}{{ '<|end|>' }}{{ '<start_of_turn>' }})J") << "llama"
        << "phi3";
    QTest::newRow("order-gemma-before-llama3")
        << QByteArray(R"J({{ '<start_of_turn>' }}{{ '<|start_header_id|>' + role + '<|end_header_id|>' }})J") << "llama"
        << "gemma";
    // Vicuna comes before Llama 3 in llama.cpp's order; we do not render Vicuna, so the fallback applies.
    QTest::newRow("order-vicuna-before-llama3")
        << QByteArray(R"J({{ 'USER: ' }}{{ 'ASSISTANT: ' }}{{ '<|start_header_id|>' + '<|end_header_id|>' }})J")
        << "llama"
        << "plain";

    // Families we do not render, and no template at all: by architecture.
    QTest::newRow("zephyr-llama")
        << QByteArray(
               R"J({% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\n' + message['content'] + eos_token }}{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\n'  + message['content'] + eos_token }}{% endif %}{% endfor %}<|endoftext|>)J")
        << "llama"
        << "plain";
    QTest::newRow("command-r-gemma2") << QByteArray(R"J({{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content }})J")
                                      << "gemma2"
                                      << "gemma";
    QTest::newRow("none-gemma3") << QByteArray() << "gemma3"
                                 << "gemma";
    QTest::newRow("none-gemma") << QByteArray() << "gemma"
                                << "gemma";
    QTest::newRow("none-llama") << QByteArray() << "llama"
                                << "plain";
    QTest::newRow("none-qwen2") << QByteArray() << "qwen2"
                                << "plain";
}

void TestChatTemplate::detectsTemplates()
{
    QFETCH(QByteArray, jinja);
    QFETCH(QString, arch);
    QFETCH(QString, expected);
    const std::optional<std::string> tmpl = jinja.isEmpty() ? std::nullopt : std::optional<std::string>(str(jinja));
    const ChatFormat f = engine::detect_chat_format(tmpl, arch.toStdString());
    QCOMPARE(QString::fromUtf8(engine::chat_format_name(f).data()), expected);
    // An empty template string is no template.
    if (!tmpl)
        QCOMPARE(engine::detect_chat_format(std::string(), arch.toStdString()), f);
}

// ---------------------------------------------------------------------------------------------
// The chat model (Qwen2.5-Coder 0.5B Instruct): its tokenizer.chat_template rendered by llama.cpp's
// Jinja engine (llama-server --jinja, POST /apply-template; tests/reference/make_template_fixtures.py)
// for conversations with and without a system message, one and several turns.
// ---------------------------------------------------------------------------------------------

namespace {
QJsonObject template_fixture()
{
    QFile f(QString::fromStdString(testsupport::data_dir()) + "/chat/qwen2.5-coder-0.5b-templates.json");
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}
} // namespace

void TestChatTemplate::chatModelRendersLikeLlamaCppJinja_data()
{
    QTest::addColumn<int>("index");
    const QJsonArray cases = template_fixture()["cases"].toArray();
    QVERIFY(cases.size() >= 3);
    for (int i = 0; i < cases.size(); ++i)
        QTest::newRow(qPrintable(cases[i].toObject()["name"].toString())) << i;
}

void TestChatTemplate::chatModelRendersLikeLlamaCppJinja()
{
    QFETCH(int, index);
    REQUIRE_CHAT_MODEL(path);
    const QJsonObject fixture = template_fixture();
    QCOMPARE(fixture["model"].toString(), QString(engine::kChatModelFileName));
    const auto file = engine::gguf::GgufFile::open(path);
    const engine::Tokenizer tok(engine::Vocab::from_gguf(*file));
    QVERIFY(tok.vocab().chat_template);
    const engine::ChatStyle style =
        engine::detect_chat_style(tok.vocab().chat_template, *file->get_string("general.architecture"));
    QCOMPARE(style.format, ChatFormat::ChatML);
    QCOMPARE(style.default_system, std::string("You are Qwen, created by Alibaba Cloud. You are a helpful assistant."));

    const QJsonObject c = fixture["cases"].toArray()[index].toObject();
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"].toArray())
        messages.push_back(
            {m.toObject()["role"].toString().toStdString(), m.toObject()["content"].toString().toStdString()});
    const std::string ours = engine::render_chat(style, messages, c["add_generation_prompt"].toBool());
    QCOMPARE(QString::fromStdString(ours), c["prompt"].toString());
    // Without the template's default system message (llama.cpp's built-in ChatML) the two differ
    // exactly when the conversation brings no system message of its own.
    const bool has_system = messages.front().role == "system";
    QCOMPARE(engine::render_chat(ChatFormat::ChatML, messages, true) == ours, has_system);

    // The model's own template, run by our interpreter as the chat does, gives the same text.
    engine::TemplateTokens tokens;
    tokens.eos = tok.vocab().tokens[std::size_t(*tok.vocab().eos)];
    const engine::ChatStyle own = engine::model_chat_style(tok.vocab().chat_template, "qwen2", tokens);
    QVERIFY(own.model_template);
    QVERIFY(own.notice.empty());
    QCOMPARE(QString::fromStdString(engine::render_chat(own, messages, c["add_generation_prompt"].toBool())),
             c["prompt"].toString());
}

void TestChatTemplate::defaultSystemIsReadFromTheTemplate()
{
    const std::string qwen_like = "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + "
                                  "messages[0]['content'] + '<|im_end|>\\n' }}"
                                  "{%- else %}{{- '<|im_start|>system\\nYou are a\\tbot.<|im_end|>\\n' }}{%- endif %}";
    QCOMPARE(engine::template_default_system(qwen_like), std::string("You are a\tbot."));
    QCOMPARE(engine::detect_chat_style(qwen_like, "qwen2").default_system, std::string("You are a\tbot."));
    // A template with no literal default, or none at all: no system message is invented.
    QCOMPARE(engine::template_default_system("{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}"),
             std::string());
    QCOMPARE(engine::detect_chat_style(std::nullopt, "qwen2").default_system, std::string());
    QCOMPARE(engine::detect_chat_style(std::nullopt, "gemma3").format, ChatFormat::Gemma);
    // The style puts its default first only when the conversation has no system message.
    const engine::ChatStyle style(ChatFormat::ChatML, "S");
    QCOMPARE(engine::render_chat(style, {{"user", "U"}}, true),
             std::string("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"));
    QCOMPARE(engine::render_chat(style, {{"system", "X"}, {"user", "U"}}, false),
             std::string("<|im_start|>system\nX<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"));
}

// ---------------------------------------------------------------------------------------------
// The default model
// ---------------------------------------------------------------------------------------------

// Gemma 3 270M is a base model: no tokenizer.chat_template, so the architecture decides. Its
// prompt must tokenize with <start_of_turn>/<end_of_turn> as control tokens, exactly as
// llama.cpp's llama-tokenize does (ids below from the reference build).
void TestChatTemplate::defaultModelIsGemmaAndTokenizesLikeLlamaCpp()
{
    REQUIRE_DEFAULT_MODEL(path);
    const auto file = engine::gguf::GgufFile::open(path);
    const engine::Tokenizer tok(engine::Vocab::from_gguf(*file));
    const auto arch = file->get_string("general.architecture");
    QVERIFY(arch);
    QCOMPARE(std::string(*arch), std::string("gemma3"));
    QVERIFY(!tok.vocab().chat_template);
    const ChatFormat format = engine::detect_chat_format(tok.vocab().chat_template, *arch);
    QCOMPARE(format, ChatFormat::Gemma);

    const std::string prompt = engine::render_chat(format, conversation(), true);
    const auto ids = tok.encode_ids(prompt);
    const std::vector<engine::TokenId> expected{
        2,     105, 2364,  107, 3048, 659,  496,  11045, 16326, 108,  9259, 106, 107, 105,  4368, 107,
        10979, 993, 106,   107, 105,  2364, 107,  15938, 659,   611,  106,  107, 105, 4368, 107,  236777,
        1006,  614, 16326, 106, 107,  105,  2364, 107,   12656, 2934, 106,  107, 105, 4368, 107};
    QCOMPARE(ids, expected);

    const auto start = tok.vocab().find("<start_of_turn>");
    const auto end = tok.vocab().find("<end_of_turn>");
    QVERIFY(start && end);
    QCOMPARE(*start, 105);
    QCOMPARE(*end, 106);
    QCOMPARE(tok.vocab().type_of(*start), engine::TokenType::Control);
    QCOMPARE(ids[0], *tok.vocab().bos);
    QCOMPARE(ids[1], *start);
    QCOMPARE(std::count(ids.begin(), ids.end(), *start), std::ptrdiff_t(6));
    QCOMPARE(std::count(ids.begin(), ids.end(), *end), std::ptrdiff_t(5));
    // The stop string is the text of an end-of-generation token.
    QCOMPARE(tok.token_to_piece(*end), engine::stop_strings(format)[0]);
    const auto& eog = tok.vocab().end_of_generation;
    QVERIFY(std::find(eog.begin(), eog.end(), *end) != eog.end());
}

// ---------------------------------------------------------------------------------------------
// Context policy
// ---------------------------------------------------------------------------------------------

namespace {

// ChatML, 1,000 bytes a message, 22 bytes of assistant prefix: a prompt of n messages is
// 1,000 n + 22 "tokens" with count_bytes.
std::vector<ChatMessage> long_chat(bool with_system)
{
    std::vector<ChatMessage> c;
    if (with_system)
        c.push_back(chatml_message("system", 1000, 's'));
    for (char turn : {'1', '2', '3'}) {
        c.push_back(chatml_message("user", 1000, turn));
        c.push_back(chatml_message("assistant", 1000, turn));
    }
    c.push_back(chatml_message("user", 1000, '4'));
    return c;
}

std::string fills(const std::vector<ChatMessage>& messages)
{
    std::string s;
    for (const auto& m : messages)
        s += m.content.front();
    return s;
}

} // namespace

void TestChatTemplate::contextFitsWithoutDropping()
{
    const auto chat = long_chat(true);
    QCOMPARE(engine::render_chat(ChatFormat::ChatML, chat, true).size(), std::size_t(8022));
    const auto r = engine::fit_to_context(chat, count_bytes, ChatFormat::ChatML, 8192, 170);
    QVERIFY(r.fits);
    QCOMPARE(r.dropped_turns, std::size_t(0));
    QCOMPARE(r.prompt_tokens, std::size_t(8022));
    QCOMPARE(r.kept.size(), chat.size());
    QCOMPARE(r.notice, std::string());
}

void TestChatTemplate::contextDropsOldestTurns()
{
    const auto chat = long_chat(true);
    // 8,022 + 1,000 > 8,192; without the oldest turn 6,022 + 1,000 fits.
    auto r = engine::fit_to_context(chat, count_bytes, ChatFormat::ChatML, 8192, 1000);
    QVERIFY(r.fits);
    QCOMPARE(r.dropped_turns, std::size_t(1));
    QCOMPARE(r.prompt_tokens, std::size_t(6022));
    QCOMPARE(fills(r.kept), std::string("s22334"));
    QCOMPARE(r.notice, std::string("Dropped the oldest turn (2,000 tokens) to fit the 8,192-token context; "
                                   "the system prompt is kept."));

    // 6,144 - 1,000 leaves 5,144: two turns go, the system prompt and the latest question stay.
    r = engine::fit_to_context(chat, count_bytes, ChatFormat::ChatML, 6144, 1000);
    QVERIFY(r.fits);
    QCOMPARE(r.dropped_turns, std::size_t(2));
    QCOMPARE(r.prompt_tokens, std::size_t(4022));
    QCOMPARE(fills(r.kept), std::string("s334"));
    QCOMPARE(r.kept.front().role, std::string("system"));
    QCOMPARE(r.kept.back().role, std::string("user"));
    QCOMPARE(r.notice, std::string("Dropped the 2 oldest turns (4,000 tokens) to fit the 6,144-token context; "
                                   "the system prompt is kept."));

    // Every turn but the latest question, and no system prompt to mention.
    r = engine::fit_to_context(long_chat(false), count_bytes, ChatFormat::ChatML, 1100, 0);
    QVERIFY(r.fits);
    QCOMPARE(r.dropped_turns, std::size_t(3));
    QCOMPARE(r.prompt_tokens, std::size_t(1022));
    QCOMPARE(fills(r.kept), std::string("4"));
    QCOMPARE(r.notice, std::string("Dropped the 3 oldest turns (6,000 tokens) to fit the 1,100-token context."));

    // A system message between turns is kept in place.
    auto mid = long_chat(false);
    mid.insert(mid.begin() + 2, chatml_message("system", 1000, 'm'));
    r = engine::fit_to_context(mid, count_bytes, ChatFormat::ChatML, 4100, 0);
    QVERIFY(r.fits);
    QCOMPARE(r.dropped_turns, std::size_t(2));
    QCOMPARE(fills(r.kept), std::string("m334"));
}

void TestChatTemplate::contextCannotFit()
{
    // The minimum — system prompt and latest question — is 2,022; with 512 for the reply it
    // exceeds 2,048.
    auto r = engine::fit_to_context(long_chat(true), count_bytes, ChatFormat::ChatML, 2048, 512);
    QVERIFY(!r.fits);
    QCOMPARE(r.dropped_turns, std::size_t(3));
    QCOMPARE(r.prompt_tokens, std::size_t(2022));
    QCOMPARE(fills(r.kept), std::string("s4"));
    QCOMPARE(r.notice, std::string("The system prompt and the latest message alone need 2,022 tokens, plus 512 "
                                   "reserved for the reply, but the context holds 2,048 tokens."));

    r = engine::fit_to_context({chatml_message("user", 1000, 'q')}, count_bytes, ChatFormat::ChatML, 512, 0);
    QVERIFY(!r.fits);
    QCOMPARE(r.dropped_turns, std::size_t(0));
    QCOMPARE(r.prompt_tokens, std::size_t(1022));
    QCOMPARE(r.notice, std::string("The latest message alone needs 1,022 tokens, but the context holds 512 tokens."));

    // A reply reserve larger than the context never fits.
    r = engine::fit_to_context({{"user", "hi"}}, count_bytes, ChatFormat::ChatML, 100, 4096);
    QVERIFY(!r.fits);
    QCOMPARE(engine::format_count(1234567), std::string("1,234,567"));
    QCOMPARE(engine::format_count(999), std::string("999"));
}

// The policy with the real tokenizer: the kept prompt fits, and keeping one more turn would not.
void TestChatTemplate::contextWithRealTokenizer()
{
    REQUIRE_DEFAULT_MODEL(path);
    const engine::Tokenizer tok(engine::Vocab::from_gguf(*engine::gguf::GgufFile::open(path)));
    const engine::TokenCounter count = [&](const std::string& s) { return tok.encode_ids(s).size(); };

    std::vector<ChatMessage> chat{{"system", "You are a patient tutor who answers in one sentence."}};
    for (int i = 1; i <= 12; ++i) {
        chat.push_back({"user", "Question " + std::to_string(i) + ": why is the sky blue at noon but red at dusk?"});
        chat.push_back({"assistant", "Answer " + std::to_string(i) +
                                         ": sunlight scatters off air molecules, and blue scatters most."});
    }
    chat.push_back({"user", "Summarise everything so far."});

    const std::size_t ctx = 256, reserve = 64;
    const auto r = engine::fit_to_context(chat, count, ChatFormat::Gemma, ctx, reserve);
    QVERIFY(r.fits);
    QVERIFY(r.dropped_turns > 0 && r.dropped_turns < 12);
    QCOMPARE(r.kept.size(), chat.size() - 2 * r.dropped_turns);
    QCOMPARE(r.kept.front().role, std::string("system"));
    QCOMPARE(r.kept.back().content, chat.back().content);
    const auto ids = tok.encode_ids(engine::render_chat(ChatFormat::Gemma, r.kept, true));
    QCOMPARE(r.prompt_tokens, ids.size());
    QVERIFY(ids.size() + reserve <= ctx);
    QCOMPARE(ids[1], *tok.vocab().find("<start_of_turn>"));

    std::vector<ChatMessage> one_more{chat.front()};
    one_more.insert(one_more.end(), chat.begin() + 1 + 2 * static_cast<std::ptrdiff_t>(r.dropped_turns - 1),
                    chat.end());
    QVERIFY(count(engine::render_chat(ChatFormat::Gemma, one_more, true)) + reserve > ctx);

    const std::size_t freed = count(engine::render_chat(ChatFormat::Gemma, chat, true)) - r.prompt_tokens;
    QCOMPARE(r.notice, "Dropped the " + std::to_string(r.dropped_turns) + " oldest turns (" +
                           engine::format_count(freed) +
                           " tokens) to fit the 256-token context; "
                           "the system prompt is kept.");
}

QTEST_GUILESS_MAIN(TestChatTemplate)
#include "test_chat_template.moc"
