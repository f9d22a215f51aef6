// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Activation patching: run a corrupted prompt with one activation taken from a clean run, for every
// layer and position (or head), and measure how much of the clean behaviour comes back.
// Effect = (metric(patched) − metric(corrupted)) / (metric(clean) − metric(corrupted)): 0 is the
// corrupted run, 1 the clean one.

#include "lab/lab_run.h"

#include <optional>
#include <string_view>

namespace engine {

struct PatchMetric {
    enum class Kind : uint8_t {
        LogitDiff, // logit(a) − logit(b) at the last position
        LogProb,   // log p(a) at the last position
        KlToClean, // −KL(clean ‖ patched) at the last position (higher is closer to clean)
    };
    Kind kind = Kind::LogitDiff;
    TokenId a = 0, b = 0;
};
// The metric of a run's last-position logits (`clean` is used by KlToClean only).
double patch_metric(const PatchMetric& metric, std::span<const float> logits, std::span<const float> clean);
std::string_view metric_name(PatchMetric::Kind kind);

enum class PatchOver : uint8_t {
    Residual,     // layers × positions: the residual stream after each layer
    AttentionOut, // layers × positions: each attention block's output
    MlpOut,       // layers × positions: each MLP block's output
    Heads,        // layers × heads: one head's output at every position
    Routes,       // layers × positions: a mixture-of-experts router's choice — the corrupted token sent to
                  // the experts the clean run chose there (weighted by its own router, as forcing does)
};
std::string_view patch_over_name(PatchOver over);
std::optional<PatchOver> parse_patch_over(std::string_view name);

struct PatchingRequest {
    std::vector<TokenId> clean, corrupted; // the same length
    PatchMetric metric;
    PatchOver over = PatchOver::Residual;
};

struct PatchingResult {
    PatchOver over = PatchOver::Residual;
    PatchMetric metric;
    uint32_t n_layers = 0;
    uint32_t n_columns = 0;                  // positions, or heads per layer (the most of any layer)
    std::vector<std::vector<double>> effect; // [layer][column], normalised; NaN where not run
    std::vector<std::vector<double>> raw;    // [layer][column], the metric itself
    double clean_metric = 0.0, corrupted_metric = 0.0;
    uint32_t runs = 0;      // patched forward passes made
    bool cancelled = false; // progress stopped it: cells not run are NaN
    double ms = 0.0;
};

// Throws Error when the prompts' lengths differ (both counts named), a prompt is empty, or the
// metric is the same for both (nothing to normalise by).
PatchingResult run_patching(Backend& backend, const PatchingRequest& request, const LabProgress& progress = {});

// The site an intervention of `over` patches.
Site patch_site(PatchOver over);

} // namespace engine
