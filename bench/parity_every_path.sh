#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# The real-model llama.cpp fixtures (test_forward_reference: both models, 12 prompts each, last
# logits and 64-token greedy continuations) on every CPU kernel path this machine has, one after the
# other: the run-time choice (AVX-512 VNNI where present), then TOKENSCOPE_SIMD=avx2 and scalar.
# CI runs the suite once, on the run-time choice; this is the long sweep.
#   bench/parity_every_path.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SUITE="$ROOT/build/release/tests/test_forward_reference"
[ -x "$SUITE" ] || { echo "build first: bash scripts/setup.sh run" >&2; exit 1; }
status=0
for path in "" avx2 scalar; do
    echo "== kernels: ${path:-run-time choice}"
    out="$(TOKENSCOPE_SIMD="$path" "$SUITE" 2>&1)" || status=1
    # the per-prompt lines (tokens, Pearson, largest difference) and the summaries
    grep -E "Pearson|identical greedy|kernels|Totals|FAIL" <<< "$out" | sed 's/^QINFO  : TestForwardReference::[a-zA-Z]*//'
done
exit $status
