// SPDX-License-Identifier: GPL-3.0-or-later
#include "panels/lab_heads_tab.h"
#include "bridge/lab_client.h"

#include "bridge/engine_controller.h"
#include "lab/head_classes.h"
#include "storage/atomic_save.h"
#include "widgets/count_text.h"
#include "widgets/flow_layout.h"
#include "widgets/model_head_map.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollBar>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

namespace tokenscope::ui {

namespace {

// The class's name as the engine gives it (cls clamped to the known classes).
QString class_name(int cls)
{
    return QString::fromUtf8(engine::head_class_name(engine::HeadClass(std::clamp(cls, 0, 5))).data());
}

// A number cell that sorts by value.
QTableWidgetItem* number(double v, int decimals = 3)
{
    auto* item = new QTableWidgetItem;
    item->setData(Qt::DisplayRole, QString::number(v, 'f', decimals).toDouble());
    item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    return item;
}

} // namespace

LabHeadsTab::LabHeadsTab(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine)
{
    auto* v = new QVBoxLayout(this);
    auto* classes = new FlowLayout; // the rows wrap in a narrow dock
    m_classify = new QPushButton(tr("Classify heads"));
    m_classify->setObjectName("labClassify");
    m_classify->setToolTip(tr("One pass over BOS + N random tokens repeated twice, every head's attention captured"));
    m_repeat = new QSpinBox;
    m_repeat->setRange(4, 120);
    m_repeat->setValue(24);
    m_repeat->setPrefix(tr("2 × "));
    m_repeat->setSuffix(tr(" random tokens"));
    m_seed = new QSpinBox;
    m_seed->setRange(0, 1 << 30);
    m_seed->setValue(1);
    m_seed->setPrefix(tr("seed "));
    classes->addWidget(m_classify);
    classes->addWidget(m_repeat);
    classes->addWidget(m_seed);
    v->addLayout(classes);

    auto* form = new QFormLayout;
    m_prompt = new QLineEdit("The Eiffel Tower is in the city of");
    m_prompt->setObjectName("labHeadsPrompt");
    auto* mode_row = new QHBoxLayout;
    m_mode = new QComboBox;
    m_mode->addItems({tr("zero"), tr("mean over the reference prompt"), tr("resample from the reference prompt")});
    m_reference = new QLineEdit;
    m_reference->setPlaceholderText(tr("reference prompt (mean and resample)"));
    mode_row->addWidget(m_mode);
    mode_row->addWidget(m_reference, 1);
    form->addRow(tr("Prompt"), m_prompt);
    form->addRow(tr("Ablation"), mode_row);
    v->addLayout(form);

    auto* run = new FlowLayout;
    m_scan_button = new QPushButton(tr("Scan every head"));
    m_scan_button->setObjectName("labScan");
    m_stop = new QPushButton(tr("Stop"));
    m_stop->setObjectName("labStopScan");
    m_stop->setEnabled(false);
    m_progress = new QProgressBar;
    m_ablate = new QPushButton(tr("Ablate selected"));
    m_ablate->setObjectName("labAblate");
    m_ablate->setEnabled(false);
    m_export = new QPushButton(tr("CSV"));
    m_export->setToolTip(tr("Export every head's scores and scan effects as CSV"));
    m_export->setEnabled(false);
    m_on_stepper = new QCheckBox(tr("on the stepper's sequence"));
    m_on_stepper->setObjectName("labOnStepper");
    m_on_stepper->setToolTip(tr("Ablate on the stepper's current sequence and follow the token Step would take"));
    m_on_stepper->setEnabled(false);
    m_by_scan = new QCheckBox(tr("Colour by scan"));
    m_by_scan->setEnabled(false);
    run->addWidget(m_scan_button);
    run->addWidget(m_stop);
    run->addWidget(m_progress);
    run->addWidget(m_ablate);
    run->addWidget(m_on_stepper);
    run->addWidget(m_by_scan);
    run->addWidget(m_export);
    v->addLayout(run);
    m_status = new QLabel(tr("Click heads in the grid to put them in the ablation set."));
    m_status->setWordWrap(true);
    m_status->setTextFormat(Qt::PlainText); // it names tokens: never markup
    v->addWidget(m_status);

    auto* split = new QSplitter(Qt::Horizontal);
    m_grid = new ModelHeadMap;
    split->addWidget(m_grid);
    auto* right = new QSplitter(Qt::Vertical);
    m_table = new QTableWidget(0, 11);
    m_table->setHorizontalHeaderLabels({tr("layer"), tr("head"), tr("class"), tr("prev"), tr("induct"), tr("dup"),
                                        tr("first"), tr("self"), tr("entropy"), tr("KL ablated"), tr("Δlogit")});
    m_table->setSortingEnabled(true);
    m_table->verticalHeader()->hide();
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    right->addWidget(m_table);
    m_before_after = new QTableWidget(0, 2);
    m_before_after->setHorizontalHeaderLabels({tr("before"), tr("after ablation")});
    m_before_after->verticalHeader()->hide();
    m_before_after->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_before_after->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    right->addWidget(m_before_after);
    split->addWidget(right);
    split->setStretchFactor(0, 2);
    split->setStretchFactor(1, 3);
    v->addWidget(split, 1);

    connect(m_classify, &QPushButton::clicked, this, [this] { classify(m_repeat->value(), quint64(m_seed->value())); });
    connect(m_scan_button, &QPushButton::clicked, this, [this] { scan(formSettings()); });
    connect(m_stop, &QPushButton::clicked, this, &LabHeadsTab::stopScan);
    connect(m_ablate, &QPushButton::clicked, this, &LabHeadsTab::ablateSelected);
    connect(m_by_scan, &QCheckBox::toggled, m_grid, &ModelHeadMap::showScan);
    connect(m_grid, &ModelHeadMap::selectionChanged, this, [this] {
        const auto n = int(m_grid->selected().size());
        m_ablate->setEnabled(n > 0);
        m_ablate->setText(n ? tr("Ablate %n selected", nullptr, n) : tr("Ablate selected"));
    });
    connect(m_export, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Export"), "heads.csv", "*.csv");
        QString error;
        if (!path.isEmpty() && !exportCsv(path, &error))
            QMessageBox::warning(this, tr("Export"), error);
    });
    connect(&engine->lab(), &LabClient::headsReady, this, &LabHeadsTab::onHeads);
    connect(&engine->lab(), &LabClient::ablationReady, this, &LabHeadsTab::onAblation);
    connect(&engine->lab(), &LabClient::labProgress, this, [this](quint64 id, int done, int total) {
        if (id != m_scan_request)
            return;
        m_progress->setMaximum(std::max(1, total));
        m_progress->setValue(done);
    });
}

void LabHeadsTab::reset()
{
    m_classes.reset();
    m_scan.reset();
    m_ablation.reset();
    m_grid->setClasses(nullptr);
    m_grid->setScan(nullptr);
    m_grid->setSelected({});
    m_table->setRowCount(0);
    m_before_after->setRowCount(0);
    m_export->setEnabled(false);
    m_by_scan->setEnabled(false);
}

AblationSettings LabHeadsTab::formSettings() const
{
    AblationSettings s;
    s.prompt = m_prompt->text();
    s.mode = m_mode->currentIndex();
    s.reference = m_reference->text();
    for (const auto& h : m_grid->selected())
        s.heads.push_back(h);
    if (m_on_stepper->isChecked() && !m_stepper_ids.empty()) {
        s.ids = m_stepper_ids;
        s.token = m_stepper_token;
    }
    return s;
}

void LabHeadsTab::toggleHead(int layer, int head)
{
    auto heads = m_grid->selected();
    if (!heads.erase({layer, head}))
        heads.insert({layer, head});
    m_grid->setSelected(std::move(heads));
    m_status->setText(tr("Ablation set: %1; press Ablate")
                          .arg(countText(qint64(m_grid->selected().size()), tr("head"), tr("heads"))));
}

void LabHeadsTab::setStepperSequence(std::vector<int32_t> ids, int token)
{
    m_stepper_ids = std::move(ids);
    m_stepper_token = token;
    m_on_stepper->setEnabled(!m_stepper_ids.empty());
}

void LabHeadsTab::classify(int repeat, quint64 seed)
{
    m_repeat->setValue(repeat);
    m_seed->setValue(int(seed));
    m_classes_request = m_engine->lab().classifyHeads(repeat, seed);
    m_classify->setEnabled(false);
    m_status->setText(tr("Classifying every head…"));
}

void LabHeadsTab::scan(const AblationSettings& s)
{
    m_prompt->setText(s.prompt);
    m_mode->setCurrentIndex(s.mode);
    m_reference->setText(s.reference);
    if (m_scan_request)
        m_engine->cancel(m_scan_request);
    m_scan_request = m_engine->lab().scanAblations(s);
    m_scan_button->setEnabled(false);
    m_stop->setEnabled(true);
    m_progress->setValue(0);
    m_status->setText(tr("Ablating every head in turn…"));
}

void LabHeadsTab::stopScan()
{
    if (m_scan_request)
        m_engine->cancel(m_scan_request);
}

void LabHeadsTab::ablateSelected()
{
    m_ablate_request = m_engine->lab().ablateHeads(formSettings());
    m_ablate->setEnabled(false);
    m_status->setText(tr("Ablating the selected heads…"));
}

void LabHeadsTab::showSaved(std::shared_ptr<const HeadsSnapshot> classes, std::shared_ptr<const HeadsSnapshot> scan,
                            std::shared_ptr<const AblationSnapshot> ablation)
{
    // Each one is taken as the answer to its own kind of request (their ids are 0: no request).
    constexpr quint64 kNone = ~quint64(0);
    for (quint64 id : {m_classes_request, m_scan_request, m_ablate_request})
        if (id)
            m_engine->cancel(id);
    // The run replaces what the tab showed: a part it lacks is not left over from another model.
    m_classes.reset();
    m_scan.reset();
    m_grid->setClasses(nullptr);
    m_grid->setScan(nullptr);
    if (classes) {
        m_classes_request = classes->request_id;
        onHeads(std::move(classes));
    }
    if (scan) {
        m_classes_request = kNone;
        m_scan_request = scan->request_id;
        onHeads(std::move(scan));
    }
    if (ablation) {
        m_grid->setSelected({ablation->heads.begin(), ablation->heads.end()});
        m_ablate_request = ablation->request_id;
        onAblation(std::move(ablation));
    }
    m_classes_request = m_scan_request = m_ablate_request = 0;
}

void LabHeadsTab::onHeads(std::shared_ptr<const HeadsSnapshot> s)
{
    if (s->request_id == m_classes_request) {
        m_classes_request = 0;
        m_classify->setEnabled(true);
        if (!s->error.isEmpty()) {
            m_status->setText(s->error);
        } else {
            m_classes = s;
            if (m_scan && !m_scan->sameLayout(*s))
                m_scan.reset(); // another model's: the grid drops it too
            m_grid->setClasses(s);
            m_grid->showScan(m_by_scan->isChecked());
            int counts[6] = {};
            for (const HeadInfo& h : s->heads)
                ++counts[std::clamp(h.cls, 0, 5)];
            QStringList parts;
            for (int k = 0; k < 6; ++k)
                if (counts[k])
                    parts << QString("%1 %2").arg(counts[k]).arg(class_name(k));
            m_status->setText(tr("%1 heads classified in %2 ms: %3 (a class needs a score of at least 0.4)")
                                  .arg(s->heads.size())
                                  .arg(decimalText(s->ms, 0))
                                  .arg(parts.join(", ")));
        }
        fillTable();
        emit classified();
        return;
    }
    if (s->request_id != m_scan_request)
        return;
    m_scan_request = 0;
    m_scan_button->setEnabled(true);
    m_stop->setEnabled(false);
    if (!s->error.isEmpty()) {
        m_status->setText(s->error);
        emit scanFinished();
        return;
    }
    m_scan = s;
    if (m_classes && !m_classes->sameLayout(*s))
        m_classes.reset();
    m_grid->setScan(s);
    m_by_scan->setEnabled(true);
    m_by_scan->setChecked(true);
    m_status->setText(tr("%1%2 heads ablated one at a time in %3 s; KL of the next-token distribution and the "
                         "change of %4's logit in the table")
                          .arg(s->cancelled ? tr("Stopped: ") : QString())
                          .arg(s->runs)
                          .arg(decimalText(s->ms / 1000.0, 1))
                          .arg(s->token));
    fillTable();
    emit scanFinished();
}

void LabHeadsTab::onAblation(std::shared_ptr<const AblationSnapshot> s)
{
    if (s->request_id != m_ablate_request)
        return;
    m_ablate_request = 0;
    m_ablate->setEnabled(!m_grid->selected().empty());
    if (!s->error.isEmpty()) {
        m_status->setText(s->error);
        emit ablated();
        return;
    }
    m_ablation = s;
    m_before_after->setRowCount(int(std::max(s->before.size(), s->after.size())));
    for (std::size_t i = 0; i < s->before.size(); ++i)
        m_before_after->setItem(
            int(i), 0,
            new QTableWidgetItem(QString("%1 %2%").arg(s->before[i].text).arg(decimalText(100 * s->before[i].p, 2))));
    for (std::size_t i = 0; i < s->after.size(); ++i)
        m_before_after->setItem(
            int(i), 1,
            new QTableWidgetItem(QString("%1 %2%").arg(s->after[i].text).arg(decimalText(100 * s->after[i].p, 2))));
    m_status->setText(tr("%5 ablated: KL(before ‖ after) = %1 nats; logit of %2 %3 → %4")
                          .arg(s->kl, 0, 'g', 4)
                          .arg(s->token)
                          .arg(decimalText(s->logit, 3))
                          .arg(decimalText(s->ablated_logit, 3))
                          .arg(countText(qint64(s->heads.size()), tr("head"), tr("heads"))));
    emit ablated();
}

void LabHeadsTab::fillTable()
{
    const auto& base = m_classes ? m_classes : m_scan;
    m_table->setSortingEnabled(false);
    m_table->setRowCount(0);
    if (!base)
        return;
    m_table->setRowCount(int(base->heads.size()));
    for (std::size_t r = 0; r < base->heads.size(); ++r) {
        const int layer = base->heads[r].layer, head = base->heads[r].head;
        m_table->setItem(int(r), 0, number(layer, 0));
        m_table->setItem(int(r), 1, number(head, 0));
        if (m_classes && r < m_classes->heads.size() && m_classes->heads[r].scores.size() == 5) {
            const HeadInfo& c = m_classes->heads[r];
            m_table->setItem(int(r), 2, new QTableWidgetItem(class_name(c.cls)));
            for (int k = 0; k < 5; ++k)
                m_table->setItem(int(r), 3 + k, number(c.scores[std::size_t(k)]));
            m_table->setItem(int(r), 8, number(c.entropy));
        }
        if (m_scan && r < m_scan->heads.size() && m_scan->heads[r].kl >= 0) {
            m_table->setItem(int(r), 9, number(m_scan->heads[r].kl, 5));
            m_table->setItem(int(r), 10, number(m_scan->heads[r].logit_change, 4));
        }
    }
    m_table->setSortingEnabled(true);
    m_table->sortItems(m_scan ? 9 : 4, Qt::DescendingOrder);
    // every column whole: the splitter gives the table the width of its columns (the head map beside it
    // scales down), rather than cutting the last ones behind a sideways scroll
    m_table->resizeColumnsToContents();
    m_table->setMinimumWidth(m_table->horizontalHeader()->length() + m_table->verticalScrollBar()->sizeHint().width() +
                             2 * m_table->frameWidth());
    m_export->setEnabled(true);
}

QString LabHeadsTab::status() const
{
    return m_status->text();
}

bool LabHeadsTab::exportCsv(const QString& path, QString* error) const
{
    const auto& base = m_classes ? m_classes : m_scan;
    if (!base) {
        if (error)
            *error = tr("Nothing to export: classify or scan first.");
        return false;
    }
    QByteArray out =
        "layer,head,class,previous_token,induction,duplicate_token,first_token,self,entropy,kl,logit_change\r\n";
    for (std::size_t r = 0; r < base->heads.size(); ++r) {
        const HeadInfo* c = m_classes ? &m_classes->heads[r] : nullptr;
        const HeadInfo* s = m_scan ? &m_scan->heads[r] : nullptr;
        out += QByteArray::number(base->heads[r].layer) + "," + QByteArray::number(base->heads[r].head) + ",";
        out += c && !c->scores.empty() ? class_name(c->cls).toUtf8() : QByteArray();
        for (int k = 0; k < 5; ++k)
            out +=
                "," + (c && !c->scores.empty() ? QByteArray::number(c->scores[std::size_t(k)], 'g', 17) : QByteArray());
        out += "," + (c && !c->scores.empty() ? QByteArray::number(c->entropy, 'g', 17) : QByteArray());
        out += "," + (s && s->kl >= 0 ? QByteArray::number(s->kl, 'g', 17) : QByteArray());
        out += "," + (s && s->kl >= 0 ? QByteArray::number(s->logit_change, 'g', 17) : QByteArray());
        out += "\r\n";
    }
    return save_atomically(path, out, error);
}

} // namespace tokenscope::ui
