// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/analysis_types.h"

#include <QString>
#include <functional>
#include <vector>

namespace tokenscope::ui {

// Analysed tokens as one paragraph of links ("token:<index>"), each on a background from light
// (heat 0) to dark (heat 1, clamped), lines breaking between words only.
QString token_heat_html(const std::vector<AnalyzedToken>& tokens,
                        const std::function<double(const AnalyzedToken&)>& heat);

} // namespace tokenscope::ui
