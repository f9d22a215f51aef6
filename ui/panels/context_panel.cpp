// SPDX-License-Identifier: GPL-3.0-or-later
#include "panels/context_panel.h"
#include "bridge/chat_client.h"
#include "widgets/count_text.h"
#include "widgets/flow_layout.h"

#include "bridge/engine_controller.h"
#include "widgets/chart_style.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QListWidget>
#include <QLocale>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QStackedBarSeries>
#include <QVBoxLayout>
#include <QValueAxis>

namespace tokenscope::ui {

ContextPanel::ContextPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    auto* intro =
        new QLabel(tr("A chat model has no memory between requests: <b>every turn re-sends the whole history</b>. "
                      "The input grows with each turn until it no longer fits the context window, and something "
                      "must be left out. With prefix caching, the server recomputes only what changed."));
    intro->setWordWrap(true);
    layout->addWidget(intro);

    auto* controls = new FlowLayout; // wraps in a narrow dock
    m_window = new QComboBox;
    m_window->addItem("8K (8,192)", 8192);
    m_window->addItem("32K (32,768)", 32768);
    m_window->addItem("128K (131,072)", 131072);
    m_window->addItem(tr("small (1,024)"), 1024);
    m_window->setCurrentIndex(3);
    controls->addWidget(labelled(tr("Context window"), m_window));
    m_policy = new QComboBox;
    for (auto p : {engine::OverflowPolicy::DropOldest, engine::OverflowPolicy::KeepSystemPrompt,
                   engine::OverflowPolicy::SlidingWindow})
        m_policy->addItem(QString::fromUtf8(engine::overflow_policy_name(p).data()), int(p));
    m_policy->setCurrentIndex(1);
    controls->addWidget(labelled(tr("When it overflows"), m_policy));
    layout->addLayout(controls);

    auto* split = new QSplitter(Qt::Horizontal);
    auto* left = new QWidget;
    auto* form = new QFormLayout(left);
    m_system = new QLineEdit;
    m_system->setObjectName("contextSystem");
    m_system->setPlaceholderText(tr("optional system prompt"));
    form->addRow(tr("System"), m_system);
    m_user = new QPlainTextEdit;
    m_user->setMaximumHeight(fontMetrics().height() * 4);
    m_user->setPlaceholderText(tr("a user message"));
    form->addRow(tr("User"), m_user);
    m_reply = new QPlainTextEdit;
    m_reply->setMaximumHeight(fontMetrics().height() * 4);
    m_reply->setPlaceholderText(tr("the assistant's reply"));
    form->addRow(tr("Reply"), m_reply);
    auto* add_typed = new QPushButton(tr("Add typed turn (counted by the model's tokenizer)"));
    form->addRow(QString(), add_typed);
    auto* synthetic = new QHBoxLayout;
    m_synthetic_user = new QSpinBox;
    m_synthetic_user->setRange(1, 1000000);
    m_synthetic_user->setValue(120);
    m_synthetic_reply = new QSpinBox;
    m_synthetic_reply->setRange(0, 1000000);
    m_synthetic_reply->setValue(250);
    synthetic->addWidget(m_synthetic_user);
    synthetic->addWidget(new QLabel(tr("+")));
    synthetic->addWidget(m_synthetic_reply);
    auto* add_synthetic = new QPushButton(tr("Add"));
    synthetic->addWidget(add_synthetic);
    form->addRow(tr("Synthetic (tokens)"), synthetic);
    auto* buttons = new QHBoxLayout;
    auto* ten = new QPushButton(tr("Add 10 synthetic turns"));
    auto* clear = new QPushButton(tr("Clear"));
    buttons->addWidget(ten);
    buttons->addWidget(clear);
    form->addRow(QString(), buttons);
    m_list = new QListWidget;
    m_list->setObjectName("contextRequests");
    // long request lines wrap rather than run off the right edge
    m_list->setWordWrap(true);
    m_list->setTextElideMode(Qt::ElideNone);
    m_list->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    m_list->setResizeMode(QListView::Adjust);
    form->addRow(m_list);
    split->addWidget(left);

    auto* right = new QWidget;
    auto* right_layout = new QVBoxLayout(right);
    right_layout->setContentsMargins(0, 0, 0, 0);
    m_gauge = new QProgressBar;
    m_gauge->setObjectName("contextGauge");
    right_layout->addWidget(m_gauge);
    m_note = new QLabel;
    m_note->setWordWrap(true);
    right_layout->addWidget(m_note);
    m_bars = new QChartView;
    m_bars->setRenderHint(QPainter::Antialiasing);
    m_bars->setMinimumHeight(200);
    right_layout->addWidget(m_bars, 3);
    m_cumulative = new QChartView;
    m_cumulative->setRenderHint(QPainter::Antialiasing);
    m_cumulative->setMinimumHeight(160);
    right_layout->addWidget(m_cumulative, 2);
    split->addWidget(right);
    split->setStretchFactor(1, 2);
    layout->addWidget(split, 1);

    connect(add_typed, &QPushButton::clicked, this, [this] {
        if (!m_user->toPlainText().trimmed().isEmpty())
            addTypedTurn(m_user->toPlainText(), m_reply->toPlainText());
        m_user->clear();
        m_reply->clear();
    });
    connect(add_synthetic, &QPushButton::clicked, this,
            [this] { addSyntheticTurn(m_synthetic_user->value(), m_synthetic_reply->value()); });
    connect(ten, &QPushButton::clicked, this, [this] {
        for (int i = 0; i < 10; ++i)
            addSyntheticTurn(m_synthetic_user->value(), m_synthetic_reply->value());
    });
    connect(clear, &QPushButton::clicked, this, &ContextPanel::clearTurns);
    connect(m_system, &QLineEdit::editingFinished, this, [this] { setSystemPrompt(m_system->text()); });
    connect(m_window, &QComboBox::currentIndexChanged, this, &ContextPanel::simulate);
    connect(m_policy, &QComboBox::currentIndexChanged, this, &ContextPanel::simulate);
    connect(&m_engine->chat(), &ChatClient::turnsCounted, this,
            [this](quint64 id, const QList<int>& counts, int n_ctx_train) {
                if (id != m_count_request)
                    return;
                qsizetype k = 0;
                for (Turn& t : m_turns)
                    if (!t.text.isEmpty() && k < counts.size())
                        t.tokens = counts[k++];
                if (n_ctx_train > 0 && m_model_window != n_ctx_train) {
                    m_model_window = n_ctx_train;
                    const int i = m_window->findData("model");
                    if (i >= 0)
                        m_window->removeItem(i);
                    m_window->addItem(tr("the model's own (%1)").arg(numberText(qint64(n_ctx_train))), n_ctx_train);
                }
                simulate();
            });
    connect(m_engine, &EngineController::modelLoaded, this, &ContextPanel::requestCounts);
    simulate();
}

void ContextPanel::setWindow(int tokens)
{
    int i = m_window->findData(tokens);
    if (i < 0) {
        m_window->addItem(numberText(qint64(tokens)), tokens);
        i = m_window->count() - 1;
    }
    m_window->setCurrentIndex(i);
}

void ContextPanel::setPolicy(engine::OverflowPolicy policy)
{
    m_policy->setCurrentIndex(m_policy->findData(int(policy)));
}

int ContextPanel::window() const
{
    return m_window->currentData().toInt();
}

void ContextPanel::setSystemPrompt(const QString& text)
{
    if (m_system->text() != text)
        m_system->setText(text);
    // a long prompt shows its beginning, and the whole of it on hover
    if (!m_system->hasFocus())
        m_system->setCursorPosition(0);
    m_system->setToolTip(text);
    if (!m_turns.empty() && m_turns.front().role == "system")
        m_turns.erase(m_turns.begin());
    if (!text.trimmed().isEmpty())
        m_turns.insert(m_turns.begin(), Turn{"system", text, -1});
    requestCounts();
}

void ContextPanel::addTypedTurn(const QString& user, const QString& reply)
{
    m_turns.push_back({"user", user, -1});
    if (!reply.isEmpty())
        m_turns.push_back({"assistant", reply, -1});
    requestCounts();
}

void ContextPanel::addSyntheticTurn(int user_tokens, int reply_tokens)
{
    m_turns.push_back({"user", QString(), user_tokens});
    if (reply_tokens > 0)
        m_turns.push_back({"assistant", QString(), reply_tokens});
    simulate();
}

void ContextPanel::clearTurns()
{
    m_turns.erase(std::remove_if(m_turns.begin(), m_turns.end(), [](const Turn& t) { return t.role != "system"; }),
                  m_turns.end());
    simulate();
}

bool ContextPanel::counted() const
{
    return std::all_of(m_turns.begin(), m_turns.end(), [](const Turn& t) { return t.tokens >= 0; });
}

void ContextPanel::requestCounts()
{
    QStringList roles, texts;
    for (const Turn& t : m_turns)
        if (!t.text.isEmpty()) {
            roles << t.role;
            texts << t.text;
        }
    if (!roles.isEmpty() && m_engine->model())
        m_count_request = m_engine->chat().countTurns(roles, texts);
    simulate();
}

void ContextPanel::simulate()
{
    std::vector<engine::SimTurn> turns;
    for (const Turn& t : m_turns)
        turns.push_back({t.role.toStdString(), uint32_t(std::max(0, t.tokens))});
    const int w = window();
    m_requests = engine::simulate_context(turns, uint32_t(w), engine::OverflowPolicy(m_policy->currentData().toInt()));

    m_list->clear();
    for (const engine::SimRequest& r : m_requests) {
        QString line = tr("Request %1: re-sends %2 (%3) + reply %4")
                           .arg(m_list->count() + 1)
                           .arg(countText(qint64(r.input_tokens), tr("token"), tr("tokens")))
                           .arg(countText(qint64(r.kept.size()), tr("turn"), tr("turns")))
                           .arg(numberText(r.output_tokens));
        if (r.overflow)
            line += r.cut_tokens ? tr(" · overflow: %1 dropped, %2 cut")
                                       .arg(countText(qint64(r.dropped_turns), tr("turn"), tr("turns")))
                                       .arg(countText(qint64(r.cut_tokens), tr("token"), tr("tokens")))
                                 : tr(" · overflow: %1 dropped")
                                       .arg(countText(qint64(r.dropped_turns), tr("oldest turn"), tr("oldest turns")));
        if (!r.fits)
            line += tr(" · does not fit even alone");
        line += tr(" · prefix cache reuses %1").arg(numberText(r.input_tokens - r.recomputed_tokens));
        m_list->addItem(line);
    }
    if (m_requests.empty()) {
        m_gauge->setRange(0, std::max(1, w));
        m_gauge->setValue(0);
        m_gauge->setFormat(tr("empty: add turns"));
        m_note->setText(counted() ? tr("Add turns (typed, or synthetic of a chosen length) to see the window fill.")
                                  : tr("Counting tokens…"));
    } else {
        const engine::SimRequest& last = m_requests.back();
        const uint32_t used = std::min<uint32_t>(uint32_t(w), last.input_tokens + last.output_tokens);
        m_gauge->setRange(0, w);
        m_gauge->setValue(int(used));
        m_gauge->setFormat(
            tr("%1 of %2 tokens used (%p%) by the last request").arg(numberText(used), numberText(qint64(w))));
        m_note->setText(tr("%1 · tokens processed without prefix caching %2, with it %3 (%4× less)")
                            .arg(countText(qint64(m_requests.size()), tr("request"), tr("requests")))
                            .arg(numberText(last.processed_without_cache), numberText(last.processed_with_cache))
                            .arg(decimalText(last.processed_with_cache ? double(last.processed_without_cache) /
                                                                             double(last.processed_with_cache)
                                                                       : 0.0,
                                             1)));
    }
    drawCharts();
    emit simulated();
}

QString ContextPanel::gaugeText() const
{
    return m_gauge->text() + " · " + m_note->text();
}

void ContextPanel::drawCharts()
{
    auto* system = new QBarSet(tr("system prompt"));
    auto* history = new QBarSet(tr("earlier turns (re-sent)"));
    auto* fresh = new QBarSet(tr("new message"));
    auto* reply = new QBarSet(tr("reply"));
    QStringList categories;
    for (std::size_t i = 0; i < m_requests.size(); ++i) {
        const engine::SimRequest& r = m_requests[i];
        double sys = 0, old = 0, now = 0;
        for (std::size_t k = 0; k < r.kept.size(); ++k) {
            const auto& t = m_turns[r.kept[k]];
            (t.role == "system" ? sys : r.kept[k] == r.turn ? now : old) += r.kept_tokens[k];
        }
        *system << sys;
        *history << old;
        *fresh << now;
        *reply << r.output_tokens;
        categories << QString::number(i + 1);
    }
    auto* series = new QStackedBarSeries;
    series->append({system, history, fresh, reply});
    auto* chart = new QChart;
    chart->addSeries(series);
    chart->setTitle(tr("Tokens per request (window %1)").arg(numberText(qint64(window()))));
    auto* x = new QBarCategoryAxis;
    x->append(categories);
    x->setTitleText(tr("request"));
    auto* y = new QValueAxis;
    y->setTitleText(tr("tokens"));
    nice_axis(y, 0, std::max(1.0, double(window())) * 1.05, true);
    show_chart(m_bars, chart, x, y, palette());

    auto* without = new QLineSeries;
    without->setName(tr("processed without prefix caching"));
    auto* with = new QLineSeries;
    with->setName(tr("with prefix caching"));
    double top = 1;
    for (std::size_t i = 0; i < m_requests.size(); ++i) {
        without->append(double(i + 1), double(m_requests[i].processed_without_cache));
        with->append(double(i + 1), double(m_requests[i].processed_with_cache));
        top = std::max(top, double(m_requests[i].processed_without_cache));
    }
    without->setPen(QPen(Qt::gray, 2));
    with->setPen(QPen(palette().color(QPalette::Highlight), 2));
    auto* cumulative = new QChart;
    cumulative->addSeries(without);
    cumulative->addSeries(with);
    cumulative->setTitle(tr("Cumulative tokens processed"));
    auto* cx = new QValueAxis;
    nice_axis(cx, 1, std::max<double>(2, double(m_requests.size())), true);
    cx->setTitleText(tr("request"));
    auto* cy = new QValueAxis;
    nice_axis(cy, 0, top * 1.05, true);
    cy->setTitleText(tr("tokens"));
    show_chart(m_cumulative, cumulative, cx, cy, palette());
}

} // namespace tokenscope::ui
