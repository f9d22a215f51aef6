// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

namespace tokenscope::ui {

// Redraws a 2,048 × 2,048 head view (fitted, then zoomed and panned) and prints the time per frame.
// A benchmark for `tokenscope --bench-attention-view`, not a test: nothing is asserted.
int run_attention_view_benchmark(int n = 2048, int frames = 60);

} // namespace tokenscope::ui
