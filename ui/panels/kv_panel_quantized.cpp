// SPDX-License-Identifier: GPL-3.0-or-later
// The KV panel's "Quantized cache" tab: the cache types llama.cpp offers (-ctk / -ctv), the memory
// each saves on the loaded model, and the damage on a text — every token's KL between the model with
// an F16 cache and with the quantized one (the text analysis's comparison), shown where it happens.
#include "bridge/analysis_client.h"
#include "bridge/engine_controller.h"
#include "kv/kv_calculator.h"
#include "panels/kv_panel.h"
#include "widgets/count_text.h"
#include "widgets/flow_layout.h"
#include "widgets/token_heat_html.h"

#include <QComboBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QTabWidget>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

namespace tokenscope::ui {

namespace {

// A text of ordinary prose, code and numbers: enough positions (about 300 tokens) for the damage to
// show where it gathers; the user can paste any other.
const char* const kDamageText =
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, carrying a tin of oil and a "
    "notebook in which he wrote the weather, the ships he saw and the hours the lamp burned. In the winter "
    "of 1887 the notebook records forty-one storms, three wrecks and a single visitor, a surveyor who "
    "measured the cliff and left before the ice closed the harbour.\n\n"
    "def moving_average(values, window=3):\n"
    "    if window <= 0:\n"
    "        raise ValueError(\"window must be positive\")\n"
    "    return [sum(values[i:i + window]) / window for i in range(len(values) - window + 1)]\n\n"
    "Quarterly revenue rose from 12.4 million to 15.1 million, an increase of 21.8 percent, while costs "
    "grew by only 6 percent; the board proposed a dividend of 0.35 per share, payable on 14 March.";

QString type_label(engine::GgmlType t)
{
    return QString::fromUtf8(engine::ggml_type_name(t).data());
}

QComboBox* type_box(const QString& name)
{
    auto* box = new QComboBox;
    box->setObjectName(name);
    for (const engine::GgmlType t : {engine::GgmlType::F16, engine::GgmlType::Q8_0, engine::GgmlType::Q4_0})
        box->addItem(type_label(t), int(t));
    box->setItemData(0, QObject::tr("2 bytes per value (the default)"), Qt::ToolTipRole);
    box->setItemData(1, QObject::tr("34 bytes per 32 values: 1.06 bytes per value"), Qt::ToolTipRole);
    box->setItemData(2, QObject::tr("18 bytes per 32 values: 0.56 bytes per value"), Qt::ToolTipRole);
    return box;
}

} // namespace

QWidget* KvPanel::buildQuantized()
{
    auto* page = new QWidget;
    auto* layout = new QVBoxLayout(page);
    auto* intro = new QLabel(
        tr("llama.cpp can store keys and values as <b>Q8_0</b> or <b>Q4_0</b> instead of F16 (<code>-ctk</code>, "
           "<code>-ctv</code>): 32 values share one F16 scale. It reads such a cache only with flash attention, "
           "after rotating queries, keys and values by a Hadamard matrix so that an outlier spreads over its "
           "block. The engine here runs that same path on the CPU, bit for bit."));
    intro->setWordWrap(true);
    intro->setTextFormat(Qt::RichText);
    layout->addWidget(intro);

    m_q_keys = type_box("kvQuantKeys");
    m_q_values = type_box("kvQuantValues");
    m_q_apply = new QPushButton(tr("Use this cache"));
    m_q_apply->setObjectName("kvQuantApply");
    m_q_apply->setToolTip(tr("Loads the model again with these cache types (a GPU backend keeps F16: the model then "
                             "runs on the CPU)"));
    auto* row = new FlowLayout;
    row->addWidget(labelled(tr("Keys"), m_q_keys));
    row->addWidget(labelled(tr("Values"), m_q_values));
    row->addWidget(m_q_apply);
    layout->addLayout(row);
    m_q_memory = new QLabel;
    m_q_memory->setObjectName("kvQuantMemory");
    m_q_memory->setWordWrap(true);
    m_q_memory->setTextFormat(Qt::RichText);
    layout->addWidget(m_q_memory);

    m_q_text = new QPlainTextEdit(QString::fromUtf8(kDamageText));
    m_q_text->setObjectName("kvQuantText");
    m_q_text->setPlaceholderText(tr("A text to measure the damage on"));
    m_q_text->setMaximumHeight(m_q_text->fontMetrics().lineSpacing() * 6);
    layout->addWidget(m_q_text);
    m_q_measure = new QPushButton(tr("Measure against F16"));
    m_q_measure->setObjectName("kvQuantMeasure");
    m_q_measure->setToolTip(tr("Reads the text twice on the CPU, with an F16 cache and with the chosen one, and "
                               "compares every position's next-token distribution"));
    m_q_stop = new QPushButton(tr("Stop"));
    m_q_stop->setEnabled(false);
    m_q_progress = new QProgressBar;
    auto* run = new FlowLayout;
    run->addWidget(m_q_measure);
    run->addWidget(m_q_stop);
    run->addWidget(m_q_progress);
    layout->addLayout(run);
    m_q_status = new QLabel(tr("Choose a quantized type, then measure: every token is coloured by how far the "
                               "quantized cache moved its prediction."));
    m_q_status->setObjectName("kvQuantStatus");
    m_q_status->setWordWrap(true);
    m_q_status->setTextFormat(Qt::PlainText);
    layout->addWidget(m_q_status);
    m_q_legend = new QLabel;
    m_q_legend->setEnabled(false); // secondary text
    layout->addWidget(m_q_legend);
    m_q_view = new QTextBrowser;
    m_q_view->setObjectName("kvQuantView");
    m_q_view->setOpenLinks(false);
    m_q_view->setMouseTracking(true);
    layout->addWidget(m_q_view, 1);

    const engine::KvCacheTypes engine_types = m_engine->kvCacheTypes();
    chooseCacheTypes(engine_types.quantized() ? engine_types
                                              : engine::KvCacheTypes{engine::GgmlType::Q8_0, engine::GgmlType::Q8_0});
    for (QComboBox* box : {m_q_keys, m_q_values})
        connect(box, &QComboBox::currentIndexChanged, this, &KvPanel::updateCacheMemory);
    connect(m_q_apply, &QPushButton::clicked, this, [this] {
        const engine::KvCacheTypes t = chosenTypes();
        QSettings().setValue("engine/cache_type_k", type_label(t.k));
        QSettings().setValue("engine/cache_type_v", type_label(t.v));
        m_engine->setKvCacheTypes(t);
        updateCacheMemory();
        emit cacheTypesApplied(t);
    });
    connect(m_q_measure, &QPushButton::clicked, this, &KvPanel::measureDamage);
    connect(m_q_stop, &QPushButton::clicked, this, [this] {
        if (m_damage_request)
            m_engine->cancel(m_damage_request);
    });
    connect(&m_engine->analysis(), &AnalysisClient::textAnalyzed, this, &KvPanel::onDamage);
    connect(&m_engine->analysis(), &AnalysisClient::analysisProgress, this, [this](quint64 id, int done, int total) {
        if (id != m_damage_request)
            return;
        m_q_progress->setMaximum(std::max(1, total));
        m_q_progress->setValue(done);
    });
    connect(m_q_view, &QTextBrowser::highlighted, this, [this](const QUrl& url) {
        if (url.scheme() == "token")
            m_q_view->setToolTip(damageTip(url.path().toInt()));
    });
    return page;
}

engine::KvCacheTypes KvPanel::chosenTypes() const
{
    return {engine::GgmlType(m_q_keys->currentData().toInt()), engine::GgmlType(m_q_values->currentData().toInt())};
}

void KvPanel::chooseCacheTypes(engine::KvCacheTypes types)
{
    m_q_keys->setCurrentIndex(std::max(0, m_q_keys->findData(int(types.k))));
    m_q_values->setCurrentIndex(std::max(0, m_q_values->findData(int(types.v))));
    updateCacheMemory();
}

QString KvPanel::cacheMemoryText() const
{
    return m_q_memory->text();
}

// What the loaded model's cache takes at its full context with each choice: per layer, the positions
// it keeps (a sliding window keeps its window) × KV heads × head width × bytes per value, K and V.
void KvPanel::updateCacheMemory()
{
    const engine::KvCacheTypes chosen = chosenTypes();
    const engine::KvCacheTypes current = m_engine->kvCacheTypes();
    m_q_apply->setEnabled(chosen != current);
    if (!m_snapshot || m_snapshot->n_layers == 0) {
        m_q_memory->setText(tr("The engine's cache: %1. Load a model to see what each choice takes.")
                                .arg(QString::fromStdString(engine::kv_cache_types_name(current))));
        return;
    }
    const KvSnapshot& s = *m_snapshot;
    const auto bytes = [&](engine::KvCacheTypes t) {
        double total = 0.0;
        for (const auto& l : s.layers) {
            const int kept = l.window > 0 ? std::min(l.window, s.n_ctx) : s.n_ctx;
            total += double(kept) * s.n_kv_heads *
                     double(engine::kv_row_bytes(t.k, uint32_t(s.head_dim)) +
                            engine::kv_row_bytes(t.v, uint32_t(s.head_dim)));
        }
        return total;
    };
    const double f16 = bytes({}), q = bytes(chosen);
    QString text = tr("At the full context of %1 tokens this model's cache takes <b>%2</b> as F16")
                       .arg(numberText(qint64(s.n_ctx)), QString::fromStdString(engine::format_binary_bytes(f16)));
    if (chosen.quantized())
        text +=
            tr("; as %1, <b>%2</b> (%3% less).")
                .arg(QString::fromStdString(engine::kv_cache_types_name(chosen)),
                     QString::fromStdString(engine::format_binary_bytes(q)), decimalText(100.0 * (1.0 - q / f16), 1));
    else
        text += ".";
    text += tr(" The engine's cache now: %1.").arg(s.cache_types.toHtmlEscaped());
    if (chosen.quantized() && s.head_dim % 32 != 0)
        text += tr("<br><b>This model's heads have %1 values, not whole blocks of 32: it needs an F16 cache.</b>")
                    .arg(s.head_dim);
    m_q_memory->setText(text);
}

void KvPanel::measureDamage()
{
    if (m_damage_request)
        m_engine->cancel(m_damage_request);
    m_damage_request = m_engine->analysis().analyzeKvCache(m_q_text->toPlainText(), chosenTypes());
    m_q_measure->setEnabled(false);
    m_q_stop->setEnabled(true);
    m_q_progress->setValue(0);
    m_q_status->setText(tr("Reading the text with an F16 cache and with a %1 cache…")
                            .arg(QString::fromStdString(engine::kv_cache_types_name(chosenTypes()))));
}

void KvPanel::onDamage(std::shared_ptr<const TextAnalysisSnapshot> r)
{
    if (r->request_id != m_damage_request)
        return;
    m_damage_request = 0;
    m_q_measure->setEnabled(true);
    m_q_stop->setEnabled(false);
    if (!r->error.isEmpty()) { // the previous result stays; the status says what failed
        m_damage_error = r->error;
        m_q_status->setText(m_damage_error);
        emit damageMeasured();
        return;
    }
    m_damage_error.clear();
    m_damage = std::move(r);
    double max_kl = 1e-12;
    for (const AnalyzedToken& t : m_damage->tokens)
        max_kl = std::max(max_kl, t.kl);
    // A square-root scale: one position's large KL (a Q4_0 cache's worst is often 30 times its mean)
    // would leave every other one white on a linear scale.
    m_q_view->setHtml(token_heat_html(
        m_damage->tokens, [&](const AnalyzedToken& t) { return t.predicted ? std::sqrt(t.kl / max_kl) : 0.0; }));
    m_q_legend->setText(tr("light: the same prediction as with F16 (KL 0) → dark: the largest KL in the text "
                           "(%1 nats), on a square-root scale")
                            .arg(max_kl, 0, 'g', 3));
    m_q_status->setText(damageText());
    emit damageMeasured();
}

QString KvPanel::damageText() const
{
    if (!m_damage_error.isEmpty())
        return m_damage_error;
    if (!m_damage)
        return m_q_status->text();
    const TextAnalysisSnapshot& d = *m_damage;
    int worst = -1;
    int predicted = 0;
    for (std::size_t i = 0; i < d.tokens.size(); ++i)
        if (d.tokens[i].predicted) {
            ++predicted;
            if (worst < 0 || d.tokens[i].kl > d.tokens[std::size_t(worst)].kl)
                worst = int(i);
        }
    QString text = tr("%1%2 against the F16 cache on %3: mean KL %4 nats, same top token at %5% of positions, "
                      "RMS Δp %6%")
                       .arg(d.cancelled ? tr("Stopped: ") : QString())
                       .arg(d.model_b)
                       .arg(countText(predicted, tr("predicted token"), tr("predicted tokens")))
                       .arg(d.mean_kl, 0, 'g', 3)
                       .arg(decimalText(100.0 * d.same_top, 1))
                       .arg(decimalText(100.0 * d.rms_dp, 2));
    if (worst >= 0)
        text += tr(" · the largest, %1 nats, before “%2” (position %3)")
                    .arg(d.tokens[std::size_t(worst)].kl, 0, 'g', 3)
                    .arg(d.tokens[std::size_t(worst)].text)
                    .arg(worst);
    return text;
}

QString KvPanel::damageTip(int index) const
{
    if (!m_damage || index < 0 || index >= int(m_damage->tokens.size()))
        return {};
    const AnalyzedToken& t = m_damage->tokens[std::size_t(index)];
    if (!t.predicted)
        return tr("“%1”: the first token of a window — nothing before it to predict it from").arg(t.text);
    return tr("“%1” (position %2): KL %3 nats · p %4 with F16, %5 with the %6 · %7")
        .arg(t.text)
        .arg(index)
        .arg(t.kl, 0, 'g', 3)
        .arg(t.p, 0, 'g', 4)
        .arg(t.p_b, 0, 'g', 4)
        .arg(m_damage->model_b)
        .arg(t.same_top ? tr("the same top token") : tr("a different top token"));
}

} // namespace tokenscope::ui
