// SPDX-License-Identifier: GPL-3.0-or-later
// tokenize, generate and chat on a served model (--server URL): the remote client (ui/remote/) driven by a
// local event loop until the answer arrives.
#include "server_option.h"
#include "token_print.h"

#include "util/error.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

#ifdef TOKENSCOPE_HAVE_REMOTE
#include "remote/remote_client.h"

#include <QCoreApplication>
#include <QEventLoop>
#include <functional>
#include <memory>
#include <optional>
#endif

void add_server_options(CLI::App* cmd, ServerArgs& a)
{
    cmd->add_option("--server", a.url,
                    "Run on a model served elsewhere: the base URL of an OpenAI-compatible server "
                    "(llama-server, vLLM, SGLang, Ollama, LM Studio), e.g. http://127.0.0.1:8080");
    cmd->add_option("--api-key", a.api_key, "The server's API key (or set TOKENSCOPE_API_KEY)");
    cmd->add_option("--server-model", a.model, "The served model to use (default: the server's first)");
    cmd->add_option("--timeout", a.timeout_s, "Seconds without a byte from the server before giving up")
        ->capture_default_str();
}

#ifndef TOKENSCOPE_HAVE_REMOTE

int run_tokenize_on_server(const ServerArgs&, const std::string&, bool, bool, bool)
{
    throw engine::Error("this tokenscope-cli was built without the remote client (TOKENSCOPE_ENGINE_ONLY)");
}
int run_generate_on_server(const ServerArgs&, const std::string&, int32_t, const engine::SamplingSettings&)
{
    throw engine::Error("this tokenscope-cli was built without the remote client (TOKENSCOPE_ENGINE_ONLY)");
}
int run_chat_on_server(const ServerArgs&, const std::string&, const std::string&, int32_t,
                       const engine::SamplingSettings&, bool)
{
    throw engine::Error("this tokenscope-cli was built without the remote client (TOKENSCOPE_ENGINE_ONLY)");
}

#else

namespace {

namespace rm = tokenscope::remote;

// The event loop the client needs: the CLI has no Qt application of its own.
QCoreApplication& qt_app()
{
    static int argc = 1;
    static char name[] = "tokenscope-cli";
    static char* argv[] = {name, nullptr};
    static QCoreApplication* app = QCoreApplication::instance() ? nullptr : new QCoreApplication(argc, argv);
    return app ? *app : *QCoreApplication::instance();
}

// Sends a request (`start`) and runs the event loop until its answer (`answer`, whose arguments go
// to `keep`) or its failure arrives; a failure is thrown with the client's message.
template <typename Signal, typename Keep>
void await_answer(rm::Client& client, Signal answer, Keep keep, const std::function<void()>& start)
{
    QEventLoop loop;
    bool done = false;
    QString error;
    QObject::connect(&client, answer, &loop, [&](auto... args) {
        keep(args...);
        done = true;
        loop.quit();
    });
    QObject::connect(&client, &rm::Client::failed, &loop, [&](quint64, const QString& m) {
        error = m;
        done = true;
        loop.quit();
    });
    start();
    if (!done)
        loop.exec();
    if (!error.isEmpty())
        throw engine::Error(error.toStdString());
}

// Connects and probes; throws the probe's message.
std::unique_ptr<rm::Client> connect_client(const ServerArgs& a)
{
    qt_app();
    auto client = std::make_unique<rm::Client>();
    rm::Endpoint e;
    e.base = QUrl(QString::fromStdString(a.url));
    if (!e.base.isValid() || (e.base.scheme() != "http" && e.base.scheme() != "https"))
        throw engine::Error("--server " + a.url + ": not an http:// or https:// URL");
    if (!(a.timeout_s > 0.0) || a.timeout_s > 86400.0) // 0 would mean no time-out at all: a hang
        throw engine::Error(
            fmt::format("--timeout {}: give the seconds to wait, more than 0 and at most 86400", a.timeout_s));
    std::string key = a.api_key;
    if (key.empty())
        if (const char* env = std::getenv("TOKENSCOPE_API_KEY"))
            key = env;
    e.api_key = QString::fromStdString(key);
    e.model = QString::fromStdString(a.model);
    e.timeout_ms = static_cast<int>(a.timeout_s * 1000.0);
    client->setEndpoint(e);
    await_answer(
        *client, &rm::Client::probed, [](auto&&...) {}, [&] { client->probe(); });
    return client;
}

} // namespace

int run_tokenize_on_server(const ServerArgs& a, const std::string& text, bool add_special, bool json, bool ids_only)
{
    const auto client = connect_client(a);
    std::shared_ptr<const std::vector<engine::remote::RemoteToken>> tokens;
    await_answer(
        *client, &rm::Client::tokenized, [&](quint64, auto t) { tokens = std::move(t); },
        [&] { client->tokenize(QString::fromStdString(text), add_special); });
    if (ids_only) {
        fmt::print("{}\n", ids_list(*tokens, [](const auto& t) { return t.id; }));
        return 0;
    }
    const auto& server = *client->server();
    if (json) {
        nlohmann::ordered_json j;
        j["server"] = server.base.toString().toStdString();
        j["server_kind"] = server.kind_name.toStdString();
        j["model"] = server.model.toStdString();
        j["count"] = tokens->size();
        auto& arr = j["tokens"] = nlohmann::ordered_json::array();
        for (const auto& t : *tokens) {
            nlohmann::ordered_json row{{"id", t.id}};
            if (t.has_piece)
                row["piece"] = t.piece;
            arr.push_back(std::move(row));
        }
        fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
        return 0;
    }
    fmt::print("{} tokens from {} ({}, model {})\n", tokens->size(), server.base.toString().toStdString(),
               server.kind_name.toStdString(), server.model.toStdString());
    fmt::print("{:>5} {:>8}  {}\n", "#", "id", "piece");
    for (std::size_t i = 0; i < tokens->size(); ++i) {
        const auto& t = (*tokens)[i];
        fmt::print("{:>5} {:>8}  {}\n", i, t.id,
                   t.has_piece ? escape_controls(t.piece) : "(the server names ids only)");
    }
    return 0;
}

namespace {

// -n -1: no max_tokens is sent, the server's own limit applies.
engine::remote::SamplingRequest sampling_request(engine::SamplingSettings sampling, int32_t n_predict)
{
    sampling.max_tokens = n_predict < 0 ? 0 : n_predict;
    return engine::remote::sampling_request(sampling);
}

// Streams a reply (`start` sends the request): each delta printed unless `quiet`, then the reply.
std::shared_ptr<const rm::StreamedReply> stream_reply(rm::Client& client, bool quiet,
                                                      const std::function<void()>& start)
{
    std::shared_ptr<const rm::StreamedReply> reply;
    if (!quiet)
        QObject::connect(&client, &rm::Client::delta, &client, [](quint64, const QString& text) {
            fmt::print("{}", text.toStdString());
            std::fflush(stdout);
        });
    try {
        await_answer(
            client, &rm::Client::replyFinished, [&](auto r) { reply = std::move(r); }, start);
    } catch (const engine::Error&) {
        if (!quiet)
            fmt::print("\n"); // the failure starts on a line of its own
        throw;
    }
    if (!quiet)
        fmt::print("\n");
    return reply;
}

// The reply's figures on stderr; a reply cut off is an error (its text has been printed).
void report_reply(const rm::Client& client, const rm::StreamedReply& reply)
{
    const int n = reply.usage ? reply.usage->completion_tokens : static_cast<int>(reply.arrival_ms.size());
    const double gen_ms = reply.arrival_ms.size() > 1 ? reply.arrival_ms.back() - reply.arrival_ms.front() : 0.0;
    std::string line =
        fmt::format("[{} on {}: {} tokens, TTFT {:.1f} ms, {:.1f} tokens/s measured here", //
                    client.server()->model.toStdString(), client.server()->kind_name.toStdString(), n, reply.ttft_ms,
                    gen_ms > 0 ? static_cast<double>(reply.arrival_ms.size() - 1) * 1000.0 / gen_ms : 0.0);
    if (reply.timings && reply.timings->server_ms() >= 0)
        line += fmt::format("; the server: prompt {:.1f} ms, generation {:.1f} ms", reply.timings->prompt_ms,
                            reply.timings->predicted_ms);
    if (!reply.finish_reason.isEmpty())
        line += ", stop: " + reply.finish_reason.toStdString();
    std::fprintf(stderr, "%s]\n", line.c_str());
    if (reply.cut_off)
        throw engine::Error("the reply was cut off: " + reply.error.toStdString());
}

} // namespace

int run_generate_on_server(const ServerArgs& a, const std::string& prompt, int32_t n_predict,
                           const engine::SamplingSettings& sampling)
{
    const auto client = connect_client(a);
    const engine::remote::SamplingRequest s = sampling_request(sampling, n_predict);
    fmt::print("{}", prompt);
    std::fflush(stdout);
    if (n_predict == 0) { // -n 0: nothing is generated
        fmt::print("\n");
        return 0;
    }
    const auto reply = stream_reply(*client, false, [&] { client->complete(QString::fromStdString(prompt), s); });
    report_reply(*client, *reply);
    return 0;
}

int run_chat_on_server(const ServerArgs& a, const std::string& system, const std::string& message, int32_t n_predict,
                       const engine::SamplingSettings& sampling, bool json)
{
    const auto client = connect_client(a);
    std::vector<engine::remote::ChatMessage> messages;
    if (!system.empty())
        messages.push_back({"system", system});
    messages.push_back({"user", message});
    const auto reply =
        stream_reply(*client, json, [&] { client->chat(messages, sampling_request(sampling, n_predict)); });
    if (!json) {
        report_reply(*client, *reply);
        return 0;
    }
    const auto& server = *client->server();
    nlohmann::ordered_json j;
    j["server"] = server.base.toString().toStdString();
    j["server_kind"] = server.kind_name.toStdString();
    j["model"] = server.model.toStdString();
    j["reply"] = reply->text.toStdString();
    if (!reply->reasoning.isEmpty())
        j["reasoning"] = reply->reasoning.toStdString();
    j["finish_reason"] = reply->finish_reason.toStdString();
    j["completion_tokens"] =
        reply->usage ? reply->usage->completion_tokens : static_cast<int>(reply->arrival_ms.size());
    j["ttft_ms"] = reply->ttft_ms;
    j["cut_off"] = reply->cut_off;
    if (reply->cut_off)
        j["error"] = reply->error.toStdString();
    fmt::print("{}\n", j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
    if (reply->cut_off)
        throw engine::Error("the reply was cut off: " + reply->error.toStdString());
    return 0;
}

#endif
