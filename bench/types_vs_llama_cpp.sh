#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Speed per weight type, Tokenscope against llama.cpp, side by side in one run:
#   bench/types_vs_llama_cpp.sh [REPS]
# One random-weight twin per type of a shape whose every matrix width is a multiple of 256
# (`make-test-model --preset qwen3-0.6b`, so K-quants and IQ4_XS are really used), written as F16 by
# Tokenscope and then quantized with `llama-quantize --pure` from the same llama.cpp build that is
# measured (built natively from the registry's sdist by tests/reference/build_llama_cpp.sh). A twin
# in which `tokenscope-cli info` shows a matrix of another type is refused. Then `llama-bench -fa FA`
# with --repack 0 and 1 (the faster counts) against `tokenscope-cli bench --flash-attn FA`, pp512 and tg128 by
# default, THREADS (default 2) threads; decode also shows the bytes Tokenscope reads per token as a
# share of this machine's read bandwidth. Smaller runs: TYPES="Q4_1 IQ4_XS" PP=128 TG=32 REPS=1.
# An AVX2-only machine, on this one: REF_CPU=avx2 TOKENSCOPE_SIMD=avx2 (llama.cpp built for AVX2, the
# engine capped at its AVX2 kernels). FA: both sides' attention, as llama.cpp's -fa — auto (the default,
# as `llama-bench` and the engine run without it: flash attention on a CPU), on or off.
# Disk: the F16 source (1.2 GB) and one twin at a time, in a temporary directory (TMPDIR).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REPS="${1:-${REPS:-3}}"
PP="${PP:-512}"
TG="${TG:-128}"
THREADS="${THREADS:-2}"
FA="${FA:-auto}"
case "$FA" in off|on|auto) ;; *) echo "FA must be off, on or auto (got '$FA')" >&2; exit 1;; esac
TYPES="${TYPES:-F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS}"
OURS="$ROOT/build/release/app/tokenscope-cli"
[ -x "$OURS" ] || { echo "build first: bash scripts/setup.sh run" >&2; exit 1; }
REF_CPU="${REF_CPU:-native}"
KV="$(TOKENSCOPE_REF_CPU="$REF_CPU" LLAMA_CPP_TARGETS="llama-bench llama-quantize" "$ROOT/tests/reference/build_llama_cpp.sh")"
LLAMA_BENCH="$(sed -n 's/^LLAMA_BENCH=//p' <<< "$KV")"
LLAMA_QUANTIZE="$(sed -n 's/^LLAMA_QUANTIZE=//p' <<< "$KV")"
[ -x "$LLAMA_BENCH" ] && [ -x "$LLAMA_QUANTIZE" ] || { echo "llama-bench or llama-quantize was not built" >&2; exit 1; }
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

echo "llama.cpp: $LLAMA_BENCH; Tokenscope: $(git -C "$ROOT" rev-parse --short HEAD)"
echo "reps $REPS; pp $PP; tg $TG; threads $THREADS; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "llama.cpp built for: $REF_CPU, flash attention $FA; Tokenscope kernels: ${TOKENSCOPE_SIMD:-the run-time choice}"
"$OURS" make-test-model --preset qwen3-0.6b --type F16 --out "$OUT/source-F16.gguf" > /dev/null

i=0
for type in $TYPES; do
    i=$((i + 1))
    twin="$OUT/twin-$type.gguf"
    if [ "$type" = F16 ]; then
        mv "$OUT/source-F16.gguf" "$twin"
    else
        src="$OUT/source-F16.gguf"
        [ -f "$src" ] || src="$OUT/twin-F16.gguf"
        "$LLAMA_QUANTIZE" --pure "$src" "$twin" "$type" "$THREADS" > "$OUT/$i.quantize.log" 2>&1 ||
            { echo "llama-quantize failed for $type:" >&2; tail -5 "$OUT/$i.quantize.log" >&2; exit 1; }
    fi
    # every matrix of the twin must be of the type measured
    "$OURS" info --json "$twin" | python3 -c '
import json, sys
want = sys.argv[1]
other = ["%s (%s)" % (t["name"], t["type"]) for t in json.load(sys.stdin)["tensors"] if len(t["shape"]) == 2 and t["type"] != want]
if other:
    sys.exit(f"refused: the {want} twin holds matrices of other types: " + ", ".join(other[:5]))
' "$type"
    for rpk in 0 1; do
        "$LLAMA_BENCH" -m "$twin" -t "$THREADS" -r "$REPS" -fa "$FA" --repack "$rpk" -p "$PP" -n "$TG" -o jsonl \
            > "$OUT/$i.theirs.$rpk" 2> /dev/null || true
    done
    "$OURS" bench "$twin" -t "$THREADS" -p "$PP" -n 0 -r "$REPS" --flash-attn "$FA" --json > "$OUT/$i.ours.pp"
    "$OURS" bench "$twin" -t "$THREADS" -p 0 -n "$TG" -r "$REPS" --flash-attn "$FA" --json > "$OUT/$i.ours.tg"
    echo "$type $(stat -c %s "$twin")" > "$OUT/$i.what"
    # the machine's read bandwidth (for decode's share), measured once with a twin at hand
    [ -s "$OUT/probe" ] || "$OURS" bench "$twin" -t 1 -p 0 -n 1 -r 1 --probe-threads "$THREADS" --json \
        > "$OUT/probe" 2> /dev/null || true
    [ "$type" = F16 ] || rm -f "$twin"
done
rm -f "$OUT"/twin-*.gguf "$OUT/source-F16.gguf"

python3 "$ROOT/bench/compare_llama_bench.py" "$OUT" "$i" "$PP" "$TG"
