// SPDX-License-Identifier: GPL-3.0-or-later
// The desktop app on a model served by a real llama-server (built by scripts/setup.sh test): the
// window connects, the chat streams and is stored, the tokenizer panel shows the server's tokens,
// what needs the model's internals says why it is not available, a wrong key and a server killed
// mid-reply are said clearly and lose nothing. The chat model is the one the suites are given
// ($TOKENSCOPE_CHAT_MODEL: the real one in the Release tree, a small random-weight model with the
// real tokenizer under the sanitizers), so nothing here depends on what the model answers.
#include "bridge/analysis_client.h"
#include "bridge/chat_client.h"
#include "bridge/inspection_client.h"
#include "bridge/lab_client.h"
#include "bridge/serving_client.h"
#include "bridge/stepper_client.h"
#include "llama_server_process.h"
#include "signal_wait.h"
#include "test_paths.h"
#include "text_review.h"

#include "bridge/engine_controller.h"
#include "main_window.h"
#include "model/model.h"
#include "panels/chat_panel.h"
#include "panels/kv_panel.h"
#include "panels/serving_panel.h"
#include "panels/timeline_panel.h"
#include "panels/tokenizer_panel.h"
#include "storage/conversation_store.h"
#include "tokenizer/tokenizer.h"
#include "widgets/connect_server_dialog.h"

#include <QFile>
#include <QLocale>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

using namespace tokenscope::ui;
using tokenscope::remote::Endpoint;

namespace {
const QString kKey = "tokenscope-app-key";
}

class TestRemoteApp : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void wrongKeyIsSaidAndNothingChanges();
    void chatTokenizerAndTimelineFromTheServer();
    void internalsAreUnavailableWithTheReason();
    void stepperFromTheServersDistribution();
    void killedServerKeepsThePartialReply();
    void connectDialogProbesBeforeAccepting();
    void servingLabDrivesTheServer();
    void servingLabOnAKilledServerEnds();

private:
    Endpoint endpoint(const QString& url, const QString& key) const;
    QString m_binary;
    std::string m_model;
    testsupport::LlamaServerProcess m_server;
    QTemporaryDir m_dir;
};

Endpoint TestRemoteApp::endpoint(const QString& url, const QString& key) const
{
    Endpoint e;
    e.base = QUrl(url);
    e.api_key = key;
    e.timeout_ms = 120000;
    return e;
}

void TestRemoteApp::initTestCase()
{
    m_binary = QString::fromStdString(testsupport::reference_tool("TOKENSCOPE_LLAMA_SERVER"));
    if (m_binary.isEmpty()) {
        if (testsupport::reference_required())
            QFAIL("TOKENSCOPE_LLAMA_SERVER is not set or not executable (CI builds it)");
        QSKIP("no llama-server: set TOKENSCOPE_LLAMA_SERVER (scripts/setup.sh test builds it)");
    }
    REQUIRE_CHAT_MODEL(chat);
    m_model = chat;
    QVERIFY2(m_server.start(m_binary, QString::fromStdString(chat), {"--api-key", kKey}), qPrintable(m_server.error()));
}

void TestRemoteApp::wrongKeyIsSaidAndNothingChanges()
{
    ConversationStore store(m_dir.filePath("key.sqlite"), "remote-key");
    EngineController engine;
    MainWindow window(&engine, &store);
    window.setDialogsEnabled(false);
    QSignalSpy failed(&engine, &EngineController::serverFailed), loaded(&engine, &EngineController::modelLoaded);
    window.connectServer(endpoint(m_server.url(), "wrong"));
    QVERIFY(testsupport::seen(failed));
    QVERIFY2(failed.first().at(0).toString().contains("HTTP 401"), qPrintable(failed.first().at(0).toString()));
    QVERIFY(!engine.server());
    QVERIFY(!engine.model());
    QCOMPARE(loaded.count(), 0);
    QVERIFY(!engine.busy());
}

void TestRemoteApp::chatTokenizerAndTimelineFromTheServer()
{
    const QString db = m_dir.filePath("chat.sqlite");
    ConversationStore store(db, "remote-chat");
    EngineController engine;
    MainWindow window(&engine, &store);
    window.setDialogsEnabled(false);
    window.show();
    QSignalSpy connected(&engine, &EngineController::serverConnected), loaded(&engine, &EngineController::modelLoaded);
    window.connectServer(endpoint(m_server.url(), kKey));
    QVERIFY(testsupport::seen(loaded));
    QCOMPARE(connected.count(), 1);
    QVERIFY(engine.model()->remote);
    QCOMPARE(engine.model()->server_kind, QString("llama.cpp (llama-server)"));
    // -c 4096, capped by llama-server at what the model was trained for (2,048 for the small models).
    const auto served = engine::Model::load(m_model);
    QCOMPARE(engine.model()->n_ctx, std::min(4096u, uint32_t(served->config().n_ctx_train)));
    QVERIFY(window.windowTitle().contains(m_server.url()));

    // The chat: streamed, shown, stored, with the server's statistics.
    ChatPanel* chat = window.chatPanel();
    auto s = chat->sampling();
    s.temperature = 0.0f;
    s.max_tokens = 12;
    chat->setSampling(s);
    QSignalSpy deltas(&engine.chat(), &ChatClient::replyDelta);
    QSignalSpy finished(chat, &ChatPanel::replyFinished);
    QSignalSpy timeline(&engine.inspection(), &InspectionClient::timelineChanged);
    chat->send("Say hello.");
    QVERIFY(testsupport::seen(finished));
    const auto stats = chat->lastStats();
    QVERIFY(!stats->cancelled);
    QCOMPARE(stats->server, QString("llama.cpp (llama-server)"));
    QVERIFY(stats->generated_tokens > 0 && stats->generated_tokens <= 12);
    QVERIFY(stats->prompt_tokens > 0);
    QVERIFY(stats->ttft_ms > 0);
    QCOMPARE(chat->messageCount(), 2);
    QString streamed;
    for (const auto& d : deltas)
        streamed += d.at(1).toString();
    QVERIFY(!streamed.trimmed().isEmpty());
    // (The reply is rendered as Markdown, so its raw text is compared in the store below.)
    QVERIFY(chat->transcriptText().contains("Say hello."));
    const auto saved = store.latest();
    QVERIFY(saved);
    QCOMPARE(saved->messages.size(), 2);
    QCOMPARE(saved->messages[1].content, streamed.trimmed());
    QVERIFY(saved->messages[1].stats.contains("served by llama.cpp"));
    // The second turn re-sends the history; the server reuses its cache for it.
    chat->send("Again.");
    QVERIFY(testsupport::seen(finished, 2));
    QVERIFY2(
        chat->lastStats()->reused_tokens >= stats->prompt_tokens,
        qPrintable(
            QString("%1 reused, first prompt %2").arg(chat->lastStats()->reused_tokens).arg(stats->prompt_tokens)));

    // The timeline of the last reply: measured here, the server's account beside it.
    QVERIFY(timeline.count() >= 2);
    const auto t = window.timelinePanel()->timeline();
    QVERIFY(t && t->remote);
    QVERIFY(!t->steps.empty());
    QCOMPARE(t->ttft_ms, chat->lastStats()->ttft_ms);
    QVERIFY(t->server_prompt_ms >= 0 && t->server_generation_ms >= 0);
    QVERIFY(window.timelinePanel()->statsText().contains("The server's account"));

    // The KV panel: the server's cache after that reply — what the request held against what a request
    // may hold, the reuse, and the queue from /metrics (the test server runs with --metrics; llama-server
    // no longer reports its cache's fill there, so none is shown).
    const auto last = chat->lastStats();
    QTRY_VERIFY_WITH_TIMEOUT(window.kvPanel()->serverCache() && window.kvPanel()->serverCache()->tokens_held ==
                                                                    last->prompt_tokens + last->generated_tokens,
                             30000);
    const auto cache = window.kvPanel()->serverCache();
    QVERIFY2(cache->metrics_note.contains("from the server's /metrics"), qPrintable(cache->metrics_note));
    QCOMPARE(cache->prompt_tokens, last->prompt_tokens);
    QCOMPARE(cache->reused_tokens, last->reused_tokens);
    QCOMPARE(cache->context_length, engine.model()->n_ctx);
    QVERIFY2(cache->running && cache->waiting, qPrintable(cache->metrics_note));
    QCOMPARE(*cache->waiting, 0.0);
    QVERIFY(!cache->kv_usage);
    const QString cache_text = window.kvPanel()->serverCacheText();
    QVERIFY2(
        cache_text.contains(QString("reused <b>%1</b> cached tokens").arg(QLocale().toString(last->reused_tokens))),
        qPrintable(cache_text));
    QVERIFY(cache_text.contains("whole cache: not reported"));
    QVERIFY(cache_text.contains("requests on the server"));

    // The tokenizer panel: the server's ids, equal to this machine's tokenizer of the same file.
    QSignalSpy updated(window.tokenizerPanel(), &TokenizerPanel::updated);
    const QString text = "Tokens, as the server counts them: déjà vu 12345";
    window.tokenizerPanel()->setText(text);
    QTRY_VERIFY_WITH_TIMEOUT(window.tokenizerPanel()->current() && window.tokenizerPanel()->current()->text == text,
                             60000);
    const auto got = window.tokenizerPanel()->current();
    QVERIFY(got->source.contains("llama.cpp"));
    const auto model = engine::Model::load(m_model);
    const auto ours = model->tokenizer().encode(text.toStdString());
    QCOMPARE(got->tokens.size(), ours.size());
    for (std::size_t i = 0; i < ours.size(); ++i) {
        QCOMPARE(got->tokens[i].id, ours[i].id);
        if (ours[i].byte_end > ours[i].byte_begin) { // the spans too, where the token covers text
            QCOMPARE(got->tokens[i].begin, int(ours[i].byte_begin));
            QCOMPARE(got->tokens[i].end, int(ours[i].byte_end));
        }
    }
}

void TestRemoteApp::internalsAreUnavailableWithTheReason()
{
    ConversationStore store(m_dir.filePath("internals.sqlite"), "remote-internals");
    EngineController engine;
    MainWindow window(&engine, &store);
    window.setDialogsEnabled(false);
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    window.connectServer(endpoint(m_server.url(), kKey));
    QVERIFY(testsupport::seen(loaded));
    QSignalSpy attention(&engine.inspection(), &InspectionClient::attentionReady),
        stepper(&engine.stepper(), &StepperClient::stepperState), lab(&engine.lab(), &LabClient::patchingReady),
        text(&engine.analysis(), &AnalysisClient::textAnalyzed), steering(&engine.lab(), &LabClient::steeringApplied);
    const quint64 a = engine.inspection().captureAttention("hello", false, {});
    // The stepper from the text panel starts on given ids, which the server does not take as a stepper.
    const quint64 st = engine.stepper().stepperStartTokens({1, 2, 3}, "x", StepperSettings{});
    engine.lab().runPatching(PatchingSettings{});
    engine.analysis().analyzeText("hello");
    engine.lab().setSteering(true, SteeringSettings{});
    QVERIFY(testsupport::seen(attention) && testsupport::seen(stepper) && testsupport::seen(lab) &&
            testsupport::seen(text) && testsupport::seen(steering));
    const auto as = attention.first().at(0).value<std::shared_ptr<const AttentionSnapshot>>();
    QCOMPARE(as->request_id, a);
    QVERIFY2(as->error.contains("not available on a server"), qPrintable(as->error));
    const auto ss = stepper.first().at(0).value<std::shared_ptr<const StepperState>>();
    QCOMPARE(ss->request_id, st);
    QCOMPARE(ss->action, QString("error"));
    QVERIFY(ss->error.contains("not available on a server"));
    QVERIFY(lab.first().at(0).value<std::shared_ptr<const PatchingSnapshot>>()->error.contains("a server"));
    QVERIFY(text.first().at(0).value<std::shared_ptr<const TextAnalysisSnapshot>>()->error.contains("a server"));
    QCOMPARE(steering.first().at(0).toBool(), false);
}

void TestRemoteApp::stepperFromTheServersDistribution()
{
    ConversationStore store(m_dir.filePath("stepper.sqlite"), "remote-stepper");
    EngineController engine;
    MainWindow window(&engine, &store);
    window.setDialogsEnabled(false);
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    window.connectServer(endpoint(m_server.url(), kKey));
    QVERIFY(testsupport::seen(loaded));
    QSignalSpy states(&engine.stepper(), &StepperClient::stepperState);
    const auto next_state = [&](int n) {
        return testsupport::seen(states, n) ? states.at(n - 1).at(0).value<std::shared_ptr<const StepperState>>()
                                            : nullptr;
    };
    StepperSettings settings;
    settings.greedy = true;
    const QString prompt = "The capital of France is";
    engine.stepper().stepperStart(prompt, settings);
    const auto prefill = next_state(1);
    QVERIFY(prefill);
    QVERIFY2(prefill->error.isEmpty(), qPrintable(prefill->error));
    QCOMPARE(prefill->action, QString("prefill"));
    // The prompt as the server tokenized it, which is this machine's tokenizer's answer too.
    const auto model = engine::Model::load(m_model);
    const auto ids = model->tokenizer().encode_ids(prompt.toStdString());
    QCOMPARE(prefill->prompt_length, int(ids.size()));
    for (std::size_t i = 0; i < ids.size(); ++i)
        QCOMPARE(prefill->tokens[i].id, ids[i]);
    // The server's top 20 before sampling: a distribution's head, most likely first.
    QCOMPARE(prefill->server_top.size(), std::size_t(20));
    float sum = 0.0f;
    for (std::size_t i = 0; i < prefill->server_top.size(); ++i) {
        sum += prefill->server_top[i].probability;
        if (i > 0)
            QVERIFY(prefill->server_top[i].probability <= prefill->server_top[i - 1].probability);
    }
    QVERIFY(sum > 0.0f && sum <= 1.0001f);
    QCOMPARE(prefill->server_drawn, prefill->server_top[0].id); // greedy: the server drew the most likely
    QVERIFY(!prefill->tokenizer && !prefill->logits);           // no vocabulary or logits are invented

    // Step takes what the server drew; a forced step takes the runner-up; Back undoes it.
    engine.stepper().stepperStep(settings);
    const auto stepped = next_state(2);
    QVERIFY(stepped && stepped->error.isEmpty());
    QCOMPARE(stepped->steps, 1);
    QCOMPARE(stepped->tokens.back().id, prefill->server_drawn);
    QCOMPARE(stepped->tokens.back().probability, prefill->server_top[0].probability);
    const int runner_up = stepped->server_top[1].id;
    engine.stepper().stepperStep(settings, runner_up);
    const auto forced = next_state(3);
    QVERIFY(forced && forced->error.isEmpty());
    QCOMPARE(forced->tokens.back().id, runner_up);
    QVERIFY(forced->tokens.back().forced);
    engine.stepper().stepperBack(settings);
    const auto back = next_state(4);
    QVERIFY(back && back->error.isEmpty());
    QCOMPARE(back->steps, 1);
    QCOMPARE(back->tokens.size(), stepped->tokens.size());
    // The same sequence gives the same distribution again.
    QCOMPARE(back->server_top[0].id, stepped->server_top[0].id);
    QVERIFY(std::abs(back->server_top[0].probability - stepped->server_top[0].probability) < 1e-3f);
}

void TestRemoteApp::killedServerKeepsThePartialReply()
{
    testsupport::LlamaServerProcess doomed;
    QVERIFY2(doomed.start(m_binary, QString::fromStdString(m_model)), qPrintable(doomed.error()));
    ConversationStore store(m_dir.filePath("cut.sqlite"), "remote-cut");
    EngineController engine;
    MainWindow window(&engine, &store);
    window.setDialogsEnabled(false);
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    window.connectServer(endpoint(doomed.url(), {}));
    QVERIFY(testsupport::seen(loaded));
    ChatPanel* chat = window.chatPanel();
    auto s = chat->sampling();
    s.temperature = 0.0f;
    s.max_tokens = 300;
    chat->setSampling(s);
    QString streamed;
    int pieces = 0;
    connect(&engine.chat(), &ChatClient::replyDelta, this, [&](quint64, const QString& d) {
        streamed += d;
        if (++pieces == 4)
            doomed.kill();
    });
    QSignalSpy finished(chat, &ChatPanel::replyFinished), failed(&engine.chat(), &ChatClient::replyFailed);
    chat->send("Write a long story about a lighthouse keeper.");
    QVERIFY(QTest::qWaitFor([&] { return finished.count() + failed.count() > 0; }, 120000));
    QCOMPARE(failed.count(), 0);
    const auto stats = chat->lastStats();
    QCOMPARE(stats->stop_reason, QString("cut off"));
    QVERIFY2(stats->notice.contains("cut off"), qPrintable(stats->notice));
    QCOMPARE(chat->messageCount(), 2);
    const auto saved = store.latest();
    QVERIFY(saved && saved->messages.size() == 2);
    QCOMPARE(saved->messages[1].content, streamed.trimmed()); // nothing that arrived is lost
    QVERIFY(!saved->messages[1].content.isEmpty());
    QVERIFY(saved->messages[1].stats.contains("cut off"));
    QVERIFY(!engine.busy());

    // The next message to a server that is gone: a clear failure, and the message stays typed.
    QSignalSpy failed2(&engine.chat(), &ChatClient::replyFailed);
    chat->send("Are you there?");
    QVERIFY(testsupport::seen(failed2));
    QVERIFY2(failed2.first().at(1).toString().contains("refused the connection"),
             qPrintable(failed2.first().at(1).toString()));
    QCOMPARE(chat->messageCount(), 2);
}

void TestRemoteApp::connectDialogProbesBeforeAccepting()
{
    ConnectServerDialog dialog;
    dialog.setUrl(m_server.url());
    dialog.setApiKey("wrong");
    dialog.show();
    dialog.check();
    QTRY_VERIFY_WITH_TIMEOUT(dialog.status().contains("HTTP 401"), 30000);
    QVERIFY(dialog.isVisible()); // still open: nothing was accepted
    QVERIFY_WORDING(&dialog);
    dialog.setApiKey(kKey);
    QSignalSpy accepted(&dialog, &QDialog::accepted);
    dialog.check();
    QVERIFY(testsupport::seen(accepted));
    QCOMPARE(dialog.endpoint().api_key, kKey);
    QVERIFY(ConnectServerDialog::recentServers().contains(m_server.url()));
    // The key the server accepted is kept for its URL (the keyring, or this session's memory where no
    // keyring answers: test_server_keys covers both) and offered by the next dialog; never in settings.
    ConnectServerDialog again;
    again.setUrl(m_server.url());
    QTRY_COMPARE_WITH_TIMEOUT(again.apiKey(), kKey, 30000);
    QSettings settings;
    settings.sync();
    QFile file(settings.fileName());
    if (file.open(QIODevice::ReadOnly))
        QVERIFY(!file.readAll().contains(kKey.toUtf8()));
}

// The serving lab on a server connection: nothing is sent until the user says yes; then the workload
// goes to the server at most so many at once, every request streams its reply, the server's own
// /metrics are read meanwhile, and the run sits in the table beside the local ones. A workload over
// the limit is refused before anything is sent.
void TestRemoteApp::servingLabDrivesTheServer()
{
    EngineController engine;
    ServingPanel panel(&engine);
    panel.resize(1100, 800);
    panel.show();
    auto* run_server = panel.findChild<QPushButton*>("servingRunServer");
    QVERIFY(run_server && !run_server->isEnabled()); // no server yet
    QSignalSpy connected(&engine, &EngineController::serverConnected);
    engine.connectServer(endpoint(m_server.url(), kKey));
    QVERIFY(testsupport::seen(connected));
    QVERIFY(run_server->isEnabled());

    ServingSettings s = panel.settings();
    s.workload.clients = 6;
    s.workload.arrival_rate = 0; // all at once: the limit in flight is what holds them back
    s.workload.prompt_min = 8;
    s.workload.prompt_max = 16;
    s.workload.output_min = 4;
    s.workload.output_max = 8;
    s.workload.shared_tokens = 8;
    panel.setSettings(s);
    panel.findChild<QSpinBox*>("servingServerConcurrent")->setValue(3);

    // "No": nothing goes out.
    QString asked;
    panel.setConfirmation([&](const QString& text) {
        asked = text;
        return false;
    });
    QTest::mouseClick(run_server, Qt::LeftButton);
    QVERIFY2(asked.contains("6 requests") && asked.contains("at most 3 at once") && asked.contains(m_server.url()),
             qPrintable(asked));
    QVERIFY(!engine.serving().serverRunning());
    QVERIFY(!panel.serverResult());

    // Over the limit: refused by name before anything is sent.
    panel.setConfirmation([](const QString&) { return true; });
    panel.findChild<QSpinBox*>("servingServerMax")->setValue(4);
    QSignalSpy ended(&panel, &ServingPanel::serverFinished);
    QTest::mouseClick(run_server, Qt::LeftButton);
    QVERIFY(testsupport::seen(ended));
    QVERIFY2(panel.statusText().contains("at most 4"), qPrintable(panel.statusText()));
    QVERIFY(!panel.serverResult());

    // "Yes", within the limits.
    panel.findChild<QSpinBox*>("servingServerMax")->setValue(200);
    ended.clear();
    QTest::mouseClick(run_server, Qt::LeftButton);
    QVERIFY(engine.serving().serverRunning());
    QVERIFY(testsupport::seen(ended, 1, 300000));
    const auto r = panel.serverResult();
    QVERIFY(r && !r->cancelled);
    QCOMPARE(int(r->results.size()), 6);
    QCOMPARE(int(r->finished), 6);
    QCOMPARE(r->max_in_flight, 3u); // six at once, held to three
    for (std::size_t i = 0; i < r->results.size(); ++i) {
        const engine::RemoteRequestResult& q = r->results[i];
        QVERIFY2(q.error.empty(), q.error.c_str());
        QVERIFY(q.sent_s >= 0 && q.first_token_s >= q.sent_s && q.done_s >= q.first_token_s);
        QVERIFY2(q.tokens >= 1 && q.tokens <= r->requests[i].max_new_tokens, qPrintable(QString::number(q.tokens)));
        QVERIFY(!q.finish_reason.empty());
    }
    QVERIFY(r->ttft.count == 6 && r->ttft.p50 > 0);
    // llama-server's /metrics (--metrics): read during the run, its running count said at least once
    QVERIFY(!r->metrics.empty());
    bool reported = false;
    for (const engine::MetricsSample& m : r->metrics)
        reported |= m.running.has_value();
    QVERIFY(reported);
    QVERIFY2(panel.statusText().contains("6 of 6 done"), qPrintable(panel.statusText()));
    QTableWidget* table = panel.table();
    QCOMPARE(table->item(table->rowCount() - 1, 0)->text(), QString("On the server"));
    QCOMPARE(table->item(table->rowCount() - 1, 7)->text(), QString("3 in flight"));
    // …and in the exports, after the local runs (none here)
    const auto j = nlohmann::json::parse(engine::serve_runs_json({}, r.get()));
    QCOMPARE(QString::fromStdString(j.back()["mode"].get<std::string>()), QString("server"));
    QCOMPARE(int(j.back()["requests"].size()), 6);
    QCOMPARE(int(j.back()["summary"]["max_in_flight"].get<int>()), 3);
    QVERIFY(!j.back()["metrics"].empty());
    const std::string csv = engine::serve_runs_csv({}, r.get());
    QCOMPARE(std::count(csv.begin(), csv.end(), '\n'), 7L); // the header and six requests
    QVERIFY_WORDING(&panel);
    engine.disconnectServer();
    QVERIFY(!run_server->isEnabled());
}

// The server dies in the middle of a run: the replies in flight end cut off, the ones still waiting
// fail to connect — every request ends with its reason, the run ends, nothing hangs.
void TestRemoteApp::servingLabOnAKilledServerEnds()
{
    testsupport::LlamaServerProcess doomed;
    QVERIFY2(doomed.start(m_binary, QString::fromStdString(m_model)), qPrintable(doomed.error()));
    EngineController engine;
    ServingPanel panel(&engine);
    QSignalSpy connected(&engine, &EngineController::serverConnected);
    engine.connectServer(endpoint(doomed.url(), {}));
    QVERIFY(testsupport::seen(connected));
    ServingSettings s = panel.settings();
    s.workload.clients = 4;
    s.workload.arrival_rate = 0;
    s.workload.output_min = 400;
    s.workload.output_max = 400;
    panel.setSettings(s);
    panel.findChild<QSpinBox*>("servingServerConcurrent")->setValue(2);
    panel.setConfirmation([](const QString&) { return true; });
    QSignalSpy progressed(&engine.serving(), &ServingClient::serverProgress);
    QSignalSpy ended(&panel, &ServingPanel::serverFinished);
    panel.runOnServer();
    // once the first reply is streaming
    QVERIFY(QTest::qWaitFor(
        [&] {
            const auto r = panel.serverResult();
            return r && std::any_of(r->results.begin(), r->results.end(),
                                    [](const engine::RemoteRequestResult& q) { return q.token_s.size() >= 2; });
        },
        120000));
    doomed.kill();
    QVERIFY(testsupport::seen(ended, 1, 120000));
    const auto r = panel.serverResult();
    QVERIFY(r && !r->cancelled);
    QCOMPARE(int(r->results.size()), 4);
    for (const engine::RemoteRequestResult& q : r->results)
        QVERIFY(q.done());
    QVERIFY2(r->failed >= 3, qPrintable(panel.statusText())); // two cut off, the others refused
    QVERIFY2(panel.statusText().contains("first failure"), qPrintable(panel.statusText()));
    QVERIFY(!engine.serving().serverRunning());
}

QTEST_MAIN(TestRemoteApp)
#include "test_remote_app.moc"
