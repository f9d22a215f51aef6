// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/analysis_types.h"
#include "bridge/engine_types.h"
#include "kv/kv_cache_types.h"

#include <QWidget>
#include <memory>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QGroupBox;
class QProgressBar;
class QScrollArea;
class QLabel;
class QRadioButton;
class QSlider;
class QSpinBox;
class QTabWidget;
class QPlainTextEdit;
class QPushButton;
class QTextBrowser;

class QChartView;
class QLineSeries;

namespace tokenscope::ui {

class EngineController;
class KvHeatStrip;
class KvLayerView;
class TokenSelection;

// Why long context is expensive: the live KV cache of the loaded model (bytes in use and allocated,
// per layer, its paged blocks, the formula with this model's numbers), the cached K/V vectors
// themselves, and a calculator for any model on paper with a memory planner for GGUF files.
class KvPanel : public QWidget {
    Q_OBJECT
public:
    KvPanel(EngineController* engine, TokenSelection* selection, QWidget* parent = nullptr);

    const std::shared_ptr<const KvSnapshot>& snapshot() const { return m_snapshot; }
    void showSaved(std::shared_ptr<const KvSnapshot> snapshot) { onSnapshot(std::move(snapshot)); }
    QString formulaText() const;
    QString summaryText() const;
    KvLayerView* layerView() const { return m_layers; }
    KvHeatStrip* heatStrip() const { return m_strip; }
    const std::shared_ptr<const KvContents>& contents() const { return m_contents; }
    void showTab(int index); // 0 live, 1 contents, 2 calculator, 3 quantized cache
    // Quantized cache: the types chosen in the tab (not yet the engine's until "Use this cache").
    void chooseCacheTypes(engine::KvCacheTypes types);
    // Runs the F16-against-quantized comparison on the tab's text (→ damageMeasured).
    void measureDamage();
    QString damageText() const;
    QString cacheMemoryText() const;
    const std::shared_ptr<const TextAnalysisSnapshot>& damage() const { return m_damage; }
    void showContents(int layer, int kv_head, bool values);

    // Calculator
    void selectPreset(const QString& name);
    void setCalculator(quint64 context, int sequences, int dtype, bool full_mha, bool sliding, double offload,
                       double gpu_gib, double weight_gib);
    QString calculatorText() const;
    void planFile(const QString& path);
    QString planText() const;
    // On a server connection: the server's cache as its last reply and /metrics told it.
    QString serverCacheText() const;
    const std::shared_ptr<const ServerCacheSnapshot>& serverCache() const { return m_server_cache; }

signals:
    void contentsShown();
    void planned();
    void serverCacheShown();
    void damageMeasured();
    // "Use this cache": the engine's cache types changed; the model is to be loaded again with them.
    void cacheTypesApplied(engine::KvCacheTypes types);

private:
    QWidget* buildLive();
    QWidget* buildContents();
    QWidget* buildCalculator();
    QWidget* buildServerCache();
    QWidget* buildQuantized();
    engine::KvCacheTypes chosenTypes() const;
    void updateCacheMemory();
    void onDamage(std::shared_ptr<const TextAnalysisSnapshot> result);
    QString damageTip(int index) const;
    QString liveIntro() const;
    void onServerCache(std::shared_ptr<const ServerCacheSnapshot> cache);
    void onSnapshot(std::shared_ptr<const KvSnapshot> snapshot);
    void requestContents();
    void recalculate();
    void applyPreset(int index);

    EngineController* m_engine;
    TokenSelection* m_selection;
    std::shared_ptr<const KvSnapshot> m_snapshot;
    std::shared_ptr<const KvContents> m_contents;
    quint64 m_contents_request = 0;
    std::shared_ptr<const ModelSummary> m_model;

    QTabWidget* m_tabs = nullptr;
    // live
    QLabel* m_formula = nullptr;
    QLabel* m_summary = nullptr;
    KvLayerView* m_layers = nullptr;
    QScrollArea* m_layers_scroll = nullptr;
    // on a server connection
    QGroupBox* m_server_box = nullptr;
    QLabel* m_server_text = nullptr;
    QProgressBar* m_server_request = nullptr;
    QProgressBar* m_server_whole = nullptr;
    std::shared_ptr<const ServerCacheSnapshot> m_server_cache;
    // contents
    QSpinBox* m_layer = nullptr;
    QSpinBox* m_kv_head = nullptr;
    QRadioButton* m_show_values = nullptr;
    QLabel* m_contents_note = nullptr;
    KvHeatStrip* m_strip = nullptr;
    // calculator
    QComboBox* m_preset = nullptr;
    QSpinBox *m_c_layers = nullptr, *m_c_heads = nullptr, *m_c_kv_heads = nullptr, *m_c_head_dim = nullptr,
             *m_c_window = nullptr, *m_c_sliding = nullptr, *m_c_sequences = nullptr;
    QDoubleSpinBox* m_c_context = nullptr;
    QComboBox* m_c_dtype = nullptr;
    QCheckBox* m_c_mha = nullptr;
    QCheckBox* m_c_swa = nullptr;
    QSlider* m_c_offload = nullptr;
    QDoubleSpinBox* m_c_gpu = nullptr;
    QDoubleSpinBox* m_c_weights = nullptr;
    QLabel* m_c_result = nullptr;
    QLabel* m_c_formula = nullptr;
    QChartView* m_chart = nullptr;
    QLabel* m_plan = nullptr;
    QSpinBox* m_plan_ctx = nullptr;
    bool m_applying = false;
    // quantized cache
    QComboBox *m_q_keys = nullptr, *m_q_values = nullptr;
    QPushButton *m_q_apply = nullptr, *m_q_measure = nullptr, *m_q_stop = nullptr;
    QLabel *m_q_memory = nullptr, *m_q_status = nullptr, *m_q_legend = nullptr;
    QPlainTextEdit* m_q_text = nullptr;
    QProgressBar* m_q_progress = nullptr;
    QTextBrowser* m_q_view = nullptr;
    quint64 m_damage_request = 0;
    std::shared_ptr<const TextAnalysisSnapshot> m_damage;
    QString m_damage_error;
};

} // namespace tokenscope::ui
