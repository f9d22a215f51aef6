// SPDX-License-Identifier: GPL-3.0-or-later
// The window's panels: each made with the feature clients it reads (through the engine controller),
// docked, and linked where one hands work to another. Adding a panel is a few lines here.
#include "main_window.h"

#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "model/model_locator.h"
#include "panels/attention_panel.h"
#include "panels/chat_panel.h"
#include "panels/context_panel.h"
#include "panels/experts_panel.h"
#include "panels/kv_panel.h"
#include "panels/lab_heads_tab.h"
#include "panels/lab_panel.h"
#include "panels/serving_panel.h"
#include "panels/speculation_panel.h"
#include "panels/stepper_panel.h"
#include "panels/text_panel.h"
#include "panels/timeline_panel.h"
#include "panels/tokenizer_panel.h"
#include "widgets/panel_scroll.h"

#include <QDockWidget>
#include <QFile>

namespace tokenscope::ui {

void MainWindow::createPanels()
{
    m_chat = new ChatPanel(m_engine, m_store);
    addPanel("chat", tr("Chat"), m_chat, Qt::LeftDockWidgetArea);
    connect(m_chat, &ChatPanel::openInstructModelRequested, this, [this] {
        if (auto chat = engine::find_chat_model())
            openModel(QString::fromStdString(chat->string()));
        else
            openModelLibrary();
    });
    m_selection = new TokenSelection(this);
    m_tokenizer = new TokenizerPanel(m_engine, m_selection);
    addPanel("tokenizer", tr("Tokenizer"), m_tokenizer, Qt::RightDockWidgetArea);
    m_stepper = new StepperPanel(m_engine, m_selection);
    addPanel("stepper", tr("Decode stepper"), m_stepper, Qt::RightDockWidgetArea);
    m_attention = new AttentionPanel(m_engine, m_selection);
    addPanel("attention", tr("Attention"), m_attention, Qt::RightDockWidgetArea);
    m_kv = new KvPanel(m_engine, m_selection);
    addPanel("kv", tr("KV cache"), m_kv, Qt::RightDockWidgetArea);
    connect(m_kv, &KvPanel::cacheTypesApplied, this, [this] { // the model again, with the new cache
        if (!m_model_path.isEmpty() && !m_engine->remote())
            openModel(m_model_path);
    });
    m_context = new ContextPanel(m_engine);
    addPanel("context", tr("Context window"), m_context, Qt::RightDockWidgetArea);
    m_timeline = new TimelinePanel(m_engine, m_selection);
    addPanel("timeline", tr("Timeline"), m_timeline, Qt::RightDockWidgetArea);
    m_text = new TextPanel(m_engine);
    addPanel("text", tr("Text analysis"), m_text, Qt::RightDockWidgetArea);
    m_lab = new LabPanel(m_engine);
    addPanel("lab", tr("Lab"), m_lab, Qt::RightDockWidgetArea);
    m_serving = new ServingPanel(m_engine);
    addPanel("serving", tr("Serving"), m_serving, Qt::RightDockWidgetArea);
    m_speculation = new SpeculationPanel(m_engine);
    addPanel("speculation", tr("Speculation"), m_speculation, Qt::RightDockWidgetArea);
    m_experts = new ExpertsPanel(m_engine);
    addPanel("experts", tr("Experts"), m_experts, Qt::RightDockWidgetArea);
    connect(m_speculation, &SpeculationPanel::stepperPromptWanted, this, [this] {
        const StepperSettings s = m_stepper->settings();
        m_speculation->setPrompt(m_stepper->promptText(), s.greedy ? 0.0 : s.sampling.temperature);
    });
    connect(m_stepper, &StepperPanel::attributeRequested, this, [this](const std::vector<int32_t>& ids, int token) {
        if (auto* dock = findChild<QDockWidget*>("dock-lab")) {
            dock->show();
            dock->raise();
        }
        m_lab->attribute(QString(), ids, token);
    });
    connect(m_text, &TextPanel::stepperRequested, this, [this](const std::vector<int32_t>& ids, const QString& text) {
        if (auto* dock = findChild<QDockWidget*>("dock-stepper")) {
            dock->show();
            dock->raise();
        }
        m_stepper->prefillTokens(ids, text);
    });
    connect(m_attention, &AttentionPanel::headAblationToggled, this, [this](int layer, int head) {
        if (auto* dock = findChild<QDockWidget*>("dock-lab")) {
            dock->show();
            dock->raise();
        }
        m_lab->showTab(2);
        m_lab->headsTab()->toggleHead(layer, head);
    });
    connect(m_stepper, &StepperPanel::stateChanged, this, [this] {
        std::vector<int32_t> ids;
        if (const auto& s = m_stepper->state(); s && s->error.isEmpty())
            for (const StepperToken& t : s->tokens)
                ids.push_back(t.id);
        m_lab->headsTab()->setStepperSequence(std::move(ids), m_stepper->preview().token);
    });
}

void MainWindow::addPanel(const QString& name, const QString& title, QWidget* widget, Qt::DockWidgetArea area)
{
    auto* dock = new QDockWidget(title, this);
    dock->setObjectName("dock-" + name);
    // "What is this?" (Help menu, Shift+F1, then a click anywhere in the panel): a short text bundled
    // with the app (resources/help), from the README's section on the panel.
    QFile help(":/help/" + name + ".html");
    if (help.open(QIODevice::ReadOnly)) {
        const QString text = QString::fromUtf8(help.readAll());
        widget->setWhatsThis(text);
        dock->setWhatsThis(text);
    }
    // A panel narrower or shorter than its controls need scrolls rather than widening the window past
    // a 1280×800 screen (the docks beside each other added their minimum widths up).
    auto* scroll = new PanelScroll(widget);
    scroll->setObjectName("scroll-" + name);
    scroll->setWhatsThis(widget->whatsThis());
    dock->setWidget(scroll);
    addDockWidget(area, dock);
    m_panels[name] = widget;
}

} // namespace tokenscope::ui
