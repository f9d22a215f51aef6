// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_types.h"

#include <QWidget>
#include <memory>
#include <vector>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QTabWidget;

namespace tokenscope::ui {

class AttentionHeatmap;
class AttentionLines;
class DistributionView;
class EngineController;
class HeadGrid;
class QkView;
class TokenSelection;

// The attention explorer: the weights the engine computed for each head (query × key), per layer
// and head, with the masks visible; all heads of a layer or the whole model as thumbnails; the
// classic two-column lines view; the Q·K arithmetic behind any cell; mean/max over heads and
// attention sinks; two prompts compared with a difference map; export as PNG, SVG, CSV or JSON.
class AttentionPanel : public QWidget {
    Q_OBJECT
public:
    enum class Mode { Head, Mean, Max };

    AttentionPanel(EngineController* engine, TokenSelection* selection, QWidget* parent = nullptr);

    void setPrompt(const QString& text);
    void run();         // captures the current layer (or every layer when asked)
    void runSequence(); // the model's current sequence (chat or stepper)
    void captureAllLayers();
    void showHead(int layer, int head);
    void setMode(Mode mode);
    void showTab(int index);            // 0 head, 1 layer grid, 2 lines, 3 compare
    void setOverview(bool whole_model); // the layer grid shows every captured layer
    void selectCell(int row, int column);
    void compare(const QString& a, const QString& b);
    void compareBankExample();

    const std::shared_ptr<const AttentionSnapshot>& snapshot() const { return m_snapshot; }
    void showSaved(std::shared_ptr<const AttentionSnapshot> snapshot); // a saved run's captures
    const AttentionHead* currentHead() const;
    int layer() const;
    int head() const;
    AttentionHeatmap* heatmap() const { return m_heatmap; }
    AttentionHeatmap* differenceMap() const { return m_diff; }
    HeadGrid* grid() const { return m_grid; }
    QkView* qkView() const { return m_qk; }
    DistributionView* rowView() const { return m_row_view; }
    QString statusText() const;
    QString costText() const;
    const std::vector<float>& difference() const { return m_difference; }
    const std::shared_ptr<const AttentionSnapshot>& compareA() const { return m_a; }
    const std::shared_ptr<const AttentionSnapshot>& compareB() const { return m_b; }

    bool exportCsv(const QString& path, QString* error = nullptr) const;
    bool exportJson(const QString& path, QString* error = nullptr) const;
    bool exportImage(const QString& path, QString* error = nullptr); // .png or .svg, the current tab

signals:
    void captured();
    void compared();
    // A head right-clicked in the grid: toggle it in the lab's ablation set.
    void headAblationToggled(int layer, int head);

protected:
    // On screen: the chat's and the stepper's passes record attention for this panel; off
    // screen they record nothing.
    void showEvent(QShowEvent* event) override;
    void hideEvent(QHideEvent* event) override;

private:
    void request(const QString& text, bool sequence, bool all_layers);
    void onSnapshot(std::shared_ptr<const AttentionSnapshot> snapshot);
    void refresh();
    void refreshRowView();
    void refreshGrid();
    void refreshCompare();
    QStringList labels(const AttentionSnapshot& s) const;

    EngineController* m_engine;
    TokenSelection* m_selection;
    std::shared_ptr<const AttentionSnapshot> m_snapshot;
    std::shared_ptr<const AttentionSnapshot> m_a, m_b; // compare
    std::shared_ptr<std::vector<float>> m_aggregate;   // mean/max over heads
    std::vector<float> m_difference;
    quint64 m_request = 0, m_request_a = 0, m_request_b = 0;
    bool m_sequence = false;
    bool m_all_layers = false;
    Mode m_mode = Mode::Head;
    int m_row = -1, m_column = -1;
    int m_wanted_head = -1; // asked for before the snapshot that has it arrived

    QComboBox* m_source = nullptr;
    QLineEdit* m_prompt = nullptr;
    QSpinBox* m_layer = nullptr;
    QSpinBox* m_head = nullptr;
    QComboBox* m_mode_box = nullptr;
    QCheckBox* m_log = nullptr;
    QCheckBox* m_overview = nullptr;
    QTabWidget* m_tabs = nullptr;
    AttentionHeatmap* m_heatmap = nullptr;
    DistributionView* m_row_view = nullptr;
    QkView* m_qk = nullptr;
    HeadGrid* m_grid = nullptr;
    AttentionLines* m_lines = nullptr;
    QLineEdit* m_compare_a = nullptr;
    QLineEdit* m_compare_b = nullptr;
    AttentionHeatmap* m_heat_a = nullptr;
    AttentionHeatmap* m_heat_b = nullptr;
    AttentionHeatmap* m_diff = nullptr;
    QLabel* m_compare_note = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_cost = nullptr;
};

} // namespace tokenscope::ui
