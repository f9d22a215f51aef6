// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Turning one attention head off, three ways (see interpretability.md): its output replaced by
// zeros, by its mean over the positions of a reference prompt, or by its output on a second prompt
// at the same positions (resampling).

#include "lab/lab_run.h"

#include <optional>
#include <string_view>

namespace engine {

enum class AblationMode : uint8_t { Zero, Mean, Resample };
std::string_view ablation_mode_name(AblationMode mode);
std::optional<AblationMode> parse_ablation_mode(std::string_view name);

struct HeadRef {
    uint32_t layer = 0, head = 0;
};

// The interventions that ablate `heads` over positions [0, n) of a prompt of n tokens. Mean needs
// `reference` (any length); Resample needs `reference` of at least n tokens. Throws Error naming
// what is missing or out of range.
std::vector<Intervention> head_ablations(Backend& backend, std::span<const HeadRef> heads, AblationMode mode,
                                         uint32_t n, std::span<const TokenId> reference = {});

} // namespace engine
