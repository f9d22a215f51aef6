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
#include "scripted/latency_probes.h"
#include "scripted/screenshot_script.h"
#include "storage/atomic_save.h"
#include "storage/conversation_store.h"
#include "widgets/attention_benchmark.h"
#include "widgets/model_library_dialog.h"

#include <QApplication>
#include <QBuffer>
#include <QCommandLineParser>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QSettings>
#include <QStandardPaths>
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

} // namespace

int run_app(int argc, char** argv)
{
    // --version needs no display (package tests run it headless).
    for (int i = 1; i < argc; ++i)
        if (std::string_view(argv[i]) == "--version") {
            std::printf("tokenscope %s\n", TOKENSCOPE_VERSION);
            return 0;
        }
    // Without a display Qt's xcb plugin aborts (exit 134): help is text and needs none, and a plain
    // start says what to do instead of crashing.
    const bool has_display =
        !qgetenv("DISPLAY").isEmpty() || !qgetenv("WAYLAND_DISPLAY").isEmpty() || !qgetenv("QT_QPA_PLATFORM").isEmpty();
    if (!has_display) {
        bool wants_help = false;
        for (int i = 1; i < argc; ++i) {
            const std::string_view arg(argv[i]);
            wants_help = wants_help || arg == "--help" || arg == "-h" || arg == "-?" || arg == "--help-all";
        }
        if (!wants_help) {
            std::fprintf(stderr, "tokenscope: no display (neither DISPLAY nor WAYLAND_DISPLAY is set). Run it in a "
                                 "desktop session, use tokenscope-cli, or set QT_QPA_PLATFORM=offscreen for "
                                 "--screenshot.\n");
            return 2;
        }
        qputenv("QT_QPA_PLATFORM", "offscreen"); // enough to print the help
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
    const QCommandLineOption screenshot("screenshot", "Render a panel after a real run, save it as PNG and exit.",
                                        "file");
    const QCommandLineOption panel("panel", "Panel for --screenshot: " + screenshot_panels().join(", ") + ".", "name",
                                   "main");
    const QCommandLineOption prompt("prompt", "Message sent before the screenshot.", "text",
                                    "Explain in two sentences why the sky is blue.");
    const QCommandLineOption size("size", "Screenshot size, WIDTHxHEIGHT: the window's (main) or the panel's.", "size");
    const QCommandLineOption scale("scale", "Device pixel ratio for the screenshot (e.g. 2).", "factor");
    const QCommandLineOption max_tokens("max-tokens", "Reply length for --screenshot.", "n", "48");
    const QCommandLineOption steps("steps",
                                   "Stepper screenshot: steps taken after Prefill (one of them undone and forced "
                                   "to the runner-up, to show a branch).",
                                   "n", "6");
    const QCommandLineOption compare(
        "compare", "Tokenizer screenshot: a GGUF or .tiktoken file to compare with (repeatable).", "file");
    const QCommandLineOption edit("edit", "Tokenizer screenshot: the prompt after an edit, to show what changed.",
                                  "text");
    const QCommandLineOption tab(
        "tab", "KV screenshot: live, contents or calculator; attention: head, grid, overview, lines or compare.",
        "name", "live");
    const QCommandLineOption bench_attention("bench-attention-view",
                                             "Time redraws of a 2,048 x 2,048 head view and exit (a benchmark).");
    const QCommandLineOption auto_send("auto-send", "Send this message as soon as the model is loaded.", "text");
    const QCommandLineOption quit_after("quit-after-reply", "Quit when the first reply is complete.");
    const QCommandLineOption latency_paste("latency-paste",
                                           "Paste this many characters into the tokenizer panel and print the worst "
                                           "event-loop delay until it is drawn (a benchmark).",
                                           "characters");
    const QCommandLineOption follow_up("follow-up",
                                       "For --screenshot --panel chat|main: another message, sent after the "
                                       "reply before it (repeatable).",
                                       "text");
    const QCommandLineOption latency(
        "latency-probe", "Generate 128 tokens and print the worst event-loop delay seen meanwhile (a benchmark).");
    const QCommandLineOption server("server",
                                    "Connect to a model served elsewhere (llama-server, vLLM, SGLang, Ollama, LM "
                                    "Studio) instead of opening one; the API key, if any, from $TOKENSCOPE_API_KEY.",
                                    "url");
    const QCommandLineOption server_model("server-model", "With --server: the served model to use.", "id");
    parser.addPositionalArgument("file", "A model (.gguf) to open, or a saved run (.tsrun) to show (File → Open run).",
                                 "[file]");
    parser.addOptions({verbose, model,     screenshot,      panel,     prompt,
                       size,    scale,     max_tokens,      steps,     compare,
                       edit,    tab,       bench_attention, auto_send, quit_after,
                       latency, follow_up, latency_paste,   server,    server_model});
    parser.process(app);

    setup_logging(parser.isSet(verbose));
    if (parser.isSet(bench_attention))
        return run_attention_view_benchmark();
    apply_theme(static_cast<Theme>(QSettings().value("ui/theme", 0).toInt()));

    const QString shot = parser.value(screenshot);
    const QString panel_name = parser.value(panel);
    if (!shot.isEmpty() && !screenshot_panels().contains(panel_name)) {
        std::fprintf(stderr, "panel '%s' is unknown: %s\n", qPrintable(panel_name),
                     qPrintable(screenshot_panels().join(", ")));
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
    ConversationStore store(shot.isEmpty() ? default_conversation_path()
                                           : screenshot_dir->filePath("conversations.sqlite"));
    if (!store.problem().isEmpty())
        spdlog::warn("conversations: {}", store.problem().toStdString());
    EngineController engine;
    MainWindow window(&engine, &store);
    window.setRemembersModels(shot.isEmpty() && !parser.isSet(latency) && !parser.isSet(latency_paste));
    if (!shot.isEmpty()) {
        window.setDialogsEnabled(false);
        window.chatPanel()->newChat();
    }
    window.show();

    // Which model opens: the one named; for pictures and probes the default model (reproducible);
    // otherwise the user's last choice, else the chat model when installed, else the default model.
    const QString given = parser.positionalArguments().value(0);
    const QString run_path = given.endsWith(".tsrun") ? given : QString();
    QString path = parser.value(model);
    if (path.isEmpty() && run_path.isEmpty())
        path = given;
    // A saved run is shown as it was saved: no model is loaded behind it (File → Open model loads one,
    // which starts the panels afresh).
    if (parser.isSet(server)) {
        remote::Endpoint endpoint;
        endpoint.base = QUrl::fromUserInput(parser.value(server));
        endpoint.api_key = qEnvironmentVariable("TOKENSCOPE_API_KEY");
        endpoint.model = parser.value(server_model);
        window.connectServer(endpoint);
    } else if (path.isEmpty() && run_path.isEmpty()) {
        const bool scripted = !shot.isEmpty() || parser.isSet(latency) || parser.isSet(latency_paste);
        const QString last = QSettings().value("models/recent").toStringList().value(0);
        const auto found =
            scripted ? engine::find_default_model()
                     : engine::find_startup_model(
                           last.isEmpty() ? std::nullopt : std::optional<std::filesystem::path>(last.toStdString()));
        if (found)
            path = QString::fromStdString(found->string());
    }
    if (!path.isEmpty() && !parser.isSet(server))
        window.openModel(path);
    // The tour is offered once, on a first start the user made (never for pictures or probes).
    if (shot.isEmpty() && !parser.isSet(latency) && !parser.isSet(latency_paste) && run_path.isEmpty())
        window.offerTourOnce();

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

    if (parser.isSet(latency_paste))
        probe_paste_latency(app, engine, window, parser.value(latency_paste).toInt());
    if (parser.isSet(latency)) {
        if (path.isEmpty()) {
            std::fprintf(stderr, "no model for the latency probe: pass --model or install the default model\n");
            return 2;
        }
        probe_reply_latency(app, engine, window);
    }

    if (!run_path.isEmpty() && shot.isEmpty())
        window.openRun(run_path);

    if (!shot.isEmpty()) {
        if (path.isEmpty() && run_path.isEmpty() && !parser.isSet(server)) {
            std::fprintf(stderr, "no model for the screenshot: pass --model or install the default model\n");
            return 2;
        }
        auto sampling = window.chatPanel()->sampling();
        sampling.temperature = 0.0f; // reproducible pictures
        sampling.max_tokens = parser.value(max_tokens).toInt();
        window.chatPanel()->setSampling(sampling);
        ScreenshotOptions o;
        o.file = shot;
        o.panel = panel_name;
        o.prompt = parser.value(prompt);
        o.tab = parser.isSet(tab) ? parser.value(tab) : QString();
        o.edit = parser.value(edit);
        o.compare = parser.values(compare);
        o.follow_ups = parser.values(follow_up);
        o.steps = parser.value(steps).toInt();
        if (parser.isSet(size)) {
            const QStringList wh = parser.value(size).split('x');
            o.size = wh.size() == 2 ? QSize(wh[0].toInt(), wh[1].toInt()) : QSize();
            if (!o.size.isValid() || o.size.width() < 200 || o.size.height() < 200 || o.size.width() > 8000 ||
                o.size.height() > 8000) {
                std::fprintf(stderr, "--size %s: give WIDTHxHEIGHT, each 200 to 8000 (e.g. 1280x800)\n",
                             qPrintable(parser.value(size)));
                return 2;
            }
            window.resize(o.size);
        }
        o.model_path = path;
        o.run_path = run_path;
        script_screenshot(app, engine, window, o);
    }
    return app.exec();
}

} // namespace tokenscope::ui
