// SPDX-License-Identifier: GPL-3.0-or-later
#include "panels/timeline_panel.h"
#include "bridge/inspection_client.h"
#include "widgets/count_text.h"

#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "session/generator.h"
#include "widgets/chart_style.h"
#include "widgets/timeline_view.h"

#include <QChart>
#include <QChartView>
#include <QDateTime>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineSeries>
#include <QPushButton>
#include <QScatterSeries>
#include <QSettings>
#include <QTimer>
#include <QVBoxLayout>
#include <QValueAxis>

namespace tokenscope::ui {

TimelinePanel::TimelinePanel(EngineController* engine, TokenSelection* selection, QWidget* parent)
    : QWidget(parent), m_engine(engine), m_selection(selection)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    auto* row = new QHBoxLayout;
    m_play = new QPushButton(tr("Play back"));
    m_play->setToolTip(tr("Replay the generation at its real speed"));
    m_probe = new QPushButton(tr("Measure this machine"));
    m_probe->setToolTip(tr("A short probe of memory read bandwidth and FLOP rate (all threads), kept for next time"));
    row->addWidget(m_play);
    row->addStretch(1);
    row->addWidget(m_probe);
    layout->addLayout(row);
    m_view = new TimelineView;
    m_view->setMinimumHeight(m_view->sizeHint().height());
    layout->addWidget(m_view);
    m_stats = new QLabel;
    m_stats->setObjectName("timelineStats");
    m_stats->setWordWrap(true);
    m_stats->setTextFormat(Qt::RichText);
    m_stats->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_stats);
    m_chart = new QChartView;
    m_chart->setRenderHint(QPainter::Antialiasing);
    m_chart->setMinimumHeight(180);
    layout->addWidget(m_chart, 1);

    m_playback = new QTimer(this);
    m_playback->setInterval(16);
    connect(m_playback, &QTimer::timeout, this, [this] {
        const qint64 ns = (QDateTime::currentMSecsSinceEpoch() - m_play_started_ms) * 1000000;
        if (ns >= m_view->endNs()) {
            m_playback->stop();
            m_view->setCursor(-1);
            return;
        }
        m_view->setCursor(ns);
    });
    connect(m_play, &QPushButton::clicked, this, &TimelinePanel::play);
    connect(m_probe, &QPushButton::clicked, this, [this] {
        m_probe->setEnabled(false);
        m_probe->setText(tr("Measuring…"));
        m_engine->probeMachine();
    });
    connect(m_engine, &EngineController::machineProbed, this, [this](const MachinePeaksUi& p) {
        m_probe->setEnabled(true);
        m_probe->setText(tr("Measure again"));
        QSettings s;
        s.setValue("machine/read_bytes_per_second", p.read_bytes_per_second);
        s.setValue("machine/flops_per_second", p.flops_per_second);
        s.setValue("machine/threads", p.threads);
        s.setValue("machine/simd", p.simd);
        setPeaks(p);
    });
    connect(&m_engine->inspection(), &InspectionClient::timelineChanged, this, &TimelinePanel::onTimeline);
    connect(m_view, &TimelineView::stepClicked, this, [this](int step) {
        if (m_timeline)
            m_selection->select(m_timeline->prompt_tokens + step);
    });
    connect(m_selection, &TokenSelection::changed, this, [this](int position) {
        m_view->setSelectedStep(
            m_timeline && position >= m_timeline->prompt_tokens ? position - m_timeline->prompt_tokens : -1);
    });

    const QSettings s;
    if (s.contains("machine/read_bytes_per_second")) {
        m_peaks = {s.value("machine/read_bytes_per_second").toDouble(), s.value("machine/flops_per_second").toDouble(),
                   s.value("machine/threads").toInt(), s.value("machine/simd").toString()};
        m_probe->setText(tr("Measure again"));
    }
    renderStats();
    drawChart();
}

void TimelinePanel::setPeaks(const MachinePeaksUi& peaks)
{
    m_peaks = peaks;
    renderStats();
    emit peaksChanged();
}

void TimelinePanel::play()
{
    if (!m_timeline || m_timeline->events.empty())
        return;
    m_play_started_ms = QDateTime::currentMSecsSinceEpoch();
    m_view->setCursor(0);
    m_playback->start();
}

void TimelinePanel::onTimeline(std::shared_ptr<const TimelineSnapshot> timeline)
{
    m_timeline = std::move(timeline);
    m_view->setTimeline(m_timeline);
    renderStats();
    drawChart();
    emit timelineShown();
}

// A speculative run (the Speculation panel): its passes are drafts and verifications, not decode
// steps, so the figures are theirs, from the events; the note holds the comparison with plain decoding.
void TimelinePanel::renderSpeculationStats(const TimelineSnapshot& t)
{
    double draft_ms = 0, verify_ms = 0;
    int drafts = 0, passes = 0;
    for (const TimelineEventUi& e : t.events) {
        const double ms = double(e.end_ns - e.begin_ns) / 1e6;
        if (e.stage == int(engine::TimelineStage::Draft)) {
            draft_ms += ms;
            ++drafts;
        } else if (e.stage == int(engine::TimelineStage::Verify)) {
            verify_ms += ms;
            ++passes;
        }
    }
    const double total_ms = draft_ms + verify_ms;
    QString text = tr("<b>Speculative decoding</b>: prefill %1 ms for %2 · then %3 in %4: drafting %5 ms (%6), "
                      "verifying %7 ms · %8 tokens/s after the prompt")
                       .arg(decimalText(t.prefill_ms, 1))
                       .arg(countText(t.prefill_computed, tr("token"), tr("tokens")))
                       .arg(countText(qint64(t.steps.size()), tr("token"), tr("tokens")))
                       .arg(countText(passes, tr("target pass"), tr("target passes")))
                       .arg(decimalText(draft_ms, 1))
                       .arg(countText(drafts, tr("draft"), tr("drafts")))
                       .arg(decimalText(verify_ms, 1))
                       .arg(decimalText(total_ms > 0 ? 1000.0 * double(t.steps.size()) / total_ms : 0.0, 1));
    if (!t.note.isEmpty())
        text += "<br>" + t.note.toHtmlEscaped();
    m_stats->setText(text);
}

QString TimelinePanel::statsText() const
{
    return m_stats->text();
}

void TimelinePanel::renderStats()
{
    if (!m_timeline || m_timeline->events.empty()) {
        m_stats->setText(
            tr("Prefill multiplies a whole batch of tokens by every weight matrix at once: it is limited by "
               "arithmetic (FLOP/s). Decode produces one token per pass but must still read every weight: "
               "it is limited by memory bandwidth (bytes/s). Run a generation to see both measured.%1")
                .arg(m_peaks.read_bytes_per_second > 0
                         ? tr("<br>This machine: %1 GB/s memory read, %2 GFLOP/s (%3, %4).")
                               .arg(decimalText(m_peaks.read_bytes_per_second / 1e9, 1))
                               .arg(decimalText(m_peaks.flops_per_second / 1e9, 1))
                               .arg(countText(m_peaks.threads, tr("thread"), tr("threads")))
                               .arg(m_peaks.simd)
                         : QString()));
        return;
    }
    const TimelineSnapshot& t = *m_timeline;
    if (t.remote) {
        renderServerStats(t);
        return;
    }
    if (t.source == "speculation") {
        renderSpeculationStats(t);
        return;
    }
    double forward_ms = 0, bytes = 0, flops = 0, itl = 0;
    int n = 0;
    for (std::size_t i = 1; i < t.steps.size(); ++i) {
        forward_ms += t.steps[i].forward_ms;
        bytes += t.steps[i].bytes_read;
        flops += t.steps[i].flops;
        itl += t.steps[i].latency_ms;
        ++n;
    }
    const double prefill_tps = t.prefill_ms > 0 ? 1000.0 * t.prefill_computed / t.prefill_ms : 0.0;
    const double prefill_flops = t.prefill_ms > 0 ? t.prefill_flops / (t.prefill_ms / 1000.0) : 0.0;
    const double decode_tps = forward_ms > 0 ? 1000.0 * n / forward_ms : 0.0;
    const double decode_bytes = forward_ms > 0 ? bytes / (forward_ms / 1000.0) : 0.0;
    const double decode_flops = forward_ms > 0 ? flops / (forward_ms / 1000.0) : 0.0;
    const auto pct = [](double achieved, double peak) {
        return peak > 0 ? QString(" = <b>%1%</b> of this machine's peak").arg(decimalText(100.0 * achieved / peak, 0))
                        : QString();
    };
    QString text = tr("<b>TTFT %1 ms</b> = tokenize %2 + prefill %3 + sample and detokenize the first token · ")
                       .arg(decimalText(t.ttft_ms, 1))
                       .arg(decimalText(t.tokenize_ms, 2))
                       .arg(decimalText(t.prefill_ms, 1));
    text += n ? tr("mean inter-token latency <b>%1 ms</b> over %2")
                    .arg(decimalText(itl / n, 1))
                    .arg(countText(n, tr("token"), tr("tokens")))
              : tr("one token so far");
    text += tr("<br><b>Prefill</b>: %1 in %2 ms = %3 tokens/s · %4 GFLOP/s achieved%5")
                .arg(countText(t.prefill_computed, tr("token"), tr("tokens")))
                .arg(decimalText(t.prefill_ms, 1))
                .arg(decimalText(prefill_tps, 0))
                .arg(decimalText(prefill_flops / 1e9, 1))
                .arg(pct(prefill_flops, m_peaks.flops_per_second));
    if (n)
        text +=
            tr("<br><b>Decode</b>: %1 tokens/s · reads %2 MB of weights and KV per token → %3 GB/s achieved%4 · only "
               "%5 GFLOP/s%6")
                .arg(decimalText(decode_tps, 1))
                .arg(decimalText(bytes / n / 1e6, 1))
                .arg(decimalText(decode_bytes / 1e9, 2))
                .arg(pct(decode_bytes, m_peaks.read_bytes_per_second))
                .arg(decimalText(decode_flops / 1e9, 1))
                .arg(pct(decode_flops, m_peaks.flops_per_second));
    if (m_peaks.read_bytes_per_second <= 0)
        text += tr("<br>Press <i>Measure this machine</i> to compare with its peaks.");
    if (!t.note.isEmpty())
        text += "<br><i>" + t.note.toHtmlEscaped() + "</i>";
    m_stats->setText(text);
}

// A reply from a server: what was measured here (the stream's arrivals) beside what the server says
// it spent; the difference is the network, the server's queue and the stream's own overhead.
void TimelinePanel::renderServerStats(const TimelineSnapshot& t)
{
    double itl = 0.0;
    const int n = t.steps.size() > 1 ? int(t.steps.size()) - 1 : 0;
    for (std::size_t i = 1; i < t.steps.size(); ++i)
        itl += t.steps[i].latency_ms;
    QString text = tr("<b>TTFT %1 ms</b>, measured here: from sending the request to the first token's arrival · ")
                       .arg(decimalText(t.ttft_ms, 1));
    text += n ? tr("mean inter-token latency <b>%1 ms</b> over %2, measured here")
                    .arg(decimalText(itl / n, 1))
                    .arg(countText(n, tr("token"), tr("tokens")))
              : tr("one token");
    text += tr("<br><b>The server's account</b> (%1): ").arg(t.server.toHtmlEscaped());
    if (t.server_prompt_ms >= 0 || t.server_generation_ms >= 0) {
        QStringList parts;
        if (t.server_prompt_ms >= 0)
            parts << tr("prompt %1 ms for %2 new tokens (%3 reused from its cache)")
                         .arg(decimalText(t.server_prompt_ms, 1))
                         .arg(t.prefill_computed)
                         .arg(t.prompt_tokens - t.prefill_computed);
        if (t.server_generation_ms >= 0 && t.server_generated > 0)
            parts << tr("generation %1 ms for %2 = %3 tokens/s")
                         .arg(decimalText(t.server_generation_ms, 1))
                         .arg(countText(t.server_generated, tr("token"), tr("tokens")))
                         .arg(decimalText(1000.0 * t.server_generated / std::max(1e-9, t.server_generation_ms), 1));
        if (t.server_drafted > 0) // llama-server with a draft model (or n-gram drafts)
            parts << tr("speculative decoding: %1 drafted, %2 accepted (%3%)")
                         .arg(countText(t.server_drafted, tr("token"), tr("tokens")))
                         .arg(std::max(0, t.server_draft_accepted))
                         .arg(qRound(100.0 * std::max(0, t.server_draft_accepted) / t.server_drafted));
        text += parts.join(" · ");
        if (t.server_prompt_ms >= 0)
            text += tr("<br><b>Network, queue and streaming</b>: TTFT − the server's prompt time = %1 ms · the "
                       "whole reply took %2 ms here")
                        .arg(decimalText(t.ttft_ms - t.server_prompt_ms, 1))
                        .arg(decimalText(t.total_ms, 1));
    } else {
        text += tr("it reports no timings (only what was measured here is shown)");
    }
    text += tr("<br><i>The server's weights, FLOPs and memory traffic are not visible from here.</i>");
    if (!t.note.isEmpty())
        text += "<br><i>" + t.note.toHtmlEscaped() + "</i>";
    m_stats->setText(text);
}

void TimelinePanel::drawChart()
{
    auto* itl = new QLineSeries;
    itl->setName(tr("inter-token latency (ms)"));
    auto* ttft = new QScatterSeries;
    ttft->setName(tr("TTFT (ms)"));
    double top = 1;
    if (m_timeline)
        for (std::size_t i = 0; i < m_timeline->steps.size(); ++i) {
            const double ms = m_timeline->steps[i].latency_ms;
            if (i == 0)
                ttft->append(0, ms);
            else
                itl->append(double(i), ms);
            top = std::max(top, ms);
        }
    itl->setPen(QPen(palette().color(QPalette::Highlight), 2));
    ttft->setColor(QColor(208, 69, 58));
    auto* chart = new QChart;
    chart->addSeries(itl);
    chart->addSeries(ttft);
    auto* x = new QValueAxis;
    x->setTitleText(tr("token"));
    nice_axis(x, 0, m_timeline ? std::max<double>(1, double(m_timeline->steps.size())) : 1, true);
    auto* y = new QValueAxis;
    y->setTitleText(tr("ms"));
    nice_axis(y, 0, top * 1.05, false);
    show_chart(m_chart, chart, x, y, palette());
}

} // namespace tokenscope::ui
