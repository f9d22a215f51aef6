// SPDX-License-Identifier: GPL-3.0-or-later
// Runs as documents: File → Save run / Open run. What the panels show is collected as a RunDocument,
// converted to the engine's run file (engine/run/run_file.h) and written off the UI thread; an opened
// run goes to every panel's showSaved().
#include "main_window.h"

#include "bridge/background.h"
#include "bridge/engine_controller.h"
#include "gguf/gguf_file.h"
#include "panels/attention_panel.h"
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
#include "storage/run_document.h"
#include "util/sha256.h"
#include "widgets/count_text.h"

#include <QDateTime>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDockWidget>
#include <QFileInfo>
#include <QLabel>
#include <QLocale>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QStatusBar>
#include <QVBoxLayout>
#include <cstdio>

namespace tokenscope::ui {

namespace {

QString size_text(quint64 bytes)
{
    return QLocale().formattedDataSize(qint64(bytes), 1, QLocale::DataSizeTraditionalFormat);
}

} // namespace

RunDocument MainWindow::currentRun() const
{
    RunDocument d;
    if (m_showing_run && m_run) {
        d.model = m_run->model;
        d.model_sha256 = m_run->model_sha256;
        d.file = m_run->file;
        d.tokenizer = m_run->tokenizer;
    } else if (const auto& m = m_engine->model()) {
        d.model = m;
        if (const auto it = m_model_sha256.find(m->path); it != m_model_sha256.end())
            d.model_sha256 = it->second;
    }
    d.saved_at = QDateTime::currentDateTimeUtc().toString(Qt::ISODate);
    if (const auto& s = m_stepper->state(); s && s->error.isEmpty()) {
        d.stepper = s;
        d.distributions = m_stepper->drawnFrom();
        d.stepper_settings = m_stepper->settings();
    }
    d.kv = m_kv->snapshot();
    d.timeline = m_timeline->timeline();
    d.attention = m_attention->snapshot();
    d.text = m_text->result();
    d.patching = m_lab->patching();
    d.attribution = m_lab->attribution();
    d.head_classes = m_lab->headsTab()->classes();
    d.head_scan = m_lab->headsTab()->scanned();
    d.ablation = m_lab->headsTab()->ablation();
    d.steering = m_lab->steeringTab()->result();
    if (const auto& serving = m_serving->result(); serving && serving->error.isEmpty() && !serving->runs.empty())
        d.serving = serving;
    if (const auto& sp = m_speculation->result();
        sp && sp->error.isEmpty() && (sp->finished || sp->cancelled) && !sp->result.tokens.empty())
        d.speculation = sp;
    if (const auto& ex = m_experts->snapshot(); ex && ex->error.isEmpty() && !ex->dense && !ex->ids.empty())
        d.experts = ex;
    return d;
}

namespace {

struct RunSize {
    quint64 total = 0, vocabulary = 0, attention = 0;
};

// What a save writes now: the vocabulary from the run's own file or the model's, and the model's
// SHA-256 counted as the 64 characters it will be once computed.
RunSize run_size(RunDocument d)
{
    std::shared_ptr<const engine::gguf::GgufFile> vocabulary = d.file;
    try {
        if (!vocabulary && d.model && !d.model->path.isEmpty() && QFileInfo::exists(d.model->path))
            vocabulary = engine::gguf::GgufFile::open(d.model->path.toStdString());
    } catch (const std::exception&) {
        vocabulary.reset(); // not readable now: the save will say so
    }
    if (d.model_sha256.isEmpty() && vocabulary && !d.file)
        d.model_sha256 = QString(64, '0');
    const auto contents = to_run_contents(d);
    RunSize s;
    s.total = engine::run::run_file_size(contents, vocabulary.get());
    s.vocabulary = s.total - engine::run::run_file_size(contents, nullptr);
    for (const auto& a : contents.arrays)
        if (a.name.starts_with("attention."))
            s.attention += a.values.size() * 2;
    return s;
}

} // namespace

quint64 MainWindow::runFileSize() const
{
    const RunDocument d = currentRun();
    return d.empty() ? 0 : run_size(d).total;
}

QString MainWindow::runSummary() const
{
    const RunDocument d = currentRun();
    if (d.empty())
        return tr("There is nothing to save yet: run the stepper, capture attention, analyse a text, run a lab "
                  "experiment or serve a workload first.");
    const RunSize s = run_size(d);
    return tr("The run holds: %1.\nThe file will take %2 (the model's vocabulary %3, recorded attention %4 as F16); "
              "the model itself (%5) is not included.")
        .arg(d.parts(), tr("%1 (%2 bytes)").arg(size_text(s.total), numberText(qulonglong(s.total))),
             size_text(s.vocabulary), size_text(s.attention), d.model ? d.model->name : tr("unknown"));
}

QDialog* MainWindow::saveRunQuestion()
{
    const bool empty = currentRun().empty();
    auto* dialog = new QDialog(this);
    dialog->setWindowTitle(tr("Save run"));
    auto* layout = new QVBoxLayout(dialog);
    auto* text = new QLabel(runSummary());
    text->setTextFormat(Qt::PlainText); // the model's name comes from the file
    text->setWordWrap(true);
    text->setFixedWidth(text->fontMetrics().averageCharWidth() * 70); // a paragraph, not a column of words
    layout->addWidget(text);
    auto* buttons =
        new QDialogButtonBox(empty ? QDialogButtonBox::Ok : QDialogButtonBox::Save | QDialogButtonBox::Cancel);
    if (!empty)
        buttons->button(QDialogButtonBox::Save)->setText(tr("Save…"));
    layout->addWidget(buttons);
    connect(buttons, &QDialogButtonBox::accepted, dialog,
            [dialog, empty] { empty ? dialog->reject() : dialog->accept(); });
    connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::reject);
    return dialog;
}

void MainWindow::reportRunError(const QString& what, const QString& error)
{
    statusBar()->showMessage(what, 15000);
    if (m_dialogs) {
        QMessageBox box(QMessageBox::Warning, what, error, QMessageBox::Ok, this);
        box.setTextFormat(Qt::PlainText); // the message quotes file names
        box.exec();
    } else {
        std::fprintf(stderr, "%s: %s\n", qPrintable(what), qPrintable(error));
    }
}

void MainWindow::saveRun(const QString& path)
{
    RunDocument doc = currentRun();
    if (doc.empty()) {
        const QString error = tr("There is nothing to save yet.");
        reportRunError(tr("Run not saved"), error);
        emit runSaved(path, error);
        return;
    }
    // A live model's file gives the vocabulary and, once, its SHA-256 (a few seconds for a large one).
    const QString model_path = doc.file || !doc.model ? QString() : doc.model->path;
    struct Saved {
        QString sha256, error;
        quint64 bytes = 0;
    };
    statusBar()->showMessage(tr("Saving the run to %1…").arg(QFileInfo(path).fileName()));
    run_in_background(
        this,
        [doc = std::move(doc), path, model_path] {
            Saved r;
            try {
                RunDocument run = doc;
                std::shared_ptr<const engine::gguf::GgufFile> vocabulary = doc.file;
                if (!model_path.isEmpty() && QFileInfo::exists(model_path)) {
                    vocabulary = engine::gguf::GgufFile::open(model_path.toStdString());
                    if (run.model_sha256.isEmpty())
                        run.model_sha256 = QString::fromStdString(engine::sha256_file(model_path.toStdString()));
                }
                engine::run::write_run_file(path.toStdString(), to_run_contents(run), vocabulary.get());
                r.sha256 = run.model_sha256;
                r.bytes = quint64(QFileInfo(path).size());
            } catch (const std::exception& e) {
                r.error = QString::fromUtf8(e.what());
            }
            return r;
        },
        [path, model_path](MainWindow& w, Saved r) {
            if (!r.error.isEmpty()) {
                w.reportRunError(QObject::tr("Run not saved"),
                                 QObject::tr("Could not save the run to %1: %2").arg(path, r.error));
            } else {
                if (!model_path.isEmpty() && !r.sha256.isEmpty())
                    w.m_model_sha256[model_path] = r.sha256;
                w.statusBar()->showMessage(
                    QObject::tr("Saved the run to %1 (%2)").arg(QFileInfo(path).fileName(), size_text(r.bytes)), 8000);
            }
            emit w.runSaved(path, r.error);
        });
}

void MainWindow::openRun(const QString& path)
{
    struct Opened {
        std::shared_ptr<const RunDocument> run;
        QString error;
    };
    static quint64 next_open = 0;
    if (m_run_opening)
        cancelOpenRun(); // the newer file wins
    const quint64 ticket = m_run_opening = ++next_open;
    m_run_opening_path = path;
    // A large run takes seconds to read and check: the bar shows it is busy, and Cancel stops waiting.
    // (No temporary message: the status bar would draw it over the button.)
    statusBar()->clearMessage();
    m_cancel_open->setText(tr("Cancel opening %1").arg(QFileInfo(path).fileName()));
    m_progress->setRange(0, 0);
    setBarWidgetVisible(m_progress, true);
    setBarWidgetVisible(m_cancel_open, true);
    run_in_background(
        this,
        [path] {
            Opened r;
            try {
                const auto opened = engine::run::read_run_file(path.toStdString());
                r.run = std::make_shared<const RunDocument>(run_document_from(opened, path));
            } catch (const std::exception& e) {
                r.error = QString::fromUtf8(e.what());
            }
            return r;
        },
        [path, ticket](MainWindow& w, Opened r) {
            if (w.m_run_opening != ticket)
                return; // cancelled, or another file opened since: its result is not shown
            w.endRunOpening();
            if (!r.error.isEmpty())
                w.reportRunError(QObject::tr("Cannot open the run"), r.error);
            else
                w.showRun(std::move(r.run));
            emit w.runOpened(path, r.error);
        });
}

void MainWindow::endRunOpening()
{
    m_run_opening = 0;
    setBarWidgetVisible(m_progress, false);
    m_progress->setRange(0, 100); // the load's percentages again
    setBarWidgetVisible(m_cancel_open, false);
}

void MainWindow::cancelOpenRun()
{
    if (!m_run_opening)
        return;
    endRunOpening();
    statusBar()->showMessage(
        tr("Stopped opening %1: the window shows what it showed before").arg(QFileInfo(m_run_opening_path).fileName()),
        8000);
    emit runOpened(m_run_opening_path, tr("cancelled"));
}

void MainWindow::showRun(std::shared_ptr<const RunDocument> run)
{
    m_run = run;
    const RunDocument& d = *run;
    if (d.stepper)
        m_stepper->showSaved(d.stepper, d.distributions, d.stepper_settings);
    if (d.kv)
        m_kv->showSaved(d.kv);
    if (d.timeline)
        m_timeline->showSaved(d.timeline);
    if (d.attention)
        m_attention->showSaved(d.attention);
    if (d.text)
        m_text->showSaved(d.text);
    m_lab->showSaved(d.patching, d.attribution);
    m_lab->headsTab()->showSaved(d.head_classes, d.head_scan, d.ablation);
    if (d.steering)
        m_lab->steeringTab()->showSaved(d.steering);
    if (d.serving)
        m_serving->showSaved(d.serving);
    if (d.speculation)
        m_speculation->showSaved(d.speculation);
    if (d.experts)
        m_experts->showSaved(d.experts);
    m_showing_run = true; // until a live result replaces part of it
    const QString model = d.model ? d.model->name : tr("unknown model");
    const QString file = QFileInfo(d.path).fileName();
    setWindowTitle(tr("%1 (%2) — Tokenscope").arg(file, model));
    if (!m_engine->model() && d.model) {
        // The model bar says whose run this is and that nothing runs live behind it.
        const ModelSummary& m = *d.model;
        setModelBar(tr("  Saved run <b>%1</b> · recorded with <b>%2</b> · %3 · %4 M parameters · %5 · "
                       "SHA-256 %6… · no model loaded: open one to run live")
                        .arg(file.toHtmlEscaped(), model.toHtmlEscaped(), m.architecture.toHtmlEscaped())
                        .arg(decimalText(double(m.parameters) / 1e6, 0))
                        .arg(m.quant_types.toHtmlEscaped(), d.model_sha256.left(12).toHtmlEscaped()));
    }
    statusBar()->showMessage(
        tr("Opened %1: %2%3")
            .arg(file, d.parts(), d.saved_at.isEmpty() ? QString() : tr(" — saved %1").arg(d.saved_at)),
        15000);
    if (d.stepper)
        if (auto* dock = findChild<QDockWidget*>("dock-stepper")) {
            dock->show();
            dock->raise();
        }
}

} // namespace tokenscope::ui
