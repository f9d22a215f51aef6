// SPDX-License-Identifier: GPL-3.0-or-later
#include "app_main.h"

#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "main_window.h"
#include "model/model_locator.h"
#include "panels/attention_panel.h"
#include "panels/chat_panel.h"
#include "panels/context_panel.h"
#include "panels/kv_panel.h"
#include "panels/stepper_panel.h"
#include "panels/timeline_panel.h"
#include "panels/tokenizer_comparison.h"
#include "panels/tokenizer_panel.h"
#include "storage/atomic_save.h"
#include "storage/conversation_store.h"
#include "widgets/attention_benchmark.h"
#include "widgets/model_library_dialog.h"

#include <QApplication>
#include <QBuffer>
#include <QCommandLineParser>
#include <QDir>
#include <QDockWidget>
#include <QSettings>
#include <QStandardPaths>
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QTimer>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <string_view>

namespace tokenscope::ui {

namespace {

void setup_logging(bool verbose)
{
    const QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    QDir().mkpath(dir);
    std::vector<spdlog::sink_ptr> sinks;
    try {
        sinks.push_back(std::make_shared<spdlog::sinks::rotating_file_sink_mt>((dir + "/tokenscope.log").toStdString(),
                                                                                 1024 * 1024, 3));
    } catch (const spdlog::spdlog_ex&) {
        // an unwritable data directory must not stop the app
    }
    if (verbose)
        sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    auto logger = std::make_shared<spdlog::logger>("tokenscope", sinks.begin(), sinks.end());
    logger->set_level(verbose ? spdlog::level::debug : spdlog::level::info);
    // Warnings and errors reach the file at once: the lines before a crash are the ones that matter.
    logger->flush_on(spdlog::level::warn);
    spdlog::set_default_logger(logger);
    // …and everything else when the app exits normally.
    std::atexit([] { spdlog::shutdown(); });
}

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

// Panels a screenshot can show today.
const QStringList kBuiltPanels = {"main", "chat", "tokenizer", "stepper", "kv", "context", "timeline", "attention", "library"};
const QStringList kAllPanels = {"main", "chat", "tokenizer", "stepper", "attention", "kv", "context", "timeline", "library"};

} // namespace

int run_app(int argc, char** argv)
{
    // --version needs no display (package tests run it headless).
    for (int i = 1; i < argc; ++i)
        if (std::string_view(argv[i]) == "--version") {
            std::printf("tokenscope %s\n", TOKENSCOPE_VERSION);
            return 0;
        }
    // --scale must be known before the application object exists.
    for (int i = 1; i + 1 < argc; ++i)
        if (std::string_view(argv[i]) == "--scale")
            qputenv("QT_SCALE_FACTOR", argv[i + 1]);

    QApplication app(argc, argv);
    QApplication::setApplicationName("Tokenscope");
    QApplication::setOrganizationName("Tokenscope");
    QApplication::setOrganizationDomain("tokenscope.org");
    QApplication::setApplicationVersion(TOKENSCOPE_VERSION);
    QApplication::setDesktopFileName("org.tokenscope.Tokenscope");

    QCommandLineParser parser;
    parser.setApplicationDescription("Watch a language model generate, token by token");
    parser.addHelpOption();
    parser.addVersionOption();
    const QCommandLineOption verbose("verbose", "Mirror the log to stderr.");
    const QCommandLineOption model("model", "GGUF model to open (default: the installed default model).", "file");
    const QCommandLineOption screenshot("screenshot", "Render a panel after a real run, save it as PNG and exit.", "file");
    const QCommandLineOption panel("panel", "Panel for --screenshot: " + kAllPanels.join(", ") + ".", "name", "main");
    const QCommandLineOption prompt("prompt", "Message sent before the screenshot.", "text",
                                    "Explain in two sentences why the sky is blue.");
    const QCommandLineOption scale("scale", "Device pixel ratio for the screenshot (e.g. 2).", "factor");
    const QCommandLineOption max_tokens("max-tokens", "Reply length for --screenshot.", "n", "48");
    const QCommandLineOption steps("steps", "Stepper screenshot: steps taken after Prefill (one of them undone and forced "
                                            "to the runner-up, to show a branch).", "n", "6");
    const QCommandLineOption compare("compare", "Tokenizer screenshot: a GGUF or .tiktoken file to compare with (repeatable).", "file");
    const QCommandLineOption edit("edit", "Tokenizer screenshot: the prompt after an edit, to show what changed.", "text");
    const QCommandLineOption tab("tab", "KV screenshot: live, contents or calculator; attention: head, grid, overview, lines or compare.",
                                 "name", "live");
    const QCommandLineOption bench_attention("bench-attention-view", "Time redraws of a 2,048 x 2,048 head view and exit (a benchmark).");
    const QCommandLineOption auto_send("auto-send", "Send this message as soon as the model is loaded.", "text");
    const QCommandLineOption quit_after("quit-after-reply", "Quit when the first reply is complete.");
    const QCommandLineOption latency_paste("latency-paste",
                                           "Paste this many characters into the tokenizer panel and print the worst "
                                           "event-loop delay until it is drawn (a benchmark).",
                                           "characters");
    const QCommandLineOption follow_up("follow-up", "For --screenshot --panel chat|main: another message, sent after the "
                                                    "reply before it (repeatable).", "text");
    const QCommandLineOption latency("latency-probe",
                                     "Generate 128 tokens and print the worst event-loop delay seen meanwhile (a benchmark).");
    parser.addOptions({verbose, model, screenshot, panel, prompt, scale, max_tokens, steps, compare, edit, tab, bench_attention, auto_send, quit_after,
                       latency, follow_up, latency_paste});
    parser.process(app);

    setup_logging(parser.isSet(verbose));
    if (parser.isSet(bench_attention))
        return run_attention_view_benchmark();
    apply_theme(static_cast<Theme>(QSettings().value("ui/theme", 0).toInt()));

    const QString shot = parser.value(screenshot);
    const QString panel_name = parser.value(panel);
    if (!shot.isEmpty() && !kBuiltPanels.contains(panel_name)) {
        std::fprintf(stderr, "panel '%s' is %s\n", qPrintable(panel_name),
                     kAllPanels.contains(panel_name) ? "not built yet" : "unknown");
        return 2;
    }

    // Pictures are made from a fresh conversation in a private folder of this run (0700, removed at
    // exit), never from a fixed path in the shared temporary directory.
    std::unique_ptr<QTemporaryDir> screenshot_dir;
    if (!shot.isEmpty()) {
        screenshot_dir = std::make_unique<QTemporaryDir>(QDir::temp().filePath("tokenscope-screenshot-XXXXXX"));
        if (!screenshot_dir->isValid()) {
            std::fprintf(stderr, "cannot make a private folder for the screenshot's conversation: %s\n",
                         qPrintable(screenshot_dir->errorString()));
            return 2;
        }
    }
    ConversationStore store(shot.isEmpty() ? default_conversation_path() : screenshot_dir->filePath("conversations.sqlite"));
    if (!store.problem().isEmpty())
        spdlog::warn("conversations: {}", store.problem().toStdString());
    EngineController engine;
    MainWindow window(&engine, &store);
    if (!shot.isEmpty()) {
        window.setDialogsEnabled(false);
        window.chatPanel()->newChat();
    }
    window.show();

    // Which model opens: the one named; for pictures and probes the default model (reproducible);
    // otherwise the user's last choice, else the chat model when installed, else the default model.
    QString path = parser.value(model);
    if (path.isEmpty()) {
        const bool scripted = !shot.isEmpty() || parser.isSet(latency) || parser.isSet(latency_paste);
        const QString last = QSettings().value("models/recent").toStringList().value(0);
        const auto found = scripted ? engine::find_default_model()
                                    : engine::find_startup_model(last.isEmpty() ? std::nullopt
                                                                                : std::optional<std::filesystem::path>(last.toStdString()));
        if (found)
            path = QString::fromStdString(found->string());
    }
    if (!path.isEmpty())
        window.openModel(path);

    if (shot.isEmpty() && parser.isSet(auto_send)) {
        auto sampling = window.chatPanel()->sampling();
        if (parser.isSet(max_tokens))
            sampling.max_tokens = parser.value(max_tokens).toInt();
        window.chatPanel()->setSampling(sampling);
        QObject::connect(&engine, &EngineController::modelLoaded, &window,
                         [&] { window.chatPanel()->send(parser.value(auto_send)); });
        if (parser.isSet(quit_after))
            QObject::connect(window.chatPanel(), &ChatPanel::replyFinished, &app, [&] { app.quit(); });
    }

    // The UI thread must never wait on the engine: a 5 ms timer measures how late the event loop
    // serves it while a reply streams.
    QElapsedTimer clock;
    qint64 last_tick = 0, worst_ms = 0, ticks = 0;
    QTimer probe;
    // Both probes: a 5 ms timer that records how late the event loop serves it.
    if (parser.isSet(latency_paste) || parser.isSet(latency)) {
        probe.setInterval(5);
        probe.setTimerType(Qt::PreciseTimer);
        QObject::connect(&probe, &QTimer::timeout, &app, [&] {
            const qint64 now = clock.elapsed();
            if (last_tick)
                worst_ms = std::max(worst_ms, now - last_tick - 5);
            last_tick = now;
            ++ticks;
        });
    }
    if (parser.isSet(latency_paste)) {
        // A long paste: prose, code and other scripts repeated to the length asked for.
        const QString unit = QStringLiteral("The lighthouse keeper climbed the stairs. def f(x): return x * 2  # Код 数字 "
                                            "émojis 🙂 and numbers 12345.\n");
        QString text;
        const int n = parser.value(latency_paste).toInt();
        while (text.size() < n)
            text += unit;
        text.truncate(n);
        QObject::connect(&engine, &EngineController::modelLoaded, &window, [&, text] {
            window.findChild<QDockWidget*>("dock-tokenizer")->raise();
            clock.start();
            probe.start();
            window.tokenizerPanel()->setText(text);
        });
        QObject::connect(window.tokenizerPanel(), &TokenizerPanel::rendered, &app, [&, n] {
            const auto current = window.tokenizerPanel()->current();
            if (!current || current->text.size() != n)
                return; // an earlier text's drawing, not the paste's
            probe.stop();
            std::printf("ui latency probe (paste): worst event-loop delay %lld ms while %d characters were tokenized and "
                        "drawn (%lld ms, %d tokens drawn)\n",
                        static_cast<long long>(worst_ms), n, static_cast<long long>(clock.elapsed()),
                        window.tokenizerPanel()->drawnTokens());
            app.quit();
        });
    }
    if (parser.isSet(latency)) {
        if (path.isEmpty()) {
            std::fprintf(stderr, "no model for the latency probe: pass --model or install the default model\n");
            return 2;
        }
        auto sampling = window.chatPanel()->sampling();
        sampling.temperature = 0.0f;
        sampling.max_tokens = 128;
        window.chatPanel()->setSampling(sampling);
        QObject::connect(&engine, &EngineController::modelLoaded, &window, [&] {
            window.chatPanel()->send("Write a long story about a lighthouse keeper and the sea.");
            clock.start();
            probe.start();
        });
        QObject::connect(window.chatPanel(), &ChatPanel::replyFinished, &app, [&](std::shared_ptr<const ReplyStats> s) {
            probe.stop();
            std::printf("ui latency probe: worst event-loop delay %lld ms over %d generated tokens (%lld timer ticks, "
                        "%.1f tokens/s)\n",
                        static_cast<long long>(worst_ms), s->generated_tokens, static_cast<long long>(ticks),
                        s->tokens_per_second);
            app.quit();
        });
    }

    if (!shot.isEmpty()) {
        if (path.isEmpty()) {
            std::fprintf(stderr, "no model for the screenshot: pass --model or install the default model\n");
            return 2;
        }
        auto sampling = window.chatPanel()->sampling();
        sampling.temperature = 0.0f; // reproducible pictures
        sampling.max_tokens = parser.value(max_tokens).toInt();
        window.chatPanel()->setSampling(sampling);
        const auto grab = [&] {
            QTimer::singleShot(100, &window, [&] {
                QWidget* target = panel_name == "main" ? static_cast<QWidget*>(&window) : window.panel(panel_name);
                const bool saved = save_picture(target, shot);
                std::fprintf(stderr, "%s %s\n", saved ? "saved" : "could not save", qPrintable(shot));
                app.exit(saved ? 0 : 1);
            });
        };
        if (panel_name == "tokenizer") {
            auto* dock = qobject_cast<QDockWidget*>(window.panel("tokenizer")->parentWidget());
            dock->setFloating(true);
            dock->resize(1100, 900);
            TokenizerPanel* tokenizer = window.tokenizerPanel();
            for (const QString& file : parser.values(compare))
                tokenizer->comparison()->addTokenizer(file);
            QObject::connect(&engine, &EngineController::modelLoaded, &window, [&, tokenizer] { tokenizer->setText(parser.value(prompt)); });
            // The text, then (with --edit) its edited version; grabbed once every comparison has caught up.
            auto edited = std::make_shared<bool>(!parser.isSet(edit));
            const auto maybe_grab = [&, tokenizer, dock, edited] {
                const QString final_text = parser.isSet(edit) ? parser.value(edit) : parser.value(prompt);
                if (!tokenizer->current() || tokenizer->current()->text != final_text || !*edited || !tokenizer->comparison()->settled() ||
                    int(tokenizer->comparison()->entries().size()) < int(parser.values(compare).size()))
                    return;
                *edited = false; // grab once
                tokenizer->selectToken(2);
                QTimer::singleShot(150, &window, [&, dock] {
                    const bool saved = save_picture(dock, shot);
                    std::fprintf(stderr, "%s %s\n", saved ? "saved" : "could not save", qPrintable(shot));
                    app.exit(saved ? 0 : 1);
                });
            };
            auto grabbed = std::make_shared<bool>(false);
            QObject::connect(tokenizer, &TokenizerPanel::updated, &window, [&, tokenizer, edited, maybe_grab, grabbed] {
                if (!*edited && !*grabbed && parser.isSet(edit) && tokenizer->current()->text == parser.value(prompt)) {
                    *grabbed = true;
                    *edited = false;
                    QTimer::singleShot(50, &window, [&, tokenizer, edited] {
                        *edited = true;
                        tokenizer->setText(parser.value(edit));
                    });
                    return;
                }
                maybe_grab();
            });
            QObject::connect(tokenizer->comparison(), &TokenizerComparison::changed, &window, maybe_grab);
            QObject::connect(tokenizer->comparison(), &TokenizerComparison::failed, &app, [&](const QString& m) {
                std::fprintf(stderr, "%s\n", qPrintable(m));
                app.exit(1);
            });
        } else if (panel_name == "stepper") {
            // A floating, roomy dock, so that the picture shows the whole panel.
            auto* dock = qobject_cast<QDockWidget*>(window.panel("stepper")->parentWidget());
            dock->setFloating(true);
            dock->resize(1280, 900);
            StepperPanel* stepper = window.stepperPanel();
            StepperSettings settings = stepper->settings();
            settings.sampling.temperature = 0.7f;
            settings.logit_lens = true;
            stepper->setSettings(settings);
            QObject::connect(&engine, &EngineController::modelLoaded, &window, [&, stepper] {
                stepper->setPrompt(parser.value(prompt));
                stepper->prefill();
            });
            // The script: n steps, Back, the runner-up forced, one more step.
            auto script = std::make_shared<int>(0);
            QObject::connect(stepper, &StepperPanel::stateChanged, &window, [&, stepper, script] {
                const int n = std::max(2, parser.value(steps).toInt());
                const int i = (*script)++;
                if (stepper->state() && stepper->state()->action == "error") {
                    std::fprintf(stderr, "stepper: %s\n", qPrintable(stepper->state()->error));
                    app.exit(1);
                } else if (i < n) {
                    stepper->step();
                } else if (i == n) {
                    stepper->back();
                } else if (i == n + 1) {
                    const auto& top = stepper->preview().stages.front().top;
                    stepper->step(top.size() > 1 ? top[1].id : -1);
                } else if (i == n + 2) {
                    stepper->step();
                } else if (i == n + 3) {
                    window.selection()->select(int(stepper->state()->tokens.size()) - 2);
                    QTimer::singleShot(100, &window, [&, dock] {
                        const bool saved = save_picture(dock, shot);
                        std::fprintf(stderr, "%s %s\n", saved ? "saved" : "could not save", qPrintable(shot));
                        app.exit(saved ? 0 : 1);
                    });
                }
            });
        } else if (panel_name == "attention") {
            auto* dock = qobject_cast<QDockWidget*>(window.panel("attention")->parentWidget());
            dock->setFloating(true);
            dock->resize(1280, 900);
            AttentionPanel* attention = window.attentionPanel();
            const QString which = parser.isSet(tab) ? parser.value(tab) : QString("head");
            const auto grab_attention = [&, dock] {
                QTimer::singleShot(300, &window, [&, dock] {
                    const bool saved = save_picture(dock, shot);
                    std::fprintf(stderr, "%s %s\n", saved ? "saved" : "could not save", qPrintable(shot));
                    app.exit(saved ? 0 : 1);
                });
            };
            QObject::connect(&engine, &EngineController::modelLoaded, &window, [&, attention, which] {
                if (which == "compare") {
                    attention->showHead(9, 0);
                    attention->compareBankExample();
                    return;
                }
                attention->showHead(which == "lines" ? 9 : 3, which == "lines" ? 0 : 2);
                attention->setPrompt(parser.value(prompt));
                if (which == "overview")
                    attention->captureAllLayers();
                else
                    attention->run();
            });
            QObject::connect(attention, &AttentionPanel::compared, &window, grab_attention);
            QObject::connect(attention, &AttentionPanel::captured, &window, [&, attention, which, grab_attention] {
                if (which == "grid" || which == "overview") {
                    attention->showTab(1);
                    if (which == "overview")
                        attention->setOverview(true);
                } else if (which == "lines") {
                    attention->showTab(2);
                }
                const int n = attention->currentHead() ? attention->currentHead()->n : 0;
                attention->selectCell(std::max(0, n - 1), -1);
                grab_attention();
            });
        } else if (panel_name == "library") {
            // The Model library dialog once its scan is done (every model found, its kind and type).
            auto* library = new ModelLibraryDialog(QSettings().value("models/recent").toStringList(), &window);
            QObject::connect(library, &ModelLibraryDialog::scanFinished, &window, [&, library] {
                QTimer::singleShot(200, &window, [&, library] {
                    const bool saved = save_picture(library, shot);
                    std::fprintf(stderr, "%s %s\n", saved ? "saved" : "could not save", qPrintable(shot));
                    app.exit(saved ? 0 : 1);
                });
            });
            library->show();
        } else if (panel_name == "kv" || panel_name == "timeline" || panel_name == "context") {
            auto* dock = qobject_cast<QDockWidget*>(window.panel(panel_name)->parentWidget());
            dock->setFloating(true);
            dock->resize(1280, panel_name == "timeline" ? 760 : 900);
            const auto grab_dock = [&, dock] {
                QTimer::singleShot(300, &window, [&, dock] {
                    const bool saved = save_picture(dock, shot);
                    std::fprintf(stderr, "%s %s\n", saved ? "saved" : "could not save", qPrintable(shot));
                    app.exit(saved ? 0 : 1);
                });
            };
            if (panel_name == "context") {
                ContextPanel* context = window.contextPanel();
                QObject::connect(&engine, &EngineController::modelLoaded, &window, [&, context, grab_dock] {
                    context->setWindow(1024);
                    context->setSystemPrompt("You are a concise assistant who explains how language models work.");
                    context->addTypedTurn(parser.value(prompt),
                                          "Sunlight scatters off air molecules; short blue wavelengths scatter most, so the sky "
                                          "looks blue from every direction.");
                    for (int i = 0; i < 6; ++i)
                        context->addSyntheticTurn(60, 140);
                    auto done = std::make_shared<bool>(false);
                    QObject::connect(context, &ContextPanel::simulated, &window, [context, grab_dock, done] {
                        if (!*done && context->counted()) {
                            *done = true;
                            grab_dock();
                        }
                    });
                });
            } else {
                // A real chat reply first: the KV cache and the timeline are its measurements.
                QObject::connect(&engine, &EngineController::modelLoaded, &window,
                                 [&] { window.chatPanel()->send(parser.value(prompt)); });
                QObject::connect(window.chatPanel(), &ChatPanel::replyFinished, &window, [&, grab_dock] {
                    if (panel_name == "timeline") {
                        window.selection()->select(window.timelinePanel()->timeline()->prompt_tokens + 3);
                        // The machine's peaks beside the run: measured now, after the reply.
                        QObject::connect(window.timelinePanel(), &TimelinePanel::peaksChanged, &window, grab_dock);
                        engine.probeMachine();
                        return;
                    }
                    const QString which = parser.value(tab);
                    if (which == "contents") {
                        QObject::connect(window.kvPanel(), &KvPanel::contentsShown, &window, grab_dock);
                        window.kvPanel()->showContents(3, 0, false);
                    } else if (which == "calculator") {
                        window.kvPanel()->showTab(2);
                        window.kvPanel()->selectPreset("Llama 3 8B");
                        // The example: 8,192 tokens in FP16, 64 sequences, an 80 GiB GPU with 16 GiB of weights.
                        window.kvPanel()->setCalculator(8192, 64, 1, false, true, 0.0, 80.0, 16.0);
                        // …and the memory planner on the loaded file.
                        QObject::connect(window.kvPanel(), &KvPanel::planned, &window, grab_dock);
                        window.kvPanel()->planFile(path);
                    } else {
                        grab_dock();
                    }
                });
            }
        } else {
            // The prompt, then each --follow-up after the reply before it; the picture after the last.
            auto queue = std::make_shared<QStringList>(QStringList{parser.value(prompt)} + parser.values(follow_up));
            QObject::connect(&engine, &EngineController::modelLoaded, &window,
                             [&, queue] { window.chatPanel()->send(queue->takeFirst()); });
            QObject::connect(window.chatPanel(), &ChatPanel::replyFinished, &window, [&, queue, grab] {
                if (queue->isEmpty())
                    grab();
                else
                    window.chatPanel()->send(queue->takeFirst());
            });
        }
        QObject::connect(&engine, &EngineController::loadFailed, &app, [&](const QString& m) {
            std::fprintf(stderr, "%s\n", qPrintable(m));
            app.exit(1);
        });
    }
    return app.exec();
}

} // namespace tokenscope::ui
