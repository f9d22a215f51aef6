// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The interpretability lab's requests and results as they cross between the UI and the engine
// thread (results as immutable snapshots).

#include <QMetaType>
#include <QString>
#include <QStringList>
#include <memory>
#include <vector>

namespace tokenscope::ui {

struct PatchingSettings {
    QString clean, corrupted;
    int metric = 0;           // engine::PatchMetric::Kind: 0 logit difference, 1 log-probability, 2 KL to clean
    QString token_a, token_b; // as typed: " Paris", "#123"
    int over = 0;             // engine::PatchOver: 0 residual, 1 attention, 2 MLP, 3 heads, 4 routes
};

struct PatchingSnapshot {
    quint64 request_id = 0;
    QString error;
    PatchingSettings settings;
    QStringList clean_pieces, corrupted_pieces; // the prompts' tokens, for the column labels
    QString token_a, token_b;                   // the metric's tokens as the model's pieces
    QString metric_name, over_name, backend;
    int n_layers = 0, n_columns = 0;
    std::vector<std::vector<double>> effect; // [layer][column] normalised, NaN where not run
    std::vector<std::vector<double>> raw;
    double clean_metric = 0.0, corrupted_metric = 0.0;
    int runs = 0;
    bool cancelled = false;
    double ms = 0.0;
};

struct AttributionSettings {
    QString prompt;                  // used when `ids` is empty
    std::vector<int32_t> ids;        // a sequence (the stepper's) instead of a prompt
    int token = -1;                  // the token whose logit is split; -1: the most likely
    QString token_text, versus_text; // as typed (override `token` when set)
};

struct AttributionPartUi {
    int kind = 0; // engine::AttributionPart::Kind
    QString name;
    int layer = -1, head = -1;
    double value = 0.0;
};

struct AttributionSnapshot {
    quint64 request_id = 0;
    QString error;
    QString token, versus; // pieces
    int token_id = -1, position = 0;
    double logit = 0.0, final_norm_scale = 0.0;
    std::vector<AttributionPartUi> parts;
    QString backend;
    double ms = 0.0;
};

// Head classification on the repeated-random-tokens probe, and an ablation scan of every head.
struct HeadInfo {
    int layer = 0, head = 0;
    int cls = 5;                // engine::HeadClass (5: mixed)
    std::vector<double> scores; // previous-token, induction, duplicate-token, first-token, self
    double entropy = 0.0;
    double kl = -1.0; // ablation scan: KL(base ‖ ablated); −1 when not scanned
    double logit_change = 0.0;
};

struct HeadsSnapshot {
    quint64 request_id = 0;
    QString error;
    QString kind; // "classes" or "scan"
    int n_layers = 0, n_heads = 0;
    std::vector<HeadInfo> heads; // [layer * n_heads + head]
    QString token;               // scan: whose logit change is reported
    int runs = 0;
    bool cancelled = false;
    double ms = 0.0;
    // Classes and a scan are shown on one grid and one table only when they cover the same heads: one of
    // another model (switched since, or a run opened) is dropped rather than indexed with other counts.
    bool sameLayout(const HeadsSnapshot& other) const
    {
        return n_layers == other.n_layers && n_heads == other.n_heads && heads.size() == other.heads.size();
    }
};

struct AblationSettings {
    QString prompt;
    std::vector<std::pair<int, int>> heads; // (layer, head)
    int mode = 0;                           // engine::AblationMode: zero, mean, resample
    QString reference;                      // mean / resample
    std::vector<int32_t> ids;               // a sequence (the stepper's) instead of the prompt
    int token = -1;                         // whose logit change is reported; -1: the base run's top
};

struct CandidateUi {
    int id = 0;
    QString text;
    double p = 0.0;
};

// The next-token distribution of a prompt before and after ablating heads.
struct AblationSnapshot {
    quint64 request_id = 0;
    QString error;
    std::vector<CandidateUi> before, after; // top 10 each
    double kl = 0.0;
    QString token; // whose logit is reported (the settings' token, else the base run's most likely)
    double logit = 0.0, ablated_logit = 0.0;
    int positions = 0;
    std::vector<std::pair<int, int>> heads; // those ablated: (layer, head)
};

struct SteeringSettings {
    QString plus, minus, prompt;
    int layer = 6;
    double strength = 4.0;
    int tokens = 24;
};

struct SteeringSnapshot {
    quint64 request_id = 0;
    QString error;
    SteeringSettings settings;
    QString default_text, steered_text;
    double kl = 0.0; // of the first generated position
    double norm = 0.0;
    std::vector<float> direction; // for the control-vector export
    QString architecture;
    int n_layers = 0;
};

} // namespace tokenscope::ui

Q_DECLARE_METATYPE(tokenscope::ui::PatchingSettings)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::HeadsSnapshot>)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::AblationSnapshot>)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::SteeringSnapshot>)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::PatchingSnapshot>)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::AttributionSnapshot>)
