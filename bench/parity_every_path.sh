#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# The real-model llama.cpp fixtures (test_forward_reference: both models, the 12 hand-written and the
# 96 generated prompts each, last logits and 64-token greedy continuations, bit-equality asserted) on
# every CPU kernel path this machine has, one after the other: the run-time choice (AVX-512 VNNI
# where present), then TOKENSCOPE_SIMD=avx2 and scalar. CI runs the suite once, on the run-time
# choice, following the generated prompts' continuations for 16 steps; this is the long sweep, all
# 64 steps of every prompt (the AVX2 path takes about 5 minutes on 2 cores; the portable path runs
# the default model at about 3 tokens/s, so its sweep takes hours).
#   bench/parity_every_path.sh [THREADS]     (default 2)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SUITE="$ROOT/build/release/tests/test_forward_reference"
[ -x "$SUITE" ] || { echo "build first: bash scripts/setup.sh run" >&2; exit 1; }
status=0
for path in "" avx2 scalar; do
    echo "== kernels: ${path:-run-time choice}"
    start=$SECONDS
    out="$(TOKENSCOPE_SIMD="$path" TOKENSCOPE_PARITY_STEPS=64 TOKENSCOPE_THREADS="${1:-2}" QTEST_FUNCTION_TIMEOUT=3600000 "$SUITE" 2>&1)" || status=1
    # the summaries (prompts, bit-equal logits, smallest Pearson, largest difference, identical
    # continuations) and any failure
    grep -E "prompts; last logits|kernels:|Totals|FAIL" <<< "$out" | sed 's/^QINFO  : TestForwardReference::[a-zA-Z]*//'
    echo "   ($((SECONDS - start)) s)"
done
exit $status
