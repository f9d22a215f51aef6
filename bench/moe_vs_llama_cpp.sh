#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Mixture-of-experts speed, Tokenscope against llama.cpp, side by side in one run:
#   bench/moe_vs_llama_cpp.sh [REPS]
# Random-weight twins of two published MoE configurations (`make-test-model --preset`): OLMoE-1B-7B
# (64 experts, 8 per token, 6.9 B parameters, 1.3 B active) and Granite 3.1 1B-A400M (32 experts, 8 per
# token), in the Q4_K_M-like mix of every preset (no real MoE model is installed offline). Then
# `llama-bench -fa 0` (--repack 0 and 1, the faster counted; a variant that fails is named) from a
# native build of the registry's llama.cpp against `tokenscope-cli bench`, pp PP and tg TG (default 512
# and 128), THREADS (default 2) threads; decode also shows the bytes Tokenscope reads per token (the
# k experts each token goes through, not all of them) as a share of this machine's read bandwidth.
# Smaller runs: PRESETS=granite-3.1-1b-a400m PP=128 TG=32 REPS=1. Disk: one twin at a time (≤ 4.5 GB).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REPS="${1:-${REPS:-3}}"
PP="${PP:-512}"
TG="${TG:-128}"
THREADS="${THREADS:-2}"
PRESETS="${PRESETS:-granite-3.1-1b-a400m olmoe-1b-7b}"
OURS="$ROOT/build/release/app/tokenscope-cli"
[ -x "$OURS" ] || { echo "build first: bash scripts/setup.sh run" >&2; exit 1; }
KV="$(TOKENSCOPE_REF_CPU=native LLAMA_CPP_TARGETS="llama-bench" "$ROOT/tests/reference/build_llama_cpp.sh")"
LLAMA_BENCH="$(sed -n 's/^LLAMA_BENCH=//p' <<< "$KV")"
[ -x "$LLAMA_BENCH" ] || { echo "llama-bench was not built" >&2; exit 1; }
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

echo "llama.cpp: $LLAMA_BENCH; Tokenscope: $(git -C "$ROOT" rev-parse --short HEAD)"
echo "reps $REPS; pp $PP; tg $TG; threads $THREADS; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
i=0
for preset in $PRESETS; do
    i=$((i + 1))
    twin="$OUT/twin-$preset.gguf"
    "$OURS" make-test-model --preset "$preset" --out "$twin" > /dev/null
    "$OURS" info --json "$twin" | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(j.get("architecture"), j.get("parameters"), j.get("active_parameters"), j.get("experts"), j.get("experts_used"))
' > "$OUT/$i.shape"
    for rpk in 0 1; do
        "$LLAMA_BENCH" -m "$twin" -t "$THREADS" -r "$REPS" -fa 0 --repack "$rpk" -p "$PP" -n "$TG" -o jsonl \
            > "$OUT/$i.theirs.$rpk" 2> "$OUT/$i.theirs.$rpk.log" || echo "llama-bench --repack $rpk failed on $preset" \
            "($(tail -1 "$OUT/$i.theirs.$rpk.log" | cut -c1-120))" >&2
    done
    "$OURS" bench "$twin" -t "$THREADS" -p "$PP" -n 0 -r "$REPS" --json > "$OUT/$i.ours.pp"
    "$OURS" bench "$twin" -t "$THREADS" -p 0 -n "$TG" -r "$REPS" --json > "$OUT/$i.ours.tg"
    echo "$preset $(stat -c %s "$twin")" > "$OUT/$i.what"
    [ -s "$OUT/probe" ] || "$OURS" bench "$twin" -t 1 -p 0 -n 1 -r 1 --probe-threads "$THREADS" --json \
        > "$OUT/probe" 2> /dev/null || true
    rm -f "$twin"
done

python3 "$ROOT/bench/compare_llama_bench.py" "$OUT" "$i" "$PP" "$TG" --name-header twin --name-width 22 --gib
