// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/lab_types.h"

#include <QWidget>
#include <memory>

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTabWidget;

namespace tokenscope::ui {

class AttributionWaterfall;
class LabHeadsTab;
class LabSteeringTab;
class EffectGrid;
class EngineController;

// The interpretability lab on the loaded GGUF model: activation patching (a clean and a corrupted
// prompt of the same token length; which layers and positions, or heads, restore the clean
// prediction, normalised 0 = corrupted … 1 = clean; progress and Stop; CSV/JSON/PNG/SVG export)
// and direct logit attribution (a waterfall of the embedding's, every head's and every MLP's part
// of a token's logit, adding up to the real logit). The stepper's "Attribute" sends its sequence
// and chosen token here.
class LabPanel : public QWidget {
    Q_OBJECT
public:
    explicit LabPanel(EngineController* engine, QWidget* parent = nullptr);

    // Patching: fill the form and run (scripts, tests).
    void runPatching(const PatchingSettings& settings);
    void stopPatching();
    // Attribution of `token` (-1: the most likely) after `ids`, or after the prompt when ids is empty.
    void attribute(const QString& prompt, const std::vector<int32_t>& ids = {}, int token = -1);
    void showTab(int index); // 0 patching, 1 attribution, 2 heads, 3 steering
    LabHeadsTab* headsTab() const { return m_heads; }
    LabSteeringTab* steeringTab() const { return m_steering; }

    const std::shared_ptr<const PatchingSnapshot>& patching() const { return m_patching; }
    const std::shared_ptr<const AttributionSnapshot>& attribution() const { return m_attribution; }
    // A saved run's experiments (either may be null: that part is left as it is).
    void showSaved(std::shared_ptr<const PatchingSnapshot> patching,
                   std::shared_ptr<const AttributionSnapshot> attribution);
    EffectGrid* grid() const { return m_grid; }
    AttributionWaterfall* waterfall() const { return m_waterfall; }
    // The status lines as shown: the last result's summary, or why it could not run.
    QString patchingStatus() const;
    QString attributionStatus() const;
    bool patchingRunning() const { return m_patch_request != 0; }

    bool exportCsv(const QString& path, QString* error = nullptr) const;
    bool exportJson(const QString& path, QString* error = nullptr) const;
    bool exportImage(const QString& path, QString* error = nullptr) const; // .png or .svg

signals:
    void patchingFinished();
    void attributionFinished();

private:
    QWidget* buildPatchingTab();
    QWidget* buildAttributionTab();
    void onPatching(std::shared_ptr<const PatchingSnapshot> s);
    void setForm(const PatchingSettings& s);
    void onAttribution(std::shared_ptr<const AttributionSnapshot> s);
    void updateMetricFields();
    void exportWithDialog(const QString& ext);
    PatchingSettings formSettings() const;
    QString describePatching() const;
    QString describeAttribution() const;

    EngineController* m_engine;
    QTabWidget* m_tabs = nullptr;
    LabHeadsTab* m_heads = nullptr;
    LabSteeringTab* m_steering = nullptr;
    // patching
    QLineEdit *m_clean = nullptr, *m_corrupt = nullptr, *m_token_a = nullptr, *m_token_b = nullptr;
    QComboBox *m_metric = nullptr, *m_over = nullptr;
    QPushButton *m_run = nullptr, *m_stop = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_patch_status = nullptr;
    EffectGrid* m_grid = nullptr;
    QList<QPushButton*> m_exports;
    quint64 m_patch_request = 0;
    std::shared_ptr<const PatchingSnapshot> m_patching;
    // attribution
    QLineEdit *m_prompt = nullptr, *m_token = nullptr, *m_versus = nullptr;
    QSpinBox* m_shown = nullptr;
    QPushButton* m_attribute = nullptr;
    QLabel* m_attr_status = nullptr;
    AttributionWaterfall* m_waterfall = nullptr;
    quint64 m_attr_request = 0;
    int m_attr_sequence_tokens = 0; // the last attribution was of the stepper's sequence (its length)
    std::shared_ptr<const AttributionSnapshot> m_attribution;
};

} // namespace tokenscope::ui
