// SPDX-License-Identifier: GPL-3.0-or-later
#include "panels/kv_panel.h"
#include "bridge/inspection_client.h"

#include "backend/vulkan/vulkan_backend.h"
#include "bridge/background.h"
#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "bridge/vulkan_devices.h"
#include "kv/kv_calculator.h"
#include "model/memory_plan.h"
#include "widgets/chart_style.h"
#include "widgets/count_text.h"
#include "widgets/flow_layout.h"
#include "widgets/kv_heat_strip.h"
#include "widgets/kv_layer_view.h"

#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineSeries>
#include <QLocale>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QRadioButton>
#include <QScrollArea>
#include <QSlider>
#include <QSpinBox>
#include <QTabWidget>
#include <QThreadPool>
#include <QVBoxLayout>
#include <QValueAxis>

namespace tokenscope::ui {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

QString binary(double bytes)
{
    return QString::fromStdString(engine::format_binary_bytes(bytes));
}
QString decimal(double bytes)
{
    return QString::fromStdString(engine::format_decimal_bytes(bytes));
}
// Binary figure shown, the decimal one in the tooltip-like parenthesis where space allows.
QString both(double bytes)
{
    return QString("%1 <span style='color:gray'>(%2)</span>").arg(binary(bytes), decimal(bytes));
}

QLabel* teaching_label()
{
    auto* l = new QLabel;
    l->setWordWrap(true);
    l->setTextFormat(Qt::RichText);
    l->setTextInteractionFlags(Qt::TextSelectableByMouse);
    return l;
}

} // namespace

KvPanel::KvPanel(EngineController* engine, TokenSelection* selection, QWidget* parent)
    : QWidget(parent), m_engine(engine), m_selection(selection)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    m_tabs = new QTabWidget;
    m_tabs->addTab(buildLive(), tr("Live cache"));
    m_tabs->addTab(buildContents(), tr("Contents"));
    m_tabs->addTab(buildCalculator(), tr("Calculator"));
    m_tabs->addTab(buildQuantized(), tr("Quantized cache"));
    layout->addWidget(m_tabs);

    connect(&m_engine->inspection(), &InspectionClient::kvChanged, this, &KvPanel::onSnapshot);
    connect(&m_engine->inspection(), &InspectionClient::kvContents, this, [this](std::shared_ptr<const KvContents> c) {
        if (c->request_id != m_contents_request)
            return;
        m_contents = std::move(c);
        m_strip->setContents(m_contents, m_show_values->isChecked());
        m_strip->setSelected(m_selection->position());
        m_contents_note->setText(
            m_contents->error.isEmpty()
                ? tr("Layer %1, KV head %2: %3 cached positions × %4 dimensions of %5 (%6 in the cache%7). "
                     "Rows are tokens (generated ones marked at the left); hover for values.")
                      .arg(m_contents->layer)
                      .arg(m_contents->kv_head)
                      .arg(m_contents->n_positions)
                      .arg(m_contents->head_dim)
                      .arg(m_show_values->isChecked() ? tr("values") : tr("keys (after RoPE)"))
                      .arg(m_snapshot ? m_snapshot->cache_types : QString("F16"))
                      .arg(m_snapshot && m_snapshot->cache_types != "F16" ? tr(", shown dequantized and rotated back")
                                                                          : QString())
                : m_contents->error);
        emit contentsShown();
    });
    connect(m_engine, &EngineController::modelLoaded, this, [this](std::shared_ptr<const ModelSummary> m) {
        m_model = std::move(m);
        const int i = m_preset->findData("loaded");
        if (i >= 0)
            m_preset->removeItem(i);
        m_preset->insertItem(0, tr("Loaded: %1").arg(m_model->name), "loaded");
    });
    connect(m_tabs, &QTabWidget::currentChanged, this, [this](int i) {
        if (i == 1)
            requestContents();
    });
    connect(m_selection, &TokenSelection::changed, this, [this](int position) { m_strip->setSelected(position); });
}

// ---- Live ------------------------------------------------------------------------------------------

QWidget* KvPanel::buildLive()
{
    auto* page = new QWidget;
    auto* layout = new QVBoxLayout(page);
    m_formula = teaching_label();
    m_formula->setObjectName("kvFormula");
    m_formula->setText(liveIntro());
    layout->addWidget(m_formula);
    m_summary = teaching_label();
    layout->addWidget(m_summary);
    m_layers = new KvLayerView;
    m_layers_scroll = new QScrollArea;
    m_layers_scroll->setWidget(m_layers);
    m_layers_scroll->setWidgetResizable(true);
    m_layers_scroll->setFrameShape(QFrame::NoFrame);
    layout->addWidget(m_layers_scroll, 1);
    layout->addWidget(buildServerCache());
    layout->addStretch(0); // takes the room the hidden layer bars leave on a server connection
    return page;
}

QString KvPanel::liveIntro() const
{
    return tr("Every token a model has read leaves one key and one value vector per layer and KV head in the "
              "KV cache, so attention never recomputes them. Load a model and chat or step: the cache fills "
              "here, layer by layer.<br><b>bytes = 2 (K and V) × layers × KV heads × head dim × tokens × bytes "
              "per value</b>");
}

// ---- On a server connection ----------------------------------------------------------------------

QWidget* KvPanel::buildServerCache()
{
    m_server_box = new QGroupBox(tr("The server's cache"));
    auto* box = new QVBoxLayout(m_server_box);
    m_server_text = teaching_label();
    m_server_text->setObjectName("kvServerCache");
    box->addWidget(m_server_text);
    const auto gauge = [box](const QString& name) {
        auto* bar = new QProgressBar;
        bar->setObjectName(name);
        bar->setRange(0, 1000);
        bar->setTextVisible(true);
        box->addWidget(bar);
        return bar;
    };
    m_server_request = gauge("kvServerRequest");
    m_server_whole = gauge("kvServerWhole");
    m_server_box->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Maximum);
    m_server_box->hide();

    connect(m_engine, &EngineController::serverConnected, this, [this](std::shared_ptr<const remote::ServerInfo> s) {
        m_formula->setText(
            tr("The KV cache of a served model lives on the server: its layers, blocks and contents are not visible "
               "from here. What the server says is below: how much of the context a request may hold its "
               "conversation took, how much of the re-sent history it reused from its cache, and — where the "
               "server reports them on <tt>/metrics</tt> (vLLM, SGLang) — how full its whole cache is and how "
               "many requests run and wait."));
        m_summary->clear();
        m_layers_scroll->hide();
        m_server_box->show();
        m_server_text->setText(
            tr("%1 at %2: a request may hold %3 tokens. Send a chat message: after each reply "
               "the server's own figures appear here.")
                .arg(s->kind_name, s->base.toString())
                .arg(s->context_length ? numberText(s->context_length) : tr("an unknown number of")));
        m_server_request->hide();
        m_server_whole->hide();
    });
    connect(m_engine, &EngineController::serverDisconnected, this, [this] {
        m_formula->setText(liveIntro());
        m_server_cache.reset();
        m_server_box->hide();
        m_layers_scroll->show();
    });
    connect(&m_engine->inspection(), &InspectionClient::serverCacheChanged, this, &KvPanel::onServerCache);
    return m_server_box;
}

void KvPanel::onServerCache(std::shared_ptr<const ServerCacheSnapshot> cache)
{
    m_server_cache = std::move(cache);
    const ServerCacheSnapshot& c = *m_server_cache;
    QStringList lines;
    lines << tr("<b>%1</b>: the last request held <b>%2</b> tokens (%3 of prompt — the whole conversation, "
                "re-sent — and %4 of reply)")
                 .arg(c.server.toHtmlEscaped(), numberText(qint64(c.tokens_held)), numberText(qint64(c.prompt_tokens)),
                      numberText(qint64(c.tokens_held - c.prompt_tokens)));
    if (c.reused_tokens >= 0)
        lines << tr("reused <b>%1</b> cached tokens of the prompt and computed %2 new")
                     .arg(numberText(qint64(c.reused_tokens)))
                     .arg(numberText(qint64(std::max(0, c.prompt_tokens - c.reused_tokens))));
    else
        lines << tr("the server did not say how much of the prompt it reused from its cache");
    if (c.context_length > 0) {
        const double share = double(c.tokens_held) / double(c.context_length);
        m_server_request->setValue(int(std::lround(std::min(1.0, share) * 1000)));
        m_server_request->setFormat(tr("this conversation: %1 of %2 tokens a request may hold (%3%)")
                                        .arg(numberText(qint64(c.tokens_held)), numberText(qint64(c.context_length)))
                                        .arg(decimalText(100.0 * share, 1)));
        m_server_request->show();
    } else {
        m_server_request->hide();
        lines << tr("the server did not say how many tokens a request may hold");
    }
    if (c.kv_usage) {
        m_server_whole->setValue(int(std::lround(std::clamp(*c.kv_usage, 0.0, 1.0) * 1000)));
        m_server_whole->setFormat(
            tr("the server's whole KV cache: %1% in use").arg(decimalText(100.0 * *c.kv_usage, 1)));
        m_server_whole->show();
    } else {
        m_server_whole->hide();
    }
    QStringList queue;
    if (c.running)
        queue << tr("%1 running").arg(*c.running);
    if (c.waiting)
        queue << tr("%1 waiting").arg(*c.waiting);
    if (!queue.isEmpty())
        lines << tr("requests on the server: %1").arg(queue.join(", "));
    if (!c.kv_usage)
        lines << tr("the server's whole cache: not reported");
    lines << QString("<span style='color:gray'>%1</span>").arg(c.metrics_note.toHtmlEscaped());
    m_server_text->setText(lines.join("<br>"));
    emit serverCacheShown();
}

QString KvPanel::serverCacheText() const
{
    return m_server_text->text();
}

void KvPanel::onSnapshot(std::shared_ptr<const KvSnapshot> snapshot)
{
    m_snapshot = std::move(snapshot);
    const KvSnapshot& s = *m_snapshot;
    m_layers->setSnapshot(m_snapshot);
    updateCacheMemory();
    m_layer->setMaximum(std::max(0, s.n_layers - 1));
    m_kv_head->setMaximum(std::max(0, s.n_kv_heads - 1));

    int global = 0, local = 0, window = 0;
    for (const auto& l : s.layers) {
        (l.window > 0 ? local : global) += 1;
        window = std::max(window, l.window);
    }
    const bool quantized = s.cache_types != "F16";
    const double per_token_layer =
        double(s.n_kv_heads) * s.head_dim * (s.key_bytes_per_value + s.value_bytes_per_value);
    // F16: 2 (K and V) × … × 2 B; a quantized cache: × (K bytes + V bytes) per value (34/32 or 18/32)
    const QString per_value = quantized ? tr("(%1 B + %2 B)")
                                              .arg(decimalText(s.key_bytes_per_value, 4))
                                              .arg(decimalText(s.value_bytes_per_value, 4))
                                        : QString("%1 B").arg(s.bytes_per_value);
    QString formula =
        (quantized ? tr("<b>bytes = %1 layers × %2 KV head%3 × %4 dims × %5 tokens × %6</b> = %7 per token × %5 = %8")
                   : tr("<b>bytes = 2 × %1 layers × %2 KV head%3 × %4 dims × %5 tokens × %6</b> = %7 per token × %5 = "
                        "%8"))
            .arg(s.n_layers)
            .arg(s.n_kv_heads)
            .arg(s.n_kv_heads == 1 ? "" : "s")
            .arg(s.head_dim)
            .arg(numberText(qint64(s.tokens_cached)))
            .arg(per_value)
            .arg(binary(per_token_layer * s.n_layers))
            .arg(both(per_token_layer * s.n_layers * s.tokens_cached));
    if (quantized)
        formula +=
            tr("<br>Keys and values are stored as %1 (the Quantized cache tab).").arg(s.cache_types.toHtmlEscaped());
    if (local > 0 && s.tokens_cached > window)
        formula +=
            tr("<br>…but %1 of the %2 layers use a sliding window of %3 tokens: they keep only the last %3, so the "
               "cache actually in use is (%4 × %5 + %1 × %3) × %6 × %7 × %8 = %9.")
                .arg(local)
                .arg(s.n_layers)
                .arg(window)
                .arg(global)
                .arg(s.tokens_cached)
                .arg(s.n_kv_heads)
                .arg(s.head_dim)
                .arg(quantized ? per_value : QString("2 × %1 B").arg(s.bytes_per_value))
                .arg(both(double(s.bytes_in_use)));
    else if (local > 0)
        formula +=
            tr("<br>%1 of the %2 layers use a sliding window of %3 tokens: past %3 cached tokens their share stops "
               "growing (the dashed line on their bars).")
                .arg(local)
                .arg(s.n_layers)
                .arg(window);
    m_formula->setText(formula);

    int blocks = 0;
    for (const auto& l : s.layers)
        blocks += l.blocks;
    const int total_blocks = s.blocks_per_layer * s.n_layers;
    QString summary =
        tr("<b>%1</b> tokens cached (context %2) · in use %3 · allocated %4 in %5 of %6 blocks (%7 free; a block is %8 "
           "positions of one layer, %9) · weights %10 · %11 memory %12, %13 available")
            .arg(numberText(qint64(s.tokens_cached)), numberText(qint64(s.n_ctx)), both(double(s.bytes_in_use)),
                 both(double(s.bytes_allocated)))
            .arg(numberText(blocks), numberText(total_blocks), numberText(total_blocks - blocks))
            .arg(s.block_tokens)
            .arg(binary(double(s.bytes_per_block)), binary(double(s.weight_bytes)), s.device.toHtmlEscaped(),
                 binary(double(s.device_total)), binary(double(s.device_available)));
    if (s.source == "chat" && s.prompt_tokens > 0)
        summary +=
            tr("<br>This chat turn re-sent %1 prompt tokens; <b>%2 were already cached</b> (the shared prefix of "
               "the history) and %3 were computed.")
                .arg(s.prompt_tokens)
                .arg(s.reused_tokens)
                .arg(s.prompt_tokens - s.reused_tokens);
    m_summary->setText(summary);
    if (m_tabs->currentIndex() == 1)
        requestContents(); // new entries appear as each step writes them
}

QString KvPanel::formulaText() const
{
    return m_formula->text();
}
QString KvPanel::summaryText() const
{
    return m_summary->text();
}
void KvPanel::showTab(int index)
{
    m_tabs->setCurrentIndex(index);
}

// ---- Contents --------------------------------------------------------------------------------------

QWidget* KvPanel::buildContents()
{
    auto* page = new QWidget;
    auto* layout = new QVBoxLayout(page);
    auto* row = new FlowLayout; // wraps in a narrow dock
    m_layer = new QSpinBox;
    m_kv_head = new QSpinBox;
    auto* keys = new QRadioButton(tr("Keys"));
    keys->setChecked(true);
    m_show_values = new QRadioButton(tr("Values"));
    row->addWidget(labelled(tr("Layer"), m_layer));
    row->addWidget(labelled(tr("KV head"), m_kv_head));
    row->addWidget(keys);
    row->addWidget(m_show_values);
    layout->addLayout(row);
    m_contents_note = teaching_label();
    layout->addWidget(m_contents_note);
    m_strip = new KvHeatStrip;
    auto* scroll = new QScrollArea;
    scroll->setWidget(m_strip);
    scroll->setWidgetResizable(true);
    layout->addWidget(scroll, 1);
    connect(m_layer, &QSpinBox::valueChanged, this, &KvPanel::requestContents);
    connect(m_kv_head, &QSpinBox::valueChanged, this, &KvPanel::requestContents);
    connect(m_show_values, &QRadioButton::toggled, this, [this] {
        if (m_contents)
            m_strip->setContents(m_contents, m_show_values->isChecked());
    });
    connect(m_strip, &KvHeatStrip::positionClicked, m_selection, &TokenSelection::select);
    return page;
}

void KvPanel::requestContents()
{
    if (m_engine->model())
        m_contents_request = m_engine->inspection().readKv(m_layer->value(), m_kv_head->value());
}

void KvPanel::showContents(int layer, int kv_head, bool values)
{
    m_show_values->setChecked(values);
    m_layer->setValue(layer);
    m_kv_head->setValue(kv_head);
    m_tabs->setCurrentIndex(1);
    requestContents();
}

// ---- Calculator ------------------------------------------------------------------------------------

QWidget* KvPanel::buildCalculator()
{
    auto* page = new QWidget;
    auto* layout = new QHBoxLayout(page);
    auto* form_box = new QWidget;
    auto* form = new QFormLayout(form_box);
    m_preset = new QComboBox;
    for (const auto& p : engine::kv_presets())
        m_preset->addItem(QString::fromStdString(p.name), "preset");
    m_preset->addItem(tr("Custom"), "custom");
    form->addRow(tr("Model"), m_preset);
    const auto spin = [](int max) {
        auto* s = new QSpinBox;
        s->setRange(0, max);
        s->setGroupSeparatorShown(true);
        return s;
    };
    m_c_layers = spin(1000);
    m_c_heads = spin(1024);
    m_c_kv_heads = spin(1024);
    m_c_head_dim = spin(4096);
    m_c_window = spin(1 << 24);
    m_c_sliding = spin(1000);
    form->addRow(tr("Layers"), m_c_layers);
    form->addRow(tr("Query heads"), m_c_heads);
    form->addRow(tr("KV heads"), m_c_kv_heads);
    form->addRow(tr("Head dim"), m_c_head_dim);
    form->addRow(tr("Sliding window (tokens)"), m_c_window);
    form->addRow(tr("Sliding-window layers"), m_c_sliding);
    m_c_context = new QDoubleSpinBox;
    m_c_context->setDecimals(0);
    m_c_context->setRange(1, 1e8);
    m_c_context->setGroupSeparatorShown(true);
    form->addRow(tr("Context (tokens)"), m_c_context);
    m_c_sequences = spin(1 << 20);
    m_c_sequences->setMinimum(1);
    form->addRow(tr("Concurrent sequences"), m_c_sequences);
    m_c_dtype = new QComboBox;
    for (auto d : {engine::KvDtype::F32, engine::KvDtype::F16, engine::KvDtype::BF16, engine::KvDtype::FP8,
                   engine::KvDtype::INT8, engine::KvDtype::INT4})
        m_c_dtype->addItem(QString::fromUtf8(engine::kv_dtype_name(d).data()), int(d));
    m_c_dtype->setCurrentIndex(1);
    form->addRow(tr("KV dtype"), m_c_dtype);
    m_c_mha = new QCheckBox(tr("as full multi-head attention (no GQA)"));
    form->addRow(QString(), m_c_mha);
    m_c_swa = new QCheckBox(tr("cap sliding-window layers at their window"));
    m_c_swa->setChecked(true);
    form->addRow(QString(), m_c_swa);
    m_c_offload = new QSlider(Qt::Horizontal);
    m_c_offload->setRange(0, 100);
    form->addRow(tr("Offloaded to CPU memory"), m_c_offload);
    m_c_gpu = new QDoubleSpinBox;
    m_c_gpu->setRange(0, 100000);
    m_c_gpu->setSuffix(" GiB");
    m_c_gpu->setValue(80);
    form->addRow(tr("GPU memory"), m_c_gpu);
    m_c_weights = new QDoubleSpinBox;
    m_c_weights->setRange(0, 100000);
    m_c_weights->setDecimals(2);
    m_c_weights->setSuffix(" GiB");
    form->addRow(tr("Weights on the GPU"), m_c_weights);
    layout->addWidget(form_box);

    auto* right = new QVBoxLayout;
    m_c_result = teaching_label();
    m_c_result->setObjectName("kvCalcResult");
    right->addWidget(m_c_result);
    m_c_formula = teaching_label();
    right->addWidget(m_c_formula);
    m_chart = new QChartView;
    m_chart->setRenderHint(QPainter::Antialiasing);
    m_chart->setMinimumHeight(220);
    right->addWidget(m_chart, 1);
    auto* plan_box = new QGroupBox(tr("Memory planner")); // a short title: a group box is as wide as its title
    auto* plan_layout = new QVBoxLayout(plan_box);
    auto* plan_row = new FlowLayout;
    auto* plan_button = new QPushButton(tr("Plan a GGUF file…"));
    m_plan_ctx = spin(1 << 24);
    m_plan_ctx->setValue(4096);
    plan_row->addWidget(plan_button);
    plan_row->addWidget(labelled(tr("at context"), m_plan_ctx));
    plan_layout->addLayout(plan_row);
    m_plan = teaching_label();
    m_plan->setText(
        tr("Will a GGUF file fit on this machine? Reads only the file's metadata (no weights): weights + KV cache "
           "at this context + working buffers, against this machine's memory."));
    plan_layout->addWidget(m_plan);
    right->addWidget(plan_box);
    layout->addLayout(right, 1);

    connect(plan_button, &QPushButton::clicked, this, [this] {
        const QString path =
            QFileDialog::getOpenFileName(this, tr("Plan a GGUF file"), {}, tr("GGUF models (*.gguf);;All files (*)"));
        if (!path.isEmpty())
            planFile(path);
    });
    connect(m_preset, &QComboBox::currentIndexChanged, this, &KvPanel::applyPreset);
    for (QSpinBox* s : {m_c_layers, m_c_heads, m_c_kv_heads, m_c_head_dim, m_c_window, m_c_sliding})
        connect(s, &QSpinBox::valueChanged, this, [this] {
            if (!m_applying) {
                const QSignalBlocker block(m_preset);
                m_preset->setCurrentIndex(m_preset->findData("custom"));
            }
            recalculate();
        });
    connect(m_c_sequences, &QSpinBox::valueChanged, this, &KvPanel::recalculate);
    connect(m_c_context, &QDoubleSpinBox::valueChanged, this, &KvPanel::recalculate);
    connect(m_c_dtype, &QComboBox::currentIndexChanged, this, &KvPanel::recalculate);
    connect(m_c_mha, &QCheckBox::toggled, this, &KvPanel::recalculate);
    connect(m_c_swa, &QCheckBox::toggled, this, &KvPanel::recalculate);
    connect(m_c_offload, &QSlider::valueChanged, this, &KvPanel::recalculate);
    connect(m_c_gpu, &QDoubleSpinBox::valueChanged, this, &KvPanel::recalculate);
    connect(m_c_weights, &QDoubleSpinBox::valueChanged, this, &KvPanel::recalculate);
    applyPreset(0);
    return page;
}

void KvPanel::applyPreset(int index)
{
    const QString kind = m_preset->itemData(index).toString();
    engine::KvModelShape shape;
    if (kind == "loaded") {
        if (!m_snapshot)
            return;
        shape.name = m_model ? m_model->name.toStdString() : "loaded";
        shape.n_layer = uint32_t(m_snapshot->n_layers);
        shape.n_head_kv = uint32_t(m_snapshot->n_kv_heads);
        shape.head_dim = uint32_t(m_snapshot->head_dim);
        shape.n_head = shape.n_head_kv;
        for (const auto& l : m_snapshot->layers)
            if (l.window > 0) {
                shape.sliding_window = uint32_t(l.window);
                ++shape.n_sliding_layers;
            }
        shape.context_length = m_model ? m_model->context_length : uint32_t(m_snapshot->n_ctx);
        shape.parameters = m_model ? m_model->parameters : 0;
        // The loaded model's query heads are not in the snapshot: keep the field as it is when known.
        if (m_model)
            for (const auto& p : engine::kv_presets())
                if (p.n_layer == shape.n_layer && p.n_head_kv == shape.n_head_kv && p.head_dim == shape.head_dim)
                    shape.n_head = p.n_head;
    } else if (kind == "preset") {
        const auto& presets = engine::kv_presets();
        const int first_preset = m_preset->findData("preset");
        const int i = index - first_preset;
        if (i < 0 || i >= int(presets.size()))
            return;
        shape = presets[std::size_t(i)];
    } else {
        return; // custom: the fields stay as they are
    }
    m_applying = true;
    m_c_layers->setValue(int(shape.n_layer));
    m_c_heads->setValue(int(shape.n_head));
    m_c_kv_heads->setValue(int(shape.n_head_kv));
    m_c_head_dim->setValue(int(shape.head_dim));
    m_c_window->setValue(int(shape.sliding_window));
    m_c_sliding->setValue(int(shape.n_sliding_layers));
    m_c_context->setValue(double(shape.context_length));
    m_c_weights->setValue(double(shape.parameters) * 2.0 / kGiB); // BF16 weights
    m_c_formula->setToolTip(QString::fromStdString(shape.source));
    m_applying = false;
    recalculate();
}

void KvPanel::selectPreset(const QString& name)
{
    const int i = m_preset->findText(name);
    if (i >= 0)
        m_preset->setCurrentIndex(i);
}

void KvPanel::setCalculator(quint64 context, int sequences, int dtype, bool full_mha, bool sliding, double offload,
                            double gpu_gib, double weight_gib)
{
    m_applying = true;
    m_c_context->setValue(double(context));
    m_c_sequences->setValue(sequences);
    m_c_dtype->setCurrentIndex(m_c_dtype->findData(dtype));
    m_c_mha->setChecked(full_mha);
    m_c_swa->setChecked(sliding);
    m_c_offload->setValue(int(offload * 100.0 + 0.5));
    m_c_gpu->setValue(gpu_gib);
    m_c_weights->setValue(weight_gib);
    m_applying = false;
    recalculate();
}

void KvPanel::recalculate()
{
    if (m_applying)
        return;
    engine::KvCalcInput in;
    in.shape.name = m_preset->currentText().toStdString();
    in.shape.n_layer = uint32_t(m_c_layers->value());
    in.shape.n_head = uint32_t(m_c_heads->value());
    in.shape.n_head_kv = uint32_t(m_c_kv_heads->value());
    in.shape.head_dim = uint32_t(m_c_head_dim->value());
    in.shape.sliding_window = uint32_t(m_c_window->value());
    in.shape.n_sliding_layers = uint32_t(m_c_sliding->value());
    in.context = uint64_t(m_c_context->value());
    in.sequences = uint32_t(m_c_sequences->value());
    in.dtype = engine::KvDtype(m_c_dtype->currentData().toInt());
    in.full_mha = m_c_mha->isChecked();
    in.sliding_window = m_c_swa->isChecked();
    in.offload_fraction = m_c_offload->value() / 100.0;
    in.gpu_bytes = uint64_t(m_c_gpu->value() * kGiB + 0.5);
    in.weight_bytes = uint64_t(m_c_weights->value() * kGiB + 0.5);
    const engine::KvCalcResult r = engine::calculate_kv(in);
    QString fit;
    if (in.gpu_bytes == 0)
        fit = tr("no GPU figures (GPU memory 0)");
    else if (r.sequences_fit == UINT64_MAX)
        fit = tr("the whole cache is in CPU memory: the GPU sets no limit");
    else
        fit = tr("<b>%1</b> such sequences fit on the GPU after the weights").arg(numberText(r.sequences_fit));
    m_c_result->setText(
        tr("Per token: <b>%1</b> · per sequence (%2 tokens): <b>%3</b> · total for %4 sequence%5: <b>%6</b><br>"
           "on the GPU %7 · in CPU memory %8 · %9")
            .arg(both(r.bytes_per_token_exact), numberText(in.context), both(double(r.bytes_per_sequence)))
            .arg(in.sequences)
            .arg(in.sequences == 1 ? "" : "s")
            .arg(both(double(r.total_bytes)), binary(double(r.gpu_cache_bytes)), binary(double(r.cpu_cache_bytes)),
                 fit));
    m_c_result->setToolTip(
        tr("Exact: %1 B per token, %2 B per sequence, %3 B in total")
            .arg(numberText(r.bytes_per_token), numberText(r.bytes_per_sequence), numberText(r.total_bytes)));
    m_c_formula->setText(QString::fromStdString(r.formula).toHtmlEscaped());

    // Memory against context, in GiB, up to twice the chosen context (or the model's maximum).
    const uint64_t max_ctx = std::max<uint64_t>(in.context * 2, 1024);
    auto* series = new QLineSeries;
    series->setName(tr("KV cache, all sequences (GiB)"));
    double top = 0.0;
    for (const auto& [ctx, bytes] : engine::kv_curve(in, max_ctx, 64)) {
        series->append(double(ctx), double(bytes) / kGiB);
        top = std::max(top, double(bytes) / kGiB);
    }
    auto* chart = new QChart;
    chart->addSeries(series);
    if (in.gpu_bytes > in.weight_bytes) {
        auto* budget = new QLineSeries;
        budget->setName(tr("GPU memory left after weights"));
        const double room = double(in.gpu_bytes - in.weight_bytes) / kGiB / std::max(1e-9, 1.0 - in.offload_fraction);
        budget->append(0, room);
        budget->append(double(max_ctx), room);
        budget->setPen(QPen(Qt::gray, 1.5, Qt::DashLine));
        chart->addSeries(budget);
        top = std::max(top, room);
    }
    auto* x = new QValueAxis;
    x->setTitleText(tr("context (tokens)"));
    nice_axis(x, 0, double(max_ctx), true);
    auto* y = new QValueAxis;
    y->setTitleText(tr("GiB"));
    nice_axis(y, 0, top * 1.05 + 1e-9, false);
    show_chart(m_chart, chart, x, y, palette());
}

QString KvPanel::calculatorText() const
{
    return m_c_result->text() + "\n" + m_c_formula->text();
}

void KvPanel::planFile(const QString& path)
{
    m_plan->setText(tr("Reading %1…").arg(path.toHtmlEscaped()));
    const uint32_t n_ctx = uint32_t(m_plan_ctx->value());
    run_in_background(
        this,
        [path, n_ctx] {
            QString text;
            try {
                const engine::MemoryPlan plan = engine::plan_memory(path.toStdString(), n_ctx);
                text = QString("<b>%1</b> (%2): %3")
                           .arg(QString::fromStdString(plan.name).toHtmlEscaped(),
                                QString::fromStdString(plan.architecture).toHtmlEscaped(),
                                QString::fromStdString(plan.message).toHtmlEscaped());
                if (!plan.fits)
                    text = "<span style='color:#d0453a'>" + text + "</span>";
                // The same weights and cache on each Vulkan device, against the memory it has free.
                for (const engine::VulkanDeviceInfo& d : vulkan_devices()) {
                    const uint64_t need = plan.weight_bytes + plan.kv_bytes;
                    const bool fits = d.usable && need <= d.budget_bytes;
                    text += QString("<br>%1Vulkan device %2 (%3): weights + KV cache %4 against %5 free — %6%7")
                                .arg(fits ? "" : "<span style='color:#d0453a'>")
                                .arg(d.index)
                                .arg(QString::fromStdString(d.name).toHtmlEscaped())
                                .arg(binary(double(need)), binary(double(d.budget_bytes)))
                                .arg(!d.usable ? QObject::tr("not usable: %1")
                                                     .arg(QString::fromStdString(d.why_not).toHtmlEscaped())
                                     : fits ? QObject::tr("fits")
                                            : QObject::tr("does not fit"))
                                .arg(fits ? "" : "</span>");
                }
            } catch (const std::exception& e) {
                text = "<span style='color:#d0453a'>" + QString::fromUtf8(e.what()).toHtmlEscaped() + "</span>";
            }
            return text;
        },
        [](KvPanel& self, QString text) {
            self.m_plan->setText(text);
            emit self.planned();
        });
}

QString KvPanel::planText() const
{
    return m_plan->text();
}

} // namespace tokenscope::ui
