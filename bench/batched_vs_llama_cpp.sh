#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Many sequences on one engine, Tokenscope against llama.cpp in one run:
#   bench/batched_vs_llama_cpp.sh [MODEL.gguf]
# llama.cpp: `llama-batched-bench` (built natively from the registry's sdist by
# tests/reference/build_llama_cpp.sh) with -fa off and -fa on, each with and without -kvu (one KV
# buffer for all sequences) and with and without weight repacking (-nr); the fastest that ran counts
# (repacking crashes this llama.cpp on AMX CPUs: those variants are named as giving no result). Tokenscope: `tokenscope-cli serve-sim`
# with the same shape — B requests of PP prompt tokens arriving at once, TG tokens each, one
# continuous-batching run — in its default mode and in deterministic mode (the cost of batch
# invariance). Total throughput = tokens the passes processed / their time, as llama-batched-bench's
# "S t/s" ((B·PP + B·TG) / (t_pp + t_tg)).
# Defaults: the chat model, 2 threads, PP=128 TG=64, B = 1 2 4 8 16.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODELS_DIR="${XDG_DATA_HOME:-$HOME/.local/share}/tokenscope/models"
MODEL="${1:-$MODELS_DIR/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}"
THREADS="${THREADS:-2}"
PP="${PP:-128}"
TG="${TG:-64}"
BATCHES="${BATCHES:-1 2 4 8 16}"
OURS="$ROOT/build/release/app/tokenscope-cli"
[ -x "$OURS" ] || { echo "build first: bash scripts/setup.sh run" >&2; exit 1; }
BATCHED="$(TOKENSCOPE_REF_CPU=native LLAMA_CPP_TARGETS=llama-batched-bench "$ROOT/tests/reference/build_llama_cpp.sh" |
    sed -n 's/^LLAMA_BATCHED_BENCH=//p')"
[ -x "$BATCHED" ] || { echo "llama-batched-bench was not built" >&2; exit 1; }
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
NPL="$(echo $BATCHES | tr ' ' ',')"
MAXB="$(echo $BATCHES | tr ' ' '\n' | sort -n | tail -1)"
CTX=$(( (PP + TG) * MAXB + 64 ))

echo "model $(basename "$MODEL"); threads $THREADS; prompt $PP, generate $TG; batches $BATCHES"
echo "llama.cpp: $BATCHED; Tokenscope: $(git -C "$ROOT" rev-parse --short HEAD); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for fa in off on; do
    for kvu in "" "-kvu"; do
        for rpk in "" "-nr"; do # weight repacking on (llama.cpp's default) and off: it crashes on AMX CPUs
            "$BATCHED" -m "$MODEL" -c "$CTX" -b 2048 -ub 512 -t "$THREADS" -tb "$THREADS" -fa "$fa" $kvu $rpk \
                -npp "$PP" -ntg "$TG" -npl "$NPL" --output-format jsonl 2>/dev/null | grep '^{' > "$OUT/theirs.$fa$kvu$rpk" || true
        done
    done
done
for f in "$OUT"/theirs.*; do [ -s "$f" ] || echo "llama-batched-bench ${f##*/theirs.} gave no result (crashed)"; done
for b in $BATCHES; do
    for det in "" "--deterministic"; do
        "$OURS" serve-sim "$MODEL" --clients "$b" --rate 0 --prompt-min "$PP" --prompt-max "$PP" \
            --output-min "$TG" --output-max "$TG" --shared-fraction 0 --mode continuous --max-running "$b" \
            --step-tokens $(( PP * b )) -t "$THREADS" $det --json > "$OUT/ours.$b$det"
    done
done

python3 - "$OUT" "$PP" "$TG" $BATCHES <<'PY'
import glob, json, os, sys
out, pp, tg, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), [int(b) for b in sys.argv[4:]]
theirs = {}
for path in glob.glob(f"{out}/theirs.*"):
    variant = os.path.basename(path)[len("theirs."):]
    for line in open(path):
        r = json.loads(line)
        theirs.setdefault(r["pl"], {})[variant] = r["speed"]
print("total throughput, tokens processed per second of passes (prompt and decode)")
print(f"{'B':>3} {'llama.cpp best':>16} {'(variant)':>18} {'tokenscope':>12} {'ratio':>7} {'deterministic':>14} {'cost':>7}")
below = []
for b in batches:
    runs = {}
    for det in ("", "--deterministic"):
        s = json.load(open(f"{out}/ours.{b}{det}"))[0]["summary"]
        # tokens the passes processed per second of passes (llama-batched-bench's S: its TG decode passes
        # against our TG − 1, the first token coming from the prompt's pass in both)
        runs[det] = s["computed_tokens"] / s["busy_s"] if s["busy_s"] else 0.0
    variants = theirs.get(b, {})
    best_variant = max(variants, key=variants.get) if variants else None
    best = variants.get(best_variant, 0.0) if best_variant else 0.0
    ratio = runs[""] / best if best else float("nan")
    cost = runs["--deterministic"] / runs[""] if runs[""] else float("nan")
    print(f"{b:>3} {best:>16.1f} {('fa ' + best_variant if best_variant else 'failed'):>18} {runs['']:>12.1f} "
          f"{ratio:>7.2f} {runs['--deterministic']:>14.1f} {cost:>7.0%}")
    if not best or ratio < 1.0:
        below.append(f"B={b} ({ratio:.2f})")
print("below llama.cpp: " + (", ".join(below) if below else "none"))
PY
