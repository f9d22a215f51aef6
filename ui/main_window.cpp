// SPDX-License-Identifier: GPL-3.0-or-later
#include "main_window.h"
#include "bridge/analysis_client.h"
#include "bridge/inspection_client.h"
#include "bridge/lab_client.h"
#include "bridge/stepper_client.h"
#include "tour/guided_tour.h"

#include "backend/cuda/cuda_backend.h"
#include "bridge/background.h"
#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "bridge/vulkan_devices.h"
#include "model/model_locator.h"
#include "panels/attention_panel.h"
#include "panels/chat_panel.h"
#include "panels/context_panel.h"
#include "panels/kv_panel.h"
#include "panels/lab_heads_tab.h"
#include "panels/lab_panel.h"
#include "panels/stepper_panel.h"
#include "panels/text_panel.h"
#include "panels/timeline_panel.h"
#include "panels/tokenizer_panel.h"
#include "storage/conversation_store.h"
#include "widgets/count_text.h"
#include "widgets/model_library_dialog.h"

#include "backend/vulkan/vulkan_backend.h"

#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QLocale>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPalette>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QStandardItemModel>
#include <QStatusBar>
#include <QStyle>
#include <QStyleFactory>
#include <QTextDocument>
#include <QThreadPool>
#include <QToolBar>
#include <QWhatsThis>
#include <memory>

namespace tokenscope::ui {

namespace {

// The model bar's line: longer than a 1280-pixel window, so it takes the toolbar's remaining room
// and is cut at its end there (the tooltip holds it whole) rather than asking for its whole width —
// which the toolbar answers by hiding it in its overflow menu, or the window by growing past the
// screen.
class ModelBarLabel : public QLabel {
public:
    ModelBarLabel() { setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred); }
    QSize sizeHint() const override { return {fontMetrics().averageCharWidth() * 24, QLabel::sizeHint().height()}; }
    QSize minimumSizeHint() const override { return sizeHint(); }
};

} // namespace

void apply_theme(Theme theme)
{
    // Qt 6.4 has no colour-scheme API: "System" follows the lightness of the platform's own palette,
    // read once before this function first replaces it.
    static const bool platform_is_dark = QApplication::palette().color(QPalette::Window).lightness() < 128;
    QApplication::setStyle(QStyleFactory::create("Fusion"));
    if (theme == Theme::System)
        theme = platform_is_dark ? Theme::Dark : Theme::Light;
    QPalette p;
    if (theme == Theme::Dark) {
        const QColor window(37, 39, 43), base(28, 30, 33), text(226, 228, 232), accent(95, 160, 255);
        p.setColor(QPalette::Window, window);
        p.setColor(QPalette::WindowText, text);
        p.setColor(QPalette::Base, base);
        p.setColor(QPalette::AlternateBase, window);
        p.setColor(QPalette::Text, text);
        p.setColor(QPalette::Button, window);
        p.setColor(QPalette::ButtonText, text);
        p.setColor(QPalette::Highlight, accent);
        p.setColor(QPalette::HighlightedText, Qt::black);
        p.setColor(QPalette::ToolTipBase, base);
        p.setColor(QPalette::ToolTipText, text);
        p.setColor(QPalette::PlaceholderText, QColor(140, 144, 150));
        p.setColor(QPalette::Disabled, QPalette::Text, QColor(110, 113, 118));
        p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(110, 113, 118));
    } else {
        p = QApplication::style()->standardPalette();
    }
    QApplication::setPalette(p);
}

namespace {

QString human_size(quint64 bytes)
{
    return QLocale().formattedDataSize(qint64(bytes), 1, QLocale::DataSizeTraditionalFormat);
}

} // namespace

MainWindow::MainWindow(EngineController* engine, ConversationStore* store, QWidget* parent)
    : QMainWindow(parent), m_engine(engine), m_store(store)
{
    setWindowTitle("Tokenscope");
    setObjectName("MainWindow");
    setAcceptDrops(true);
    setDockNestingEnabled(true);
    resize(1280, 820);

    // The KV cache types chosen before (the KV panel's Quantized cache tab), for every load.
    const auto saved_type = [](const char* key) {
        return engine::parse_kv_cache_type(QSettings().value(key, "F16").toString().toStdString())
            .value_or(engine::GgmlType::F16);
    };
    m_engine->setKvCacheTypes({saved_type("engine/cache_type_k"), saved_type("engine/cache_type_v")});
    buildModelBar();
    createPanels();
    auto docks = findChildren<QDockWidget*>();
    for (int i = 2; i < docks.size(); ++i)
        tabifyDockWidget(docks[1], docks[i]);
    docks[1]->raise();
    buildMenus();

    QSettings settings;
    restoreGeometry(settings.value("window/geometry").toByteArray());
    restoreState(settings.value("window/state").toByteArray());

    connect(engine, &EngineController::loadProgress, this, [this](int percent, const QString& what) {
        setBarWidgetVisible(m_progress, percent < 100);
        setBarWidgetVisible(m_cancel, percent < 100);
        m_progress->setValue(percent);
        statusBar()->showMessage(what);
    });
    connect(engine, &EngineController::modelLoaded, this, [this](std::shared_ptr<const ModelSummary> m) {
        setBarWidgetVisible(m_progress, false);
        setBarWidgetVisible(m_cancel, false);
        showModel(m);
        if (!m->remote && m_remember_models)
            rememberRecent(m->path);
        statusBar()->showMessage(m->backend_note.isEmpty()
                                     ? tr("Loaded %1 on %2").arg(m->name, m->backend)
                                     : tr("Loaded %1 on %2 — %3").arg(m->name, m->backend, m->backend_note),
                                 m->backend_note.isEmpty() ? 5000 : 15000);
    });
    connectServerSignals();
    connect(engine, &EngineController::loadFailed, this, [this](const QString& message) {
        setBarWidgetVisible(m_progress, false);
        setBarWidgetVisible(m_cancel, false);
        // The bar said "Loading X…": back to the model still loaded (a failed load keeps it), or none.
        if (const auto loaded = m_engine->model()) {
            showModel(loaded);
            m_model_path = loaded->path;
        } else {
            setModelBar(tr("  No model loaded — %1 could not be loaded; open another .gguf file or drop one "
                           "here.")
                            .arg(QFileInfo(m_model_path).fileName().toHtmlEscaped()));
        }
        statusBar()->showMessage(tr("The model could not be loaded"), 8000);
        if (m_dialogs) {
            // The message quotes the file's name and metadata: plain text, never rich text.
            QMessageBox box(QMessageBox::Warning, tr("Cannot load the model"), message, QMessageBox::Ok, this);
            box.setTextFormat(Qt::PlainText);
            box.exec();
        }
    });
    // A live result replaces what an opened run showed: a run saved from then on is the live one.
    const auto live = [this] { m_showing_run = false; };
    connect(&engine->stepper(), &StepperClient::stepperState, this, live);
    connect(&engine->inspection(), &InspectionClient::attentionReady, this, live);
    connect(&engine->analysis(), &AnalysisClient::textAnalyzed, this, live);
    connect(&engine->lab(), &LabClient::patchingReady, this, live);
    connect(&engine->lab(), &LabClient::attributionReady, this, live);
    connect(&engine->lab(), &LabClient::headsReady, this, live);
    connect(&engine->lab(), &LabClient::ablationReady, this, live);
    connect(&engine->lab(), &LabClient::steeringReady, this, live);
}

MainWindow::~MainWindow() = default;

void MainWindow::buildModelBar()
{
    auto* bar = addToolBar(tr("Model"));
    bar->setObjectName("ModelBar");
    bar->setMovable(false);
    auto* open = new QPushButton(tr("Open model…"));
    connect(open, &QPushButton::clicked, this, [this] {
        const QString path =
            QFileDialog::getOpenFileName(this, tr("Open a GGUF model"), {}, tr("GGUF models (*.gguf);;All files (*)"));
        if (!path.isEmpty())
            openModel(path);
    });
    bar->addWidget(open);
    // The compute backend: the CPU, any CUDA device the NVIDIA driver lists, any Vulkan device the
    // loader lists, or auto (a CUDA device, else a Vulkan GPU, else the CPU). Changing it reloads the
    // model there.
    m_backend = new QComboBox;
    m_backend->setObjectName("backendPicker");
    // Device entries arrive after the first show (listed in the background): the picker grows to
    // them, so that "…, exact" stays readable.
    m_backend->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_backend->addItem(tr("CPU"), QStringList{"cpu", "-1"});
    m_backend->setItemData(0,
                           tr("The CPU, summing as llama.cpp does by default: on a CPU with AVX2 it repacks Q4_0, "
                              "IQ4_NL and Q4_K matrices and sums them in another order, and its attention is flash "
                              "attention (-fa auto, which a CPU resolves to on)"),
                           Qt::ToolTipRole);
    m_backend->addItem(tr("CPU, plain order"), QStringList{"cpu-plain", "-1"});
    m_backend->setItemData(1,
                           tr("The CPU, summing as llama.cpp does with --no-repack -fa off (its plain order for "
                              "every matrix, attention without flash attention)"),
                           Qt::ToolTipRole);
    m_backend->addItem(tr("CPU, deterministic"), QStringList{"cpu-deterministic", "-1"});
    m_backend->setItemData(2,
                           tr("The CPU with batch-invariant sums: a token's logits are the same bits whether it is "
                              "evaluated alone, in a prompt chunk or in a batch of any size (no longer llama.cpp's "
                              "order, which depends on the batch size; `tokenscope-cli bench --deterministic` "
                              "measures the cost)"),
                           Qt::ToolTipRole);
    m_backend->addItem(tr("Auto"), QStringList{"auto", "-1"});
    m_backend->setItemData(3, tr("A CUDA device when one is usable, else a Vulkan GPU, else the CPU"), Qt::ToolTipRole);
    selectSavedBackend();
    // Asking the Vulkan loader (30–130 ms) and the CUDA module for their devices: off the UI thread,
    // not in start-up.
    run_in_background(
        this, [] { return std::make_pair(engine::list_cuda_devices(), vulkan_devices()); },
        [](MainWindow& self, std::pair<engine::CudaDeviceListing, std::vector<engine::VulkanDeviceInfo>> devices) {
            self.addCudaDevices(devices.first);
            self.addVulkanDevices(devices.second);
        });
    connect(m_backend, &QComboBox::activated, this, [this] {
        QSettings().setValue("engine/backend", m_backend->currentData().toStringList());
        if (!m_model_path.isEmpty())
            openModel(m_model_path);
    });
    auto* backendLabel = new QLabel(tr("Backend"));
    backendLabel->setContentsMargins(6, 0, 6, 0); // room on both sides, not spaces in the words
    bar->addWidget(backendLabel);
    bar->addWidget(m_backend);
    m_progress = new QProgressBar;
    m_progress->setMaximumWidth(200);
    bar->addWidget(m_progress)->setVisible(false);
    m_cancel = new QPushButton(tr("Cancel"));
    connect(m_cancel, &QPushButton::clicked, this, [this] { m_engine->cancel(m_load_request); }); // the load only
    bar->addWidget(m_cancel)->setVisible(false);
    m_cancel_open = new QPushButton(tr("Cancel opening"));
    m_cancel_open->setObjectName("cancel-open-run");
    connect(m_cancel_open, &QPushButton::clicked, this, &MainWindow::cancelOpenRun);
    bar->addWidget(m_cancel_open)->setVisible(false);
    // The label last: a long one (a saved run's) is cut, not the progress and its Cancel buttons.
    m_model_label = new ModelBarLabel;
    m_model_label->setObjectName("modelBarLabel");
    setModelBar(tr("  No model loaded — open a .gguf file or drop one here."));
    m_model_label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    bar->addWidget(m_model_label);
}

GuidedTour* MainWindow::showTour()
{
    if (!m_tour) {
        m_tour = new GuidedTour(this, m_engine);
        m_tour->setAttribute(Qt::WA_DeleteOnClose);
        m_tour->move(mapToGlobal(QPoint(width() - m_tour->sizeHint().width() - 40, 80)));
    }
    m_tour->showStep(0);
    m_tour->show();
    m_tour->raise();
    return m_tour;
}

void MainWindow::offerTourOnce()
{
    QSettings settings;
    if (settings.value("tour/offered").toBool())
        return;
    settings.setValue("tour/offered", true);
    showTour();
}

void MainWindow::setBarWidgetVisible(QWidget* widget, bool visible)
{
    if (auto* bar = qobject_cast<QToolBar*>(widget->parentWidget()))
        for (QAction* a : bar->actions())
            if (bar->widgetForAction(a) == widget)
                a->setVisible(visible);
}

void MainWindow::addCudaDevices(const engine::CudaDeviceListing& listing)
{
    for (const engine::CudaDeviceInfo& d : listing.devices) {
        const QString name = QString::fromStdString(d.name);
        m_backend->addItem(tr("CUDA: %1").arg(name), QStringList{"cuda", QString::number(d.index)});
        m_backend->setItemData(m_backend->count() - 1,
                               tr("%1, compute capability %2.%3, %4 MiB device memory; the CPU backend's operations "
                                  "in its order, on the GPU")
                                   .arg(name)
                                   .arg(d.compute_major)
                                   .arg(d.compute_minor)
                                   .arg(numberText(qint64(d.total_bytes >> 20))),
                               Qt::ToolTipRole);
    }
    if (listing.devices.empty()) { // listed, greyed out, with the reason: where CUDA would be
        m_backend->addItem(tr("CUDA: unavailable"), QStringList{"cuda", "-1"});
        m_backend->setItemData(m_backend->count() - 1, QString::fromStdString(listing.why_unavailable),
                               Qt::ToolTipRole);
        if (auto* model = qobject_cast<QStandardItemModel*>(m_backend->model()))
            model->item(m_backend->count() - 1)->setEnabled(false);
    }
}

void MainWindow::addVulkanDevices(const std::vector<engine::VulkanDeviceInfo>& devices)
{
    // Each device in the default f32 arithmetic, and where it has 64-bit floats once more in the exact
    // arithmetic (bit-equal to the CPU backend, slow on GPUs).
    for (const engine::VulkanDeviceInfo& d : devices) {
        for (const bool exact : {false, true}) {
            if (exact && (!d.usable || !d.float64))
                continue;
            const QString name = QString::fromStdString(d.name), type = QString::fromStdString(d.type);
            // the arithmetic first: a long device name may be cut at the toolbar's end
            m_backend->addItem(exact ? tr("Vulkan exact: %1").arg(name) : tr("Vulkan: %1").arg(name),
                               QStringList{exact ? "vulkan-exact" : "vulkan", QString::number(d.index)});
            const int i = m_backend->count() - 1;
            const QString arithmetic =
                exact ? tr("exact arithmetic: 64-bit floats, results bit-equal to the CPU backend's (slow on GPUs)")
                      : tr("f32 arithmetic (the default): the CPU backend's operations in f32, fast on GPUs");
            m_backend->setItemData(i,
                                   d.usable ? tr("%1 (%2), driver %3, %4 MiB device memory; %5")
                                                  .arg(name, type, QString::fromStdString(d.driver))
                                                  .arg(numberText(qint64(d.device_local_bytes >> 20)))
                                                  .arg(arithmetic)
                                            : QString::fromStdString(d.why_not),
                                   Qt::ToolTipRole);
            if (!d.usable)
                if (auto* model = qobject_cast<QStandardItemModel*>(m_backend->model()))
                    model->item(i)->setEnabled(false);
        }
    }
    selectSavedBackend();
    m_devices_listed = true;
}

void MainWindow::selectSavedBackend()
{
    const int i = m_backend->findData(savedBackend());
    m_backend->setCurrentIndex(i >= 0 ? i : 0);
}

QStringList MainWindow::savedBackend()
{
    return QSettings().value("engine/backend", QStringList{"cpu", "-1"}).toStringList();
}

void MainWindow::buildMenus()
{
    auto* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open model…"), QKeySequence::Open, this, [this] {
        const QString path =
            QFileDialog::getOpenFileName(this, tr("Open a GGUF model"), {}, tr("GGUF models (*.gguf);;All files (*)"));
        if (!path.isEmpty())
            openModel(path);
    });
    file->addAction(tr("Model &library…"), QKeySequence("Ctrl+L"), this, &MainWindow::openModelLibrary);
    file->addAction(tr("Connect to &server…"), QKeySequence("Ctrl+Shift+K"), this, &MainWindow::openConnectDialog);
    m_recent = file->addMenu(tr("Open &recent"));
    rebuildRecentMenu();
    file->addSeparator();
    file->addAction(tr("Open r&un…"), QKeySequence("Ctrl+Shift+O"), this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Open a saved run"), {},
                                                          tr("Tokenscope runs (*.tsrun);;All files (*)"));
        if (!path.isEmpty())
            openRun(path);
    });
    file->addAction(tr("&Save run…"), QKeySequence("Ctrl+Shift+S"), this, [this] {
        const std::unique_ptr<QDialog> question(saveRunQuestion());
        if (question->exec() != QDialog::Accepted)
            return;
        QString path = QFileDialog::getSaveFileName(this, tr("Save run"), {}, tr("Tokenscope runs (*.tsrun)"));
        if (path.isEmpty())
            return;
        if (!path.endsWith(".tsrun"))
            path += ".tsrun";
        saveRun(path);
    });
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    m_view = menuBar()->addMenu(tr("&View"));
    for (auto* dock : findChildren<QDockWidget*>())
        m_view->addAction(dock->toggleViewAction());
    m_view->addSeparator();
    auto* themes = m_view->addMenu(tr("&Theme"));
    auto* group = new QActionGroup(this);
    const int current = QSettings().value("ui/theme", 0).toInt();
    const std::pair<QString, Theme> options[] = {
        {tr("System"), Theme::System}, {tr("Light"), Theme::Light}, {tr("Dark"), Theme::Dark}};
    for (const auto& [name, theme] : options) {
        QAction* a = themes->addAction(name);
        a->setCheckable(true);
        a->setChecked(int(theme) == current);
        group->addAction(a);
        connect(a, &QAction::triggered, this, [t = theme] {
            QSettings().setValue("ui/theme", int(t));
            apply_theme(t);
        });
    }
    auto* help = menuBar()->addMenu(tr("&Help"));
    QAction* whats_this = QWhatsThis::createAction(this);
    whats_this->setText(tr("&What is this?"));
    whats_this->setObjectName("whats-this");
    help->addAction(whats_this);
    QAction* tour = help->addAction(tr("&Tour: how a model writes"), this, [this] { showTour(); });
    tour->setObjectName("tour");
    help->addAction(tr("&About Tokenscope"), this, [this] {
        QMessageBox::about(this, tr("About Tokenscope"),
                           tr("<b>Tokenscope %1</b><br>Watch a language model generate, token by token, on your own "
                              "machine.<br>GPL-3.0-or-later.")
                               .arg(QApplication::applicationVersion()));
    });
}

QWidget* MainWindow::panel(const QString& name) const
{
    auto it = m_panels.find(name);
    return it == m_panels.end() ? nullptr : it->second;
}

void MainWindow::openModelLibrary()
{
    const auto loaded = m_engine->model();
    ModelLibraryDialog dialog(QSettings().value("models/recent").toStringList(),
                              loaded && !loaded->remote ? loaded->path : QString(), this);
    if (dialog.exec() == QDialog::Accepted)
        openModel(dialog.selectedPath());
}

void MainWindow::openModel(const QString& path)
{
    setModelBar(tr("  Loading %1…").arg(QFileInfo(path).fileName().toHtmlEscaped()));
    m_model_path = path;
    const QStringList backend = savedBackend();
    m_load_request = m_engine->loadModel(path, 0, 4096, backend.value(0, "cpu"), backend.value(1, "-1").toInt());
}

void MainWindow::setModelBar(const QString& html, const QString& note)
{
    m_model_label->setText(html);
    QTextDocument doc;
    doc.setHtml(html);
    const QString whole = doc.toPlainText().trimmed();
    m_model_label->setToolTip(note.isEmpty() ? whole : whole + "\n\n" + note);
}

void MainWindow::showModel(const std::shared_ptr<const ModelSummary>& m)
{
    if (m->remote) {
        setModelBar(tr("  <b>%1</b> · served by %2 at %3 · context %4%5 · chat: %6 · attention, KV "
                       "contents and the lab need a model on this machine")
                        .arg(m->name.toHtmlEscaped(), m->server_kind.toHtmlEscaped(), m->server_url.toHtmlEscaped())
                        .arg(m->n_ctx ? numberText(m->n_ctx) : tr("unknown"))
                        .arg(m->context_length && m->context_length != m->n_ctx
                                 ? tr(" (model %1)").arg(numberText(m->context_length))
                                 : QString())
                        .arg(m->chat_format.toHtmlEscaped()));
        setWindowTitle(tr("%1 on %2 — Tokenscope").arg(m->name, m->server_url));
        return;
    }
    // a mixture of experts: every parameter, and those a token goes through
    const QString parameters = m->n_expert > 0 ? tr("%1 M parameters (%2 M active: %3 of %4 experts)")
                                                     .arg(decimalText(double(m->parameters) / 1e6, 0),
                                                          decimalText(double(m->active_parameters) / 1e6, 0))
                                                     .arg(m->n_expert_used)
                                                     .arg(m->n_expert)
                                               : tr("%1 M parameters").arg(decimalText(double(m->parameters) / 1e6, 0));
    setModelBar(tr("  <b>%1</b> · %2 · %3 · %4 · %5 · context %6 (model %7) · %8 · chat: %9")
                        .arg(m->name.toHtmlEscaped(), m->architecture.toHtmlEscaped(), parameters)
                        .arg(m->quant_types, human_size(m->file_size))
                        .arg(numberText(m->n_ctx), numberText(m->context_length))
                        .arg(m->backend, m->chat_format.toHtmlEscaped()) +
                    (m->chat_template_notice.isEmpty() ? QString() : tr(" <span style='color:#b45309'>⚠</span>")),
                m->chat_template_notice);
    setWindowTitle(tr("%1 — Tokenscope").arg(m->name));
}

void MainWindow::rememberRecent(const QString& path)
{
    QSettings settings;
    QStringList recent = settings.value("models/recent").toStringList();
    recent.removeAll(path);
    recent.prepend(path);
    while (recent.size() > 10)
        recent.removeLast();
    settings.setValue("models/recent", recent);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu()
{
    m_recent->clear();
    const QStringList recent = QSettings().value("models/recent").toStringList();
    for (const QString& path : recent)
        m_recent->addAction(QFileInfo(path).fileName(), this, [this, path] { openModel(path); })->setToolTip(path);
    m_recent->setEnabled(!recent.isEmpty());
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    QSettings settings;
    settings.setValue("window/geometry", saveGeometry());
    settings.setValue("window/state", saveState());
    m_engine->stop();
    QMainWindow::closeEvent(event);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event)
{
    for (const QUrl& url : event->mimeData()->urls())
        if (url.isLocalFile()) {
            event->acceptProposedAction();
            return;
        }
}

void MainWindow::dropEvent(QDropEvent* event)
{
    for (const QUrl& url : event->mimeData()->urls())
        if (url.isLocalFile()) {
            const QString path = url.toLocalFile();
            if (path.endsWith(".tsrun"))
                openRun(path);
            else
                openModel(path);
            return;
        }
}

} // namespace tokenscope::ui
