// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_types.h"
#include "remote/remote_client.h"

#include <QMainWindow>
#include <QPointer>
#include <map>
#include <memory>
#include <vector>

class QLabel;
class QProgressBar;
class QPushButton;
class QMenu;
class QDialog;
class QComboBox;

namespace engine {
struct VulkanDeviceInfo;
struct CudaDeviceListing;
} // namespace engine

namespace tokenscope::ui {

class GuidedTour;

class AttentionPanel;
class ChatPanel;
class ContextPanel;
class KvPanel;
class LabPanel;
class TextPanel;
class ServingPanel;
class SpeculationPanel;
class ExpertsPanel;
class StepperPanel;
class TimelinePanel;
class TokenizerPanel;
class TokenSelection;
class ConversationStore;
class EngineController;
struct RunDocument;

enum class Theme { System, Light, Dark };
void apply_theme(Theme theme);

// The workspace: every panel is a dock that can be moved, stacked or closed, with the layout
// remembered between runs; a model bar says what is loaded and on which backend.
class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    MainWindow(EngineController* engine, ConversationStore* store, QWidget* parent = nullptr);
    ~MainWindow() override;

    void openModel(const QString& path);
    // File → Model library…: pick any GGUF found on this machine.
    void openModelLibrary();
    // File → Connect to server…, and the same without the dialog (--server, tests).
    void openConnectDialog();
    void connectServer(const remote::Endpoint& endpoint);
    // Scripted runs (screenshots, probes) report failures on stderr and must never wait on a dialog.
    void setDialogsEnabled(bool enabled) { m_dialogs = enabled; }
    // Scripted runs (screenshots, probes) load models the user did not choose: keep them out of the
    // recent list, which decides the model the next real start opens.
    void setRemembersModels(bool remember) { m_remember_models = remember; }
    ChatPanel* chatPanel() const { return m_chat; }
    TokenizerPanel* tokenizerPanel() const { return m_tokenizer; }
    StepperPanel* stepperPanel() const { return m_stepper; }
    KvPanel* kvPanel() const { return m_kv; }
    AttentionPanel* attentionPanel() const { return m_attention; }
    ContextPanel* contextPanel() const { return m_context; }
    TimelinePanel* timelinePanel() const { return m_timeline; }
    LabPanel* labPanel() const { return m_lab; }
    TextPanel* textPanel() const { return m_text; }
    ServingPanel* servingPanel() const { return m_serving; }
    SpeculationPanel* speculationPanel() const { return m_speculation; }
    ExpertsPanel* expertsPanel() const { return m_experts; }
    TokenSelection* selection() const { return m_selection; }
    QWidget* panel(const QString& name) const;
    // The Vulkan devices are listed in the background; true once they are in the backend picker.
    bool devicesListed() const { return m_devices_listed; }

    // Runs as documents (main_window_runs.cpp). What the panels show now, as a saved run would hold it.
    RunDocument currentRun() const;
    // What the run holds and the exact size its file will take (shown before saving).
    QString runSummary() const;
    quint64 runFileSize() const; // exactly what saveRun() will write now
    // File → Save run…'s question: runSummary() and Save… / Cancel (the caller owns the dialog).
    QDialog* saveRunQuestion();
    // Writes the run in the background (the model's SHA-256 is computed once per model); runSaved
    // reports the end. File → Save run… asks for the path after showing runSummary().
    void saveRun(const QString& path);
    // Reads a run in the background and shows it in every panel, with or without a model loaded;
    // runOpened reports the end (error empty when it worked).
    void openRun(const QString& path);
    // Stops waiting for the run being opened (its Cancel button): the window keeps what it shows and
    // runOpened reports "cancelled".
    void cancelOpenRun();
    // A widget of the model bar (a QToolBar) is shown and hidden through its action: its own
    // show()/hide() leave it unplaced (Qt's documented rule), which hid the Cancel buttons.
    static void setBarWidgetVisible(QWidget* widget, bool visible);
    const std::shared_ptr<const RunDocument>& openedRun() const { return m_run; }
    // Help → Tour (ui/tour): shows it from its first page; the window it returns stays until closed.
    GuidedTour* showTour();
    // On a first start (not in screenshot mode or tests: the entry point asks): the tour, offered.
    void offerTourOnce();

signals:
    void runSaved(const QString& path, const QString& error);
    void runOpened(const QString& path, const QString& error);

protected:
    void closeEvent(QCloseEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void buildMenus();
    void connectServerSignals(); // main_window_server.cpp
    void buildModelBar();
    void createPanels(); // main_window_panels.cpp
    void addPanel(const QString& name, const QString& title, QWidget* widget, Qt::DockWidgetArea area);
    void showModel(const std::shared_ptr<const ModelSummary>& m);
    // The model bar's text, and its tooltip: the same words whole (the bar may cut them), then `note`.
    void setModelBar(const QString& html, const QString& note = QString());
    void rememberRecent(const QString& path);
    void rebuildRecentMenu();
    void addCudaDevices(const engine::CudaDeviceListing& listing);
    void addVulkanDevices(const std::vector<engine::VulkanDeviceInfo>& devices);
    void selectSavedBackend();
    void showRun(std::shared_ptr<const RunDocument> run);
    void reportRunError(const QString& what, const QString& error);
    void endRunOpening();              // the busy bar and Cancel opening hidden, no open under way
    static QStringList savedBackend(); // the backend the next load uses ({kind, device})

    EngineController* m_engine;
    ConversationStore* m_store;
    bool m_dialogs = true;
    bool m_remember_models = true;
    ChatPanel* m_chat = nullptr;
    LabPanel* m_lab = nullptr;
    TextPanel* m_text = nullptr;
    ServingPanel* m_serving = nullptr;
    SpeculationPanel* m_speculation = nullptr;
    ExpertsPanel* m_experts = nullptr;
    TokenizerPanel* m_tokenizer = nullptr;
    StepperPanel* m_stepper = nullptr;
    KvPanel* m_kv = nullptr;
    AttentionPanel* m_attention = nullptr;
    ContextPanel* m_context = nullptr;
    TimelinePanel* m_timeline = nullptr;
    TokenSelection* m_selection = nullptr;
    QLabel* m_model_label = nullptr;
    QProgressBar* m_progress = nullptr;
    QComboBox* m_backend = nullptr;
    bool m_devices_listed = false;
    QString m_model_path;
    quint64 m_load_request = 0; // the load the Cancel button ends
    QPushButton* m_cancel = nullptr;
    QMenu* m_recent = nullptr;
    QMenu* m_view = nullptr;
    std::map<QString, QWidget*> m_panels;
    std::shared_ptr<const RunDocument> m_run; // the run last opened
    bool m_showing_run = false;               // no live result has replaced it since
    quint64 m_run_opening = 0;                // the open under way (0: none); a newer one or Cancel drops it
    QString m_run_opening_path;
    QPushButton* m_cancel_open = nullptr;
    QPointer<GuidedTour> m_tour;
    std::map<QString, QString> m_model_sha256; // model path → SHA-256, computed when a run is first saved
};

} // namespace tokenscope::ui
