// SPDX-License-Identifier: GPL-3.0-or-later
#include "panels/lab_steering_tab.h"
#include "bridge/lab_client.h"

#include "bridge/engine_controller.h"
#include "lab/steering.h"
#include "util/error.h"
#include "widgets/count_text.h"

#include <QCheckBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QVBoxLayout>

namespace tokenscope::ui {

LabSteeringTab::LabSteeringTab(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine)
{
    auto* v = new QVBoxLayout(this);
    auto* form = new QFormLayout;
    m_plus = new QLineEdit("I love this. It is wonderful, beautiful and kind.");
    m_minus = new QLineEdit("I hate this. It is awful, ugly and cruel.");
    m_prompt = new QLineEdit("My opinion of the movie:");
    m_prompt->setObjectName("labSteerPrompt");
    form->addRow(tr("Towards"), m_plus);
    form->addRow(tr("Away from"), m_minus);
    auto* row = new QHBoxLayout;
    m_layer = new QSpinBox;
    m_layer->setRange(1, 1);
    m_layer->setPrefix(tr("after layer "));
    m_strength = new QSlider(Qt::Horizontal);
    m_strength->setObjectName("labStrength");
    m_strength->setRange(-200, 200); // tenths
    m_strength->setValue(10);
    m_strength_label = new QLabel;
    m_tokens = new QSpinBox;
    m_tokens->setRange(1, 256);
    m_tokens->setValue(24);
    m_tokens->setSuffix(tr(" tokens"));
    row->addWidget(m_layer);
    row->addWidget(new QLabel(tr("strength")));
    row->addWidget(m_strength, 1);
    row->addWidget(m_strength_label);
    row->addWidget(m_tokens);
    form->addRow(tr("Direction"), row);
    form->addRow(tr("Prompt"), m_prompt);
    v->addLayout(form);
    auto* buttons = new QHBoxLayout;
    m_run = new QPushButton(tr("Generate side by side"));
    m_run->setObjectName("labSteer");
    m_export = new QPushButton(tr("Export control vector…"));
    m_export->setToolTip(tr("A llama.cpp control-vector GGUF: llama-cli --control-vector-scaled FILE:STRENGTH"));
    m_export->setEnabled(false);
    m_apply = new QCheckBox(tr("Steer the chat and the stepper"));
    m_apply->setObjectName("labApplySteering");
    m_apply->setToolTip(tr("Every pass of the chat and the stepper adds the direction; their sequences start again"));
    buttons->addWidget(m_run);
    buttons->addWidget(m_export);
    buttons->addStretch(1);
    buttons->addWidget(m_apply);
    v->addLayout(buttons);
    m_status = new QLabel(tr("The same greedy draw on both sides: only the steering differs."));
    m_status->setWordWrap(true);
    v->addWidget(m_status);
    auto* sides = new QHBoxLayout;
    for (auto** edit : {&m_default, &m_steered}) {
        auto* box = new QVBoxLayout;
        box->addWidget(new QLabel(edit == &m_default ? tr("Default") : tr("Steered")));
        *edit = new QPlainTextEdit;
        (*edit)->setReadOnly(true);
        box->addWidget(*edit, 1);
        sides->addLayout(box, 1);
    }
    v->addLayout(sides, 1);

    const auto show_strength = [this] {
        m_strength_label->setText(QString::number(m_strength->value() / 10.0, 'f', 1));
    };
    show_strength();
    connect(m_strength, &QSlider::valueChanged, this, show_strength);
    connect(m_run, &QPushButton::clicked, this, [this] { run(settings()); });
    // While the chat and the stepper are steered, a new strength or layer applies at once.
    const auto reapply = [this] {
        if (m_applied)
            m_engine->lab().setSteering(true, settings());
    };
    connect(m_strength, &QSlider::sliderReleased, this, reapply);
    connect(m_layer, &QSpinBox::editingFinished, this, reapply);
    connect(m_apply, &QCheckBox::toggled, this, &LabSteeringTab::applyToSessions);
    connect(m_export, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Export control vector"), "steering.gguf", "*.gguf");
        QString error;
        if (!path.isEmpty() && !exportControlVector(path, &error))
            QMessageBox::warning(this, tr("Export"), error);
    });
    connect(&engine->lab(), &LabClient::steeringReady, this, &LabSteeringTab::onResult);
    connect(&engine->lab(), &LabClient::steeringApplied, this, [this](bool on, const QString& error) {
        m_applied = on;
        if (!error.isEmpty())
            m_status->setText(error);
        else
            m_status->setText(on ? tr("The chat and the stepper are steered (layer %1, strength %2); their sequences "
                                      "started again.")
                                       .arg(m_layer->value())
                                       .arg(m_strength->value() / 10.0)
                                 : tr("Steering is off for the chat and the stepper."));
        emit appliedChanged(on);
    });
}

void LabSteeringTab::setLayers(int n_layers)
{
    m_layer->setRange(1, std::max(1, n_layers - 1));
    m_layer->setValue(std::min(std::max(1, n_layers / 3), std::max(1, n_layers - 1)));
}

void LabSteeringTab::reset()
{
    m_result.reset();
    m_default->clear();
    m_steered->clear();
    m_export->setEnabled(false);
    const QSignalBlocker block(m_apply);
    m_apply->setChecked(false);
    m_applied = false;
}

SteeringSettings LabSteeringTab::settings() const
{
    SteeringSettings s;
    s.plus = m_plus->text();
    s.minus = m_minus->text();
    s.prompt = m_prompt->text();
    s.layer = m_layer->value();
    s.strength = m_strength->value() / 10.0;
    s.tokens = m_tokens->value();
    return s;
}

void LabSteeringTab::setForm(const SteeringSettings& s)
{
    m_plus->setText(s.plus);
    m_minus->setText(s.minus);
    m_prompt->setText(s.prompt);
    m_layer->setValue(s.layer);
    m_strength->setValue(int(std::lround(s.strength * 10)));
    m_tokens->setValue(s.tokens);
}

void LabSteeringTab::run(const SteeringSettings& s)
{
    setForm(s);
    if (m_request)
        m_engine->cancel(m_request);
    m_request = m_engine->lab().steer(settings());
    m_run->setEnabled(false);
    m_status->setText(tr("Generating both continuations…"));
}

void LabSteeringTab::showSaved(std::shared_ptr<const SteeringSnapshot> result)
{
    if (m_request)
        m_engine->cancel(m_request);
    m_request = result->request_id;
    if (result->n_layers > 0)
        setLayers(result->n_layers);
    setForm(result->settings); // the form says what the two continuations are of
    onResult(std::move(result));
}

void LabSteeringTab::onResult(std::shared_ptr<const SteeringSnapshot> s)
{
    if (s->request_id != m_request)
        return;
    m_request = 0;
    m_run->setEnabled(true);
    if (!s->error.isEmpty()) {
        m_status->setText(s->error);
        emit finished();
        return;
    }
    m_result = s;
    m_default->setPlainText(s->settings.prompt + s->default_text);
    m_steered->setPlainText(s->settings.prompt + s->steered_text);
    m_export->setEnabled(true);
    m_status->setText(tr("Direction after layer %1 (norm %2) × %3 · KL of the first generated token's distribution "
                         "%4 nats · greedy on both sides")
                          .arg(s->settings.layer)
                          .arg(decimalText(s->norm, 2))
                          .arg(decimalText(s->settings.strength, 1))
                          .arg(s->kl, 0, 'g', 4));
    emit finished();
}

QString LabSteeringTab::status() const
{
    return m_status->text();
}

bool LabSteeringTab::exportControlVector(const QString& path, QString* error) const
{
    if (!m_result) {
        if (error)
            *error = tr("Nothing to export: generate first.");
        return false;
    }
    try {
        engine::SteeringVector v;
        v.layer = uint32_t(m_result->settings.layer);
        v.direction = m_result->direction;
        engine::write_control_vector(path.toStdString(), v, m_result->architecture.toStdString(),
                                     uint32_t(m_result->n_layers));
        return true;
    } catch (const std::exception& e) {
        if (error)
            *error = QString::fromUtf8(e.what());
        return false;
    }
}

void LabSteeringTab::applyToSessions(bool on)
{
    {
        const QSignalBlocker block(m_apply);
        m_apply->setChecked(on);
    }
    m_engine->lab().setSteering(on, settings());
}

} // namespace tokenscope::ui
