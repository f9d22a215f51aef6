// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// What the Experts panel shows (immutable snapshots from the engine thread): each token's route
// through a mixture-of-experts model's routers, and a "what if" at one router.

#include "bridge/engine_types.h"

#include <QMetaType>
#include <QString>
#include <cstdint>
#include <vector>

namespace tokenscope::ui {

// Every MoE layer's router over a sequence: per layer [n][k] experts and weights, [n][n_expert]
// probabilities (one pass over the tokens, the routing captured).
struct ExpertsSnapshot {
    quint64 request_id = 0;
    QString error;
    bool cancelled = false;
    QString source; // "prompt" or "sequence" (the chat's or the stepper's)
    QString architecture;
    bool dense = false; // the model has no router (nothing else is set but the tokens)
    int n_layers = 0, n_expert = 0, k = 0;
    bool normalized = false;     // the chosen weights are divided by their sum (qwen3moe, granitemoe)
    bool random_weights = false; // a model make-test-model wrote: its routing means nothing
    bool saved = false;          // reopened from a saved run: nothing can run again from it
    std::vector<StepperToken> tokens;
    std::vector<int32_t> ids;
    std::vector<int> moe_layers;                   // the layers with a router (index into the vectors below)
    std::vector<std::vector<int32_t>> experts;     // per MoE layer: [n][k], slot order
    std::vector<std::vector<float>> weights;       // per MoE layer: [n][k]
    std::vector<std::vector<float>> probabilities; // per MoE layer: [n][n_expert]
    double ms = 0.0;

    int n() const { return int(tokens.size()); }
    int expert(int layer_index, int t, int slot) const
    {
        return experts[std::size_t(layer_index)][std::size_t(t * k + slot)];
    }
    float weight(int layer_index, int t, int slot) const
    {
        return weights[std::size_t(layer_index)][std::size_t(t * k + slot)];
    }
};

// A change at the routers and its effect on the next token after the sequence.
struct ExpertWhatIf {
    enum class Kind { Force, Remove, ZeroOutput };
    Kind kind = Kind::Remove;
    int layer = -1;    // -1: every MoE layer
    int expert = 0;    // the expert forced in, removed, or zeroed
    int position = -1; // Force: the token it is forced for (its lowest-weighted expert gives way)
};

struct ExpertWhatIfSnapshot {
    quint64 request_id = 0;
    QString error;
    ExpertWhatIf what;
    QString description; // "expert 3 removed from layer 2"
    struct Candidate {
        int id = 0;
        QString text;
        double p_before = 0.0, p_after = 0.0;
    };
    std::vector<Candidate> candidates; // the union of both top tens, by the probability before
    double kl = 0.0;                   // KL(before ‖ after) of the next-token distributions
    int rerouted = 0;                  // (token, layer) pairs whose chosen experts changed
    double ms = 0.0;
};

// Every (layer, expert) removed (or zeroed) in turn: the next token's KL from the unchanged pass. Sent
// while it runs (done of planned, the estimate) and when it ends.
struct ExpertScanSnapshot {
    quint64 request_id = 0;
    QString error;
    bool cancelled = false, finished = false;
    bool zero = false; // zeroed outputs instead of removed experts
    int n_expert = 0;
    std::vector<int> moe_layers;
    std::vector<std::vector<double>> kl; // [layer index][expert]; NaN: not run yet, 0: no token chose it
    int done = 0, planned = 0;
    double estimated_ms = 0.0, elapsed_ms = 0.0;
    QString token; // the predicted next token whose distribution is compared
};

} // namespace tokenscope::ui

Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::ExpertScanSnapshot>)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::ExpertsSnapshot>)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::ExpertWhatIfSnapshot>)
