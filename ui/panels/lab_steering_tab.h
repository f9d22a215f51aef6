// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/lab_types.h"

#include <QWidget>
#include <memory>

class QCheckBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSlider;
class QSpinBox;

namespace tokenscope::ui {

class EngineController;

// The lab's steering tab: a direction from two contrasting prompts (the residual after a layer at
// their last positions, one minus the other), added with a strength to every position after that
// layer; the default and the steered greedy continuation of a prompt side by side; exported as a
// llama.cpp control vector; and, on request, applied to the chat and the stepper.
class LabSteeringTab : public QWidget {
    Q_OBJECT
public:
    explicit LabSteeringTab(EngineController* engine, QWidget* parent = nullptr);

    void run(const SteeringSettings& settings);
    SteeringSettings settings() const;
    void setLayers(int n_layers);
    const std::shared_ptr<const SteeringSnapshot>& result() const { return m_result; }
    QString status() const;
    void showSaved(std::shared_ptr<const SteeringSnapshot> result); // a saved run's steering experiment
    bool exportControlVector(const QString& path, QString* error = nullptr) const;
    void applyToSessions(bool on);
    bool applied() const { return m_applied; }
    void reset();

signals:
    void finished();
    void appliedChanged(bool on);

private:
    void onResult(std::shared_ptr<const SteeringSnapshot> s);
    void setForm(const SteeringSettings& s);

    EngineController* m_engine;
    QLineEdit *m_plus = nullptr, *m_minus = nullptr, *m_prompt = nullptr;
    QSpinBox *m_layer = nullptr, *m_tokens = nullptr;
    QSlider* m_strength = nullptr;
    QLabel* m_strength_label = nullptr;
    QPushButton *m_run = nullptr, *m_export = nullptr;
    QCheckBox* m_apply = nullptr;
    QPlainTextEdit *m_default = nullptr, *m_steered = nullptr;
    QLabel* m_status = nullptr;
    quint64 m_request = 0;
    bool m_applied = false;
    std::shared_ptr<const SteeringSnapshot> m_result;
};

} // namespace tokenscope::ui
