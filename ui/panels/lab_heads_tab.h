// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/lab_types.h"

#include <QWidget>
#include <memory>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace tokenscope::ui {

class EngineController;
class ModelHeadMap;

// The lab's heads tab: every head classified on a probe of repeated random tokens (grid coloured
// by class, sortable table of scores), an ablation scan ranking every head by how much turning it
// off moves a prompt's prediction (progress, Stop, CSV export), and the heads clicked in the grid
// ablated together with the distribution before and after.
class LabHeadsTab : public QWidget {
    Q_OBJECT
public:
    explicit LabHeadsTab(EngineController* engine, QWidget* parent = nullptr);

    void classify(int repeat = 24, quint64 seed = 1);
    void scan(const AblationSettings& settings);
    void stopScan();
    void ablateSelected();
    // Adds the head to the ablation set, or takes it out (the attention grid's right-click).
    void toggleHead(int layer, int head);
    // The stepper's current sequence and the token Step would take: "on the stepper's sequence"
    // ablates there and reports that token's logit.
    void setStepperSequence(std::vector<int32_t> ids, int token);
    ModelHeadMap* grid() const { return m_grid; }
    QTableWidget* table() const { return m_table; }
    const std::shared_ptr<const HeadsSnapshot>& classes() const { return m_classes; }
    const std::shared_ptr<const HeadsSnapshot>& scanned() const { return m_scan; }
    const std::shared_ptr<const AblationSnapshot>& ablation() const { return m_ablation; }
    QString status() const;
    // A saved run's classification, scan and ablation (any may be null: that part is left as it is).
    void showSaved(std::shared_ptr<const HeadsSnapshot> classes, std::shared_ptr<const HeadsSnapshot> scan,
                   std::shared_ptr<const AblationSnapshot> ablation);
    bool exportCsv(const QString& path, QString* error = nullptr) const;
    void reset();

signals:
    void classified();
    void scanFinished();
    void ablated();

private:
    void onHeads(std::shared_ptr<const HeadsSnapshot> s);
    void onAblation(std::shared_ptr<const AblationSnapshot> s);
    void fillTable();
    AblationSettings formSettings() const;

    EngineController* m_engine;
    QSpinBox *m_repeat = nullptr, *m_seed = nullptr;
    QLineEdit *m_prompt = nullptr, *m_reference = nullptr;
    QComboBox* m_mode = nullptr;
    QPushButton *m_classify = nullptr, *m_scan_button = nullptr, *m_stop = nullptr, *m_ablate = nullptr,
                *m_export = nullptr;
    QCheckBox* m_by_scan = nullptr;
    QCheckBox* m_on_stepper = nullptr;
    std::vector<int32_t> m_stepper_ids;
    int m_stepper_token = -1;
    QProgressBar* m_progress = nullptr;
    QLabel* m_status = nullptr;
    ModelHeadMap* m_grid = nullptr;
    QTableWidget* m_table = nullptr;
    QTableWidget* m_before_after = nullptr;
    quint64 m_classes_request = 0, m_scan_request = 0, m_ablate_request = 0;
    std::shared_ptr<const HeadsSnapshot> m_classes, m_scan;
    std::shared_ptr<const AblationSnapshot> m_ablation;
};

} // namespace tokenscope::ui
