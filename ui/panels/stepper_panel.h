// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_types.h"
#include "sampling/sampler.h"

#include <QWidget>
#include <map>
#include <memory>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSlider;
class QSpinBox;
class QTableWidget;
class QTextBrowser;
class QTimer;

class QVBoxLayout;

namespace tokenscope::ui {

class BoundedCountBox;

class DistributionView;
class EngineController;
class TokenSelection;

// The decode loop, one token at a time: Prefill the prompt in one parallel pass, then Step — the
// next-token distribution from the real logits, shaped stage by stage by the sampling settings
// (previewed live before the step is taken), the token chosen, the KV cache reused. Click a
// candidate to force it; Back truncates the cache and recomputes one position; abandoned paths are
// listed as branches; Play steps on a timer until a stop reason; the logit lens shows what each
// layer would predict.
class StepperPanel : public QWidget {
    Q_OBJECT
public:
    StepperPanel(EngineController* engine, TokenSelection* selection, QWidget* parent = nullptr);

    void setPrompt(const QString& text);
    void prefill();
    // Prefill exactly these tokens (a position of an analysed text), `text` shown as the prompt.
    void prefillTokens(const std::vector<int32_t>& ids, const QString& text);
    void step(int forced_token = -1);
    void back();
    void setPlaying(bool playing);
    bool playing() const { return m_playing; }
    bool pending() const { return m_pending != 0; }

    StepperSettings settings() const;
    QString promptText() const;
    void setSettings(const StepperSettings& settings);
    void showStage(int index); // 0 logits … 6 final
    const std::shared_ptr<const StepperState>& state() const { return m_state; }
    const engine::SampleResult& preview() const { return m_preview; }
    QString statusText() const;
    const QString& lastError() const { return m_error; } // of the last action; empty when it worked
    QString cacheSentence() const;
    QString sequenceHtml() const;
    DistributionView* distribution() const { return m_distribution; }
    QTableWidget* lensTable() const { return m_lens; }
    QStringList branches() const;
    // A saved run: its sequence, the distributions its tokens were drawn from and the settings it
    // was shown with. Step, Back and Play stay off until Prefill starts a live run.
    void showSaved(std::shared_ptr<const StepperState> state, std::map<int, engine::SampleResult> drawn_from,
                   const StepperSettings& settings);
    const std::map<int, engine::SampleResult>& drawnFrom() const { return m_drawn_from; }

signals:
    void stateChanged();
    // The lab's logit attribution of `token` after the sequence `ids`.
    void attributeRequested(const std::vector<int32_t>& ids, int token);

private:
    void buildUi();
    void buildPromptRow(QVBoxLayout* layout);
    void buildRunControls(QVBoxLayout* layout);
    void buildSamplingControls(QVBoxLayout* layout);
    QWidget* buildViews(QVBoxLayout* layout);
    void connectControls();
    void installShortcuts(QWidget* views);
    void onState(std::shared_ptr<const StepperState> state);
    void updatePreview();
    void renderDistribution();
    // A served model: the server's top-N (before sampling) and the token it drew.
    void renderServerDistribution();
    void renderSequence();
    void renderLens();
    void updateButtons();
    void requestAttribution(int token);
    QString tokenText(int id) const;

    EngineController* m_engine;
    TokenSelection* m_selection;
    std::shared_ptr<const StepperState> m_state;
    engine::SampleResult m_preview;                   // what Step would draw now
    std::map<int, engine::SampleResult> m_drawn_from; // position → the distribution its token came from
    std::map<int, std::vector<ServerCandidate>> m_server_drawn_from; // the same on a served model
    engine::SampleResult m_sent_preview;                             // the preview when the pending step was sent
    quint64 m_pending = 0;
    QString m_error;
    bool m_playing = false;
    int m_stage = 6;

    QPlainTextEdit* m_prompt = nullptr;
    QPushButton* m_prefill = nullptr;
    QPushButton* m_example = nullptr;
    QPushButton* m_step = nullptr;
    QPushButton* m_back = nullptr;
    QPushButton* m_play = nullptr;
    QSlider* m_speed = nullptr;
    QLabel* m_speed_label = nullptr;
    QProgressBar* m_progress = nullptr;
    QPushButton* m_stop_prefill = nullptr;
    QPushButton* m_attribute = nullptr;
    QCheckBox* m_greedy = nullptr;
    QDoubleSpinBox* m_temperature = nullptr;
    QSpinBox* m_top_k = nullptr;
    QDoubleSpinBox* m_top_p = nullptr;
    QDoubleSpinBox* m_min_p = nullptr;
    QSpinBox* m_seed = nullptr;
    BoundedCountBox* m_max_tokens = nullptr;
    QLineEdit* m_stops = nullptr;
    QCheckBox* m_lens_on = nullptr;
    QTextBrowser* m_sequence = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_cache = nullptr;
    QLabel* m_generated = nullptr;
    QComboBox* m_stage_box = nullptr;
    QLabel* m_stage_note = nullptr;
    DistributionView* m_distribution = nullptr;
    QListWidget* m_branches = nullptr;
    QTableWidget* m_lens = nullptr;
    QTimer* m_play_timer = nullptr;
};

} // namespace tokenscope::ui
