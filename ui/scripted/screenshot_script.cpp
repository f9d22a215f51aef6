// SPDX-License-Identifier: GPL-3.0-or-later
#include "scripted/screenshot_script.h"
#include "bridge/chat_client.h"

#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "main_window.h"
#include "panels/attention_panel.h"
#include "panels/chat_panel.h"
#include "panels/context_panel.h"
#include "panels/experts_panel.h"
#include "panels/kv_panel.h"
#include "panels/lab_heads_tab.h"
#include "panels/lab_panel.h"
#include "panels/lab_steering_tab.h"
#include "panels/serving_panel.h"
#include "panels/speculation_panel.h"
#include "panels/stepper_panel.h"
#include "panels/text_panel.h"
#include "panels/timeline_panel.h"
#include "panels/tokenizer_comparison.h"
#include "panels/tokenizer_panel.h"
#include "storage/atomic_save.h"
#include "storage/server_keys.h"
#include "widgets/connect_server_dialog.h"
#include "widgets/model_head_map.h"
#include "widgets/model_library_dialog.h"
#include "widgets/serving_lanes.h"

#include <QApplication>
#include <QBuffer>
#include <QDialog>
#include <QDockWidget>
#include <QSettings>
#include <QTabWidget>
#include <QTimer>
#include <cstdio>
#include <memory>

namespace tokenscope::ui {

namespace {

using Options = std::shared_ptr<const ScreenshotOptions>;

// A screenshot written like every other file (storage/atomic_save.h): whole or not at all, never
// through a link planted at its path.
bool save_picture(QWidget* widget, const QString& path)
{
    QBuffer png;
    png.open(QIODevice::WriteOnly);
    QString error;
    if (!widget->grab().save(&png, "PNG"))
        return false;
    if (!save_atomically(path, png.data(), &error)) {
        std::fprintf(stderr, "%s\n", qPrintable(error));
        return false;
    }
    return true;
}

// After `delay_ms` (the last repaint), saves `target` and ends the app with the result.
void grab_later(QApplication& app, QWidget* owner, QWidget* target, const QString& file, int delay_ms)
{
    QTimer::singleShot(delay_ms, owner, [&app, target, file] {
        const bool saved = save_picture(target, file);
        std::fprintf(stderr, "%s %s\n", saved ? "saved" : "could not save", qPrintable(file));
        app.exit(saved ? 0 : 1);
    });
}

// A panel's dock, floating and roomy, so that the picture shows the whole panel; --size overrides the
// panel's own roomy size (to check it at a screen's size).
QDockWidget* float_dock(MainWindow& window, const QString& panel, int width, int height, const Options& o)
{
    auto* dock = window.findChild<QDockWidget*>("dock-" + panel);
    dock->setFloating(true);
    dock->resize(o->size.isValid() ? o->size : QSize(width, height));
    return dock;
}

// The text, then (with --edit) its edited version; grabbed once every comparison has caught up.
void script_tokenizer(QApplication& app, EngineController& engine, MainWindow& window, const Options& o)
{
    QDockWidget* dock = float_dock(window, "tokenizer", 1100, 900, o);
    TokenizerPanel* tokenizer = window.tokenizerPanel();
    for (const QString& file : o->compare)
        tokenizer->comparison()->addTokenizer(file);
    QObject::connect(&engine, &EngineController::modelLoaded, &window,
                     [o, tokenizer] { tokenizer->setText(o->prompt); });
    const bool editing = !o->edit.isEmpty();
    auto edited = std::make_shared<bool>(!editing);
    const auto maybe_grab = [&app, &window, o, tokenizer, dock, edited] {
        const QString final_text = o->edit.isEmpty() ? o->prompt : o->edit;
        if (!tokenizer->current() || tokenizer->current()->text != final_text || !*edited ||
            !tokenizer->comparison()->settled() ||
            int(tokenizer->comparison()->entries().size()) < int(o->compare.size()))
            return;
        *edited = false; // grab once
        tokenizer->selectToken(2);
        grab_later(app, &window, dock, o->file, 150);
    };
    auto grabbed = std::make_shared<bool>(false);
    QObject::connect(tokenizer, &TokenizerPanel::updated, &window,
                     [&window, o, tokenizer, edited, maybe_grab, grabbed, editing] {
                         if (!*edited && !*grabbed && editing && tokenizer->current()->text == o->prompt) {
                             *grabbed = true;
                             *edited = false;
                             QTimer::singleShot(50, &window, [o, tokenizer, edited] {
                                 *edited = true;
                                 tokenizer->setText(o->edit);
                             });
                             return;
                         }
                         maybe_grab();
                     });
    QObject::connect(tokenizer->comparison(), &TokenizerComparison::changed, &window, maybe_grab);
    QObject::connect(tokenizer->comparison(), &TokenizerComparison::failed, &app, [&app](const QString& m) {
        std::fprintf(stderr, "%s\n", qPrintable(m));
        app.exit(1);
    });
}

// Prefill, n steps, Back, the runner-up forced, one more step; a token selected.
void script_stepper(QApplication& app, EngineController& engine, MainWindow& window, const Options& o)
{
    QDockWidget* dock = float_dock(window, "stepper", 1280, 900, o);
    StepperPanel* stepper = window.stepperPanel();
    StepperSettings settings = stepper->settings();
    settings.sampling.temperature = 0.7f;
    settings.logit_lens = true;
    stepper->setSettings(settings);
    QObject::connect(&engine, &EngineController::modelLoaded, &window, [o, stepper] {
        stepper->setPrompt(o->prompt);
        stepper->prefill();
    });
    auto script = std::make_shared<int>(0);
    QObject::connect(stepper, &StepperPanel::stateChanged, &window, [&app, &window, o, stepper, script, dock] {
        const int n = std::max(2, o->steps);
        const int i = (*script)++;
        if (stepper->state() && stepper->state()->action == "error") {
            std::fprintf(stderr, "stepper: %s\n", qPrintable(stepper->state()->error));
            app.exit(1);
        } else if (i < n) {
            stepper->step();
        } else if (i == n) {
            stepper->back();
        } else if (i == n + 1) {
            // Force the runner-up: from the preview's first stage, or a server's top-N.
            const auto& server_top = stepper->state()->server_top;
            const auto& stages = stepper->preview().stages;
            int runner_up = -1;
            if (server_top.size() > 1)
                runner_up = server_top[1].id;
            else if (!stages.empty() && stages.front().top.size() > 1)
                runner_up = stages.front().top[1].id;
            stepper->step(runner_up);
        } else if (i == n + 2) {
            stepper->step();
        } else if (i == n + 3) {
            window.selection()->select(int(stepper->state()->tokens.size()) - 2);
            grab_later(app, &window, dock, o->file, 100);
        }
    });
}

// One head, the layer grid, the whole-model overview, the lines view or the "bank" comparison.
void script_attention(QApplication& app, EngineController& engine, MainWindow& window, const Options& o)
{
    QDockWidget* dock = float_dock(window, "attention", 1280, 900, o);
    AttentionPanel* attention = window.attentionPanel();
    const QString which = o->tab.isEmpty() ? QString("head") : o->tab;
    const auto grab = [&app, &window, dock, o] { grab_later(app, &window, dock, o->file, 300); };
    QObject::connect(&engine, &EngineController::modelLoaded, &window, [o, attention, which] {
        if (which == "compare") {
            attention->showHead(9, 0);
            attention->compareBankExample();
            return;
        }
        attention->showHead(which == "lines" ? 9 : 3, which == "lines" ? 0 : 2);
        attention->setPrompt(o->prompt);
        if (which == "overview")
            attention->captureAllLayers();
        else
            attention->run();
    });
    QObject::connect(attention, &AttentionPanel::compared, &window, grab);
    QObject::connect(attention, &AttentionPanel::captured, &window, [attention, which, grab] {
        if (which == "grid" || which == "overview") {
            attention->showTab(1);
            if (which == "overview")
                attention->setOverview(true);
        } else if (which == "lines") {
            attention->showTab(2);
        }
        const int n = attention->currentHead() ? attention->currentHead()->n : 0;
        attention->selectCell(std::max(0, n - 1), -1);
        grab();
    });
}

// The lab: a patching grid (--tab attention|mlp|patch-heads: over those; default: the residual stream)
// on the default prompts, (--tab attribution) the waterfall of the most likely token's logit, or the
// Heads tab (--tab heads or classes: the heads classified; scan: and an ablation scan).
void script_lab(QApplication& app, EngineController& engine, MainWindow& window, const Options& o)
{
    QDockWidget* dock = float_dock(window, "lab", 1100, 820, o);
    LabPanel* lab = window.labPanel();
    const auto grab = [&app, &window, dock, o] { grab_later(app, &window, dock, o->file, 300); };
    QObject::connect(&engine, &EngineController::modelLoaded, &window, [lab, o] {
        if (o->tab == "attribution") {
            lab->attribute("The Eiffel Tower is in the city of");
            return;
        }
        if (o->tab == "heads" || o->tab == "classes" || o->tab == "scan") {
            std::fprintf(stderr, "lab: the Heads tab (%s)\n", o->tab == "scan" ? "classes, then a scan" : "classes");
            lab->showTab(2);
            lab->headsTab()->classify();
            return;
        }
        if (o->tab == "steering") {
            lab->showTab(3);
            lab->steeringTab()->run(lab->steeringTab()->settings());
            return;
        }
        PatchingSettings s;
        s.clean = "The Eiffel Tower is in the city of";
        s.corrupted = "The Colosseum is in the city of";
        s.token_a = " Paris";
        s.token_b = " Rome";
        s.over = o->tab == "patch-heads" ? 3 : o->tab == "mlp" ? 2 : o->tab == "attention" ? 1 : 0;
        std::fprintf(stderr, "lab: the Patching tab, over %s\n",
                     s.over == 3   ? "heads"
                     : s.over == 2 ? "MLPs"
                     : s.over == 1 ? "attention"
                                   : "the residual stream");
        lab->runPatching(s);
    });
    QObject::connect(lab, &LabPanel::patchingFinished, &window, grab);
    QObject::connect(lab, &LabPanel::attributionFinished, &window, grab);
    QObject::connect(lab->steeringTab(), &LabSteeringTab::finished, &window, grab);
    QObject::connect(lab->headsTab(), &LabHeadsTab::classified, &window, [lab, o, grab] {
        if (o->tab != "scan")
            return grab();
        AblationSettings s;
        s.prompt = "The Eiffel Tower is in the city of";
        lab->headsTab()->grid()->setSelected({{12, 2}, {15, 3}});
        lab->headsTab()->scan(s);
    });
    QObject::connect(lab->headsTab(), &LabHeadsTab::scanFinished, &window,
                     [lab] { lab->headsTab()->ablateSelected(); });
    QObject::connect(lab->headsTab(), &LabHeadsTab::ablated, &window, grab);
}

// The text analysis panel on --prompt; --tab compare --follow-up MODEL.gguf: against a second GGUF, the
// two distributions shown for the token where they disagree most.
void script_text(QApplication& app, EngineController& engine, MainWindow& window, const Options& o)
{
    QDockWidget* dock = float_dock(window, "text", 1100, 820, o);
    TextPanel* text = window.textPanel();
    QObject::connect(&engine, &EngineController::modelLoaded, &window,
                     [text, o] { text->analyze(o->prompt, o->tab == "compare" ? o->follow_ups.value(0) : QString()); });
    QObject::connect(text, &TextPanel::analyzed, &window, [&app, &window, dock, text, o] {
        // a comparison shows the two distributions where the models disagree most
        if (const auto& r = text->result(); r && r->compared) {
            int worst = -1;
            for (std::size_t i = 0; i < r->tokens.size(); ++i)
                if (r->tokens[i].predicted && (worst < 0 || r->tokens[i].kl > r->tokens[std::size_t(worst)].kl))
                    worst = int(i);
            text->selectToken(worst);
        }
        grab_later(app, &window, dock, o->file, 300);
    });
}

// The Model library dialog once its scan is done (every model found, its kind and type), with the
// --model file selected: the line under the list says which rule decided its kind.
void script_library(QApplication& app, MainWindow& window, const Options& o)
{
    // the --model file is the one the window loads: marked as loaded
    auto* library = new ModelLibraryDialog(QSettings().value("models/recent").toStringList(), o->model_path, &window);
    QObject::connect(library, &ModelLibraryDialog::scanFinished, &window, [&app, &window, library, o] {
        library->selectModel(o->model_path);
        grab_later(app, &window, library, o->file, 200);
    });
    library->show();
}

// File → Connect to server… as a user first sees it: an example URL (not --prompt, a chat message)
// and an empty key field with its hint, once the keyring (or its absence) has answered: the note
// under the key says where keys are kept. (A made-up key drawn as dots looked like a saved one.)
void script_connect(QApplication& app, MainWindow& window, const Options& o)
{
    auto* dialog = new ConnectServerDialog(&window);
    dialog->setUrl("http://127.0.0.1:8080");
    auto grabbed = std::make_shared<bool>(false);
    QObject::connect(&ServerKeys::instance(), &ServerKeys::fetched, &window, [&app, &window, dialog, o, grabbed] {
        if (!std::exchange(*grabbed, true))
            grab_later(app, &window, dialog, o->file, 300);
    });
    dialog->show();
}

// The context simulator with a system prompt, a typed turn and synthetic ones.
void script_context(QApplication& app, EngineController& engine, MainWindow& window, const Options& o)
{
    QDockWidget* dock = float_dock(window, "context", 1280, 900, o);
    ContextPanel* context = window.contextPanel();
    QObject::connect(&engine, &EngineController::modelLoaded, &window, [&app, &window, o, context, dock] {
        context->setWindow(1024);
        context->setSystemPrompt("You are a concise assistant who explains how language models work.");
        context->addTypedTurn(o->prompt, "Sunlight scatters off air molecules; short blue wavelengths scatter most, "
                                         "so the sky looks blue from every direction.");
        for (int i = 0; i < 6; ++i)
            context->addSyntheticTurn(60, 140);
        auto done = std::make_shared<bool>(false);
        QObject::connect(context, &ContextPanel::simulated, &window, [&app, &window, o, context, dock, done] {
            if (!*done && context->counted()) {
                *done = true;
                grab_later(app, &window, dock, o->file, 300);
            }
        });
    });
}

// The serving lab's Server tab: 16 clients served here by continuous batching, then the same
// workload sent to the server (--follow-up URL) — its row beside the local one, and what it reported.
void script_serving_server(QApplication& app, EngineController& engine, MainWindow& window, const Options& o,
                           QDockWidget* dock)
{
    ServingPanel* serving = window.servingPanel();
    auto started = std::make_shared<bool>(false);
    QObject::connect(&engine, &EngineController::modelLoaded, &window, [serving, started] {
        if (*started)
            return; // the server's summary, after the connection
        *started = true;
        ServingSettings s = serving->settings();
        s.workload.clients = 16;
        s.workload.arrival_rate = 8;
        s.modes = {engine::BatchingMode::Continuous};
        serving->setSettings(s);
        serving->run();
    });
    QObject::connect(serving, &ServingPanel::finished, &window, [&window, o] {
        remote::Endpoint e;
        e.base = QUrl(o->follow_ups.value(0));
        window.connectServer(e);
    });
    QObject::connect(&engine, &EngineController::serverConnected, &window, [serving] {
        serving->setConfirmation([](const QString&) { return true; }); // asked for on the command line
        serving->runOnServer();
    });
    QObject::connect(serving, &ServingPanel::serverFinished, &window, [&app, &window, dock, serving, o] {
        if (!serving->serverResult()) {
            std::fprintf(stderr, "%s\n", qPrintable(serving->statusText()));
            app.exit(1);
            return;
        }
        grab_later(app, &window, dock, o->file, 300);
    });
}

// The serving lab on 16 clients: --tab requests (default), blocks or batch picks the view; a tab named
// live-… is grabbed during the continuous-batching run, once half of its requests are done, the others
// after the three runs; forks (or forks-blocks): three sampled replies to each of six prompts,
// continuous batching only (copies on write).
void script_serving(QApplication& app, EngineController& engine, MainWindow& window, const Options& o)
{
    QDockWidget* dock = float_dock(window, "serving", 1280, 900, o);
    ServingPanel* serving = window.servingPanel();
    const bool live = o->tab.startsWith("live-");
    const QString view = live ? o->tab.mid(5) : o->tab;
    auto* tabs = serving->findChild<QTabWidget*>("servingTabs");
    tabs->setCurrentIndex(view == "blocks" || view == "forks-blocks" ? 1 : view == "batch" ? 2 : 0);
    if (view == "server") { // the local run, then the same workload on the server at --follow-up URL
        script_serving_server(app, engine, window, o, dock);
        return;
    }
    QObject::connect(&engine, &EngineController::modelLoaded, &window, [serving, view] {
        ServingSettings s = serving->settings();
        s.workload.clients = 16;
        s.workload.arrival_rate = 8;
        s.options.pool_blocks = 40;     // tight enough to preempt a few
        if (view.startsWith("forks")) { // parallel sampling: three sampled replies to each of 6 prompts
            s.workload.clients = 6;
            s.workload.samples = 3;
            s.workload.temperature = 0.8f;
            s.options.pool_blocks = 0;
            s.modes = {engine::BatchingMode::Continuous};
        }
        serving->setSettings(s);
        serving->run();
    });
    auto grabbed = std::make_shared<bool>(false);
    if (live) {
        QObject::connect(serving, &ServingPanel::progressed, &window, [&app, dock, serving, o, grabbed] {
            const auto* lanes = serving->lanes();
            if (*grabbed || !lanes->run() || lanes->run()->mode != engine::BatchingMode::Continuous)
                return;
            int done = 0;
            for (const auto& r : lanes->run()->requests)
                done += r.phase == engine::RequestPhase::Done;
            if (2 * done < int(lanes->run()->requests.size()))
                return;
            *grabbed = true;
            // the picture now, while the run goes on; the app ends when it is saved
            if (!save_picture(dock, o->file))
                app.exit(1);
            else
                app.exit(0);
        });
    }
    QObject::connect(serving, &ServingPanel::finished, &window, [&app, &window, dock, serving, o, grabbed] {
        if (*grabbed)
            return;
        if (!serving->result()) {
            std::fprintf(stderr, "%s\n", qPrintable(serving->statusText()));
            app.exit(1);
            return;
        }
        *grabbed = true;
        grab_later(app, &window, dock, o->file, 300);
    });
}

// Speculative decoding against plain decoding: --tab lookup (default: a code-editing prompt),
// early-exit (--follow-up L, default three quarters of the layers, on a chat-style prompt) or chat
// (the chat's reply to --prompt, then the same request speculated with lookup), or timeline (the
// lookup run, the Timeline panel's picture: its draft and verify lanes).
void script_speculation(QApplication& app, EngineController& engine, MainWindow& window, const Options& o)
{
    QDockWidget* dock = o->tab == "timeline" ? float_dock(window, "timeline", 1280, 760, o)
                                             : float_dock(window, "speculation", 1280, 900, o);
    SpeculationPanel* panel = window.speculationPanel();
    const QString tab = o->tab.isEmpty() ? "lookup" : o->tab;
    QObject::connect(&engine, &EngineController::modelLoaded, &window,
                     [&window, panel, tab, o](std::shared_ptr<const ModelSummary> m) {
                         SpeculationSettings s = panel->settings();
                         s.draft_max = 4;
                         s.tokens = 48;
                         if (tab == "early-exit") {
                             s.source = QString("early-exit:%1")
                                            .arg(o->follow_ups.value(0).toInt() > 0 ? o->follow_ups.value(0).toInt()
                                                                                    : m->n_layers * 3 / 4);
                             s.prompt = m->instruction_tuned
                                            ? "<|im_start|>user\nWhat is a hash map, in two sentences?<|im_end|>\n"
                                              "<|im_start|>assistant\n"
                                            : "The history of the Roman Empire begins";
                         } else {
                             s.source = "lookup";
                             const QString code = "def average(values):\n    total = 0\n    for v in values:\n"
                                                  "        total += v\n    return total / len(values)\n";
                             s.prompt = m->instruction_tuned
                                            ? "<|im_start|>user\nRename total to sum and give the whole function "
                                              "back:\n\n" +
                                                  code + "<|im_end|>\n<|im_start|>assistant\n"
                                            : code + "\n# The same function with total renamed to acc:\n";
                         }
                         panel->setSettings(s);
                         if (tab == "chat")
                             window.chatPanel()->send(o->prompt);
                         else
                             panel->run();
                     });
    if (tab == "chat")
        QObject::connect(window.chatPanel(), &ChatPanel::replyFinished, &window, [panel] { panel->runOnChat(); });
    QObject::connect(panel, &SpeculationPanel::finished, &window, [&app, &window, dock, panel, o] {
        if (!panel->result() || !panel->result()->error.isEmpty()) {
            std::fprintf(stderr, "%s\n", qPrintable(panel->statusText()));
            app.exit(1);
            return;
        }
        grab_later(app, &window, dock, o->file, 300);
    });
}

// The KV cache or the timeline after a real chat reply (they are its measurements).
void script_after_reply(QApplication& app, EngineController& engine, MainWindow& window, const Options& o)
{
    QDockWidget* dock = float_dock(window, o->panel, 1280, o->panel == "timeline" ? 760 : 900, o);
    const auto grab = [&app, &window, dock, o] { grab_later(app, &window, dock, o->file, 300); };
    QObject::connect(&engine, &EngineController::modelLoaded, &window,
                     [&window, o] { window.chatPanel()->send(o->prompt); });
    QObject::connect(window.chatPanel(), &ChatPanel::replyFinished, &window, [&engine, &window, o, grab] {
        if (o->panel == "timeline") {
            window.selection()->select(window.timelinePanel()->timeline()->prompt_tokens + 3);
            // The machine's peaks beside the run: measured now, after the reply.
            QObject::connect(window.timelinePanel(), &TimelinePanel::peaksChanged, &window, grab);
            engine.probeMachine();
            return;
        }
        if (o->tab == "contents") {
            QObject::connect(window.kvPanel(), &KvPanel::contentsShown, &window, grab);
            window.kvPanel()->showContents(3, 0, false);
        } else if (o->tab == "quantized") {
            // Q8_0 keys and values (or --follow-up "q4_0"): the memory, then the damage on the built-in text.
            window.kvPanel()->showTab(3);
            const auto t = engine::parse_kv_cache_type(o->follow_ups.value(0, "q8_0").toStdString())
                               .value_or(engine::GgmlType::Q8_0);
            window.kvPanel()->chooseCacheTypes({t, t});
            QObject::connect(window.kvPanel(), &KvPanel::damageMeasured, &window, grab);
            window.kvPanel()->measureDamage();
        } else if (o->tab == "calculator") {
            window.kvPanel()->showTab(2);
            window.kvPanel()->selectPreset("Llama 3 8B");
            // The example: 8,192 tokens in FP16, 64 sequences, an 80 GiB GPU with 16 GiB of weights.
            window.kvPanel()->setCalculator(8192, 64, 1, false, true, 0.0, 80.0, 16.0);
            // …and the memory planner on the loaded file.
            QObject::connect(window.kvPanel(), &KvPanel::planned, &window, grab);
            window.kvPanel()->planFile(o->model_path);
        } else if (engine.server()) {
            // On a server: the cache as the server tells it, once /metrics has answered.
            QObject::connect(window.kvPanel(), &KvPanel::serverCacheShown, &window, grab);
        } else {
            grab();
        }
    });
}

// The prompt, then each follow-up after the reply before it; the picture after the last.
void script_chat(QApplication& app, EngineController& engine, MainWindow& window, const Options& o)
{
    auto queue = std::make_shared<QStringList>(QStringList{o->prompt} + o->follow_ups);
    QObject::connect(&engine, &EngineController::modelLoaded, &window, [&app, &window, o, queue] {
        if (!window.chatPanel()->send(queue->takeFirst())) { // refused: the picture shows why
            QWidget* target = o->panel == "main" ? static_cast<QWidget*>(&window) : window.panel(o->panel);
            grab_later(app, &window, target, o->file, 100);
        }
    });
    QObject::connect(window.chatPanel(), &ChatPanel::replyFinished, &window, [&app, &window, o, queue] {
        if (!queue->isEmpty()) {
            window.chatPanel()->send(queue->takeFirst());
            return;
        }
        QWidget* target = o->panel == "main" ? static_cast<QWidget*>(&window) : window.panel(o->panel);
        grab_later(app, &window, target, o->file, 100);
    });
}

// A saved run opened with no model loaded, shown in the panel asked for (--tab for the lab's tab or
// the attention/KV views; --tab summary: the Save run question with the file's size).
void script_saved_run(QApplication& app, MainWindow& window, const Options& o)
{
    QObject::connect(&window, &MainWindow::runOpened, &window,
                     [&app, &window, o](const QString&, const QString& error) {
                         if (!error.isEmpty()) {
                             std::fprintf(stderr, "%s\n", qPrintable(error));
                             app.exit(1);
                             return;
                         }
                         if (o->panel == "main") {
                             if (o->tab == "summary") {
                                 QDialog* box = window.saveRunQuestion();
                                 box->show();
                                 return grab_later(app, &window, box, o->file, 300);
                             }
                             return grab_later(app, &window, &window, o->file, 300);
                         }
                         QDockWidget* dock = float_dock(window, o->panel, 1100, 820, o);
                         if (o->panel == "lab")
                             window.labPanel()->showTab(o->tab == "attribution" ? 1
                                                        : o->tab == "classes"   ? 2
                                                        : o->tab == "steering"  ? 3
                                                                                : 0);
                         else if (o->panel == "attention" && o->tab == "grid")
                             window.attentionPanel()->showTab(1);
                         grab_later(app, &window, dock, o->file, 300);
                     });
    window.openRun(o->run_path);
}

// The Experts panel: --prompt routed (default: a short sentence), token --follow-up T selected (default:
// the fifth); --tab what-if adds "remove the selected token's top expert at the middle layer", --tab scan
// the scan of every expert.
void script_experts(QApplication& app, EngineController& engine, MainWindow& window, const Options& o)
{
    QDockWidget* dock = float_dock(window, "experts", 1280, 900, o);
    ExpertsPanel* panel = window.expertsPanel();
    QObject::connect(&engine, &EngineController::modelLoaded, &window, [panel, o] {
        panel->setText(o->prompt.isEmpty() ? QString("The quick brown fox jumps over the lazy dog while the cat "
                                                     "sleeps in the warm sun.")
                                           : o->prompt);
        panel->route();
    });
    QObject::connect(panel, &ExpertsPanel::routed, &window, [&app, &window, dock, panel, o] {
        const auto& s = panel->snapshot();
        if (!s || !s->error.isEmpty()) {
            std::fprintf(stderr, "%s\n", qPrintable(panel->statusText()));
            app.exit(1);
            return;
        }
        if (!s->dense) {
            const int token =
                std::min(s->n() - 1, o->follow_ups.value(0).toInt() > 0 ? o->follow_ups.value(0).toInt() : 4);
            const int layer = int(s->moe_layers.size()) / 2;
            panel->select(token, layer, s->expert(layer, token, 0));
            if (o->tab == "what-if") {
                panel->runWhatIf(ExpertWhatIf::Kind::Remove, s->moe_layers[std::size_t(layer)],
                                 s->expert(layer, token, 0));
                return;
            }
            if (o->tab == "scan") {
                panel->scan(false);
                return;
            }
        }
        grab_later(app, &window, dock, o->file, 300);
    });
    QObject::connect(panel, &ExpertsPanel::whatIfFinished, &window,
                     [&app, &window, dock, o] { grab_later(app, &window, dock, o->file, 300); });
    QObject::connect(panel, &ExpertsPanel::scanFinished, &window,
                     [&app, &window, dock, o] { grab_later(app, &window, dock, o->file, 300); });
}

} // namespace

const QStringList& screenshot_panels()
{
    static const QStringList panels = {"main", "chat",    "tokenizer", "stepper",     "attention",
                                       "kv",   "context", "timeline",  "library",     "lab",
                                       "text", "connect", "serving",   "speculation", "experts"};
    return panels;
}

void script_screenshot(QApplication& app, EngineController& engine, MainWindow& window,
                       const ScreenshotOptions& options)
{
    const Options o = std::make_shared<const ScreenshotOptions>(options);
    const QString& panel = o->panel;
    if (!o->run_path.isEmpty())
        script_saved_run(app, window, o);
    else if (panel == "tokenizer")
        script_tokenizer(app, engine, window, o);
    else if (panel == "stepper")
        script_stepper(app, engine, window, o);
    else if (panel == "attention")
        script_attention(app, engine, window, o);
    else if (panel == "library")
        script_library(app, window, o);
    else if (panel == "connect")
        script_connect(app, window, o);
    else if (panel == "lab")
        script_lab(app, engine, window, o);
    else if (panel == "text")
        script_text(app, engine, window, o);
    else if (panel == "context")
        script_context(app, engine, window, o);
    else if (panel == "serving")
        script_serving(app, engine, window, o);
    else if (panel == "speculation")
        script_speculation(app, engine, window, o);
    else if (panel == "experts")
        script_experts(app, engine, window, o);
    else if (panel == "kv" || panel == "timeline")
        script_after_reply(app, engine, window, o);
    else
        script_chat(app, engine, window, o);
    // A picture that cannot be made ends the run with the reason and a non-zero status, never a
    // wait: the model does not load, the server cannot be reached or refuses (a plain 401 too), a
    // reply fails.
    const auto fail = [&app](const QString& m) {
        std::fprintf(stderr, "%s\n", qPrintable(m));
        app.exit(1);
    };
    QObject::connect(&engine, &EngineController::loadFailed, &app, fail);
    QObject::connect(&engine, &EngineController::serverFailed, &app, fail);
    QObject::connect(&engine.chat(), &ChatClient::replyFailed, &app, [fail](quint64, const QString& m) { fail(m); });
}

} // namespace tokenscope::ui
