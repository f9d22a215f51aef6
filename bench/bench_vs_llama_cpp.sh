#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Prefill and decode speed, Tokenscope against llama.cpp, side by side in one run:
#   bench/bench_vs_llama_cpp.sh [REPS]
# For both real models (or MODELS="a.gguf b.gguf"), at 1 and 2 threads (or THREADS="…"): pp512 and
# pp2048, tg128, and tg128 with 4,096 tokens already in the context. llama.cpp is built natively from
# the registry's sdist (tests/reference/build_llama_cpp.sh, TOKENSCOPE_REF_CPU=native: llama.cpp at
# its fastest here) and run as `llama-bench -fa FA` with and without weight repacking (--repack 1
# and 0); the faster of the two is the one compared, against `tokenscope-cli bench --flash-attn FA`
# (FA: auto by default — both sides' default, flash attention on a CPU — or on, off). Where repacking crashes (AMX CPUs, this
# llama.cpp), only --repack 0 counts, and the table says so. Decode also shows the bytes Tokenscope
# reads per token as a share of this machine's read bandwidth, measured on 2 threads in the same run.
# Smaller runs: PP=512 TG=32 DEPTH=512 REPS=1 (the table then says what it ran). DEPTH_REPS sets the
# repetitions of the depth cells alone (default REPS): each repetition of those refills the context
# with DEPTH tokens on both sides, untimed, which is most of a 5-repetition run's hour on 2 cores.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODELS_DIR="${XDG_DATA_HOME:-$HOME/.local/share}/tokenscope/models"
MODELS="${MODELS:-$MODELS_DIR/gemma-3-270m-Q4_K_M.gguf $MODELS_DIR/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}"
THREADS="${THREADS:-1 2}"
REPS="${1:-${REPS:-5}}"
PP="${PP:-512,2048}"
TG="${TG:-128}"
DEPTH="${DEPTH:-4096}"
DEPTH_REPS="${DEPTH_REPS:-$REPS}"
FA="${FA:-auto}"
case "$FA" in off|on|auto) ;; *) echo "FA must be off, on or auto (got '$FA')" >&2; exit 1;; esac
OURS="$ROOT/build/release/app/tokenscope-cli"
[ -x "$OURS" ] || { echo "build first: bash scripts/setup.sh run" >&2; exit 1; }
LLAMA_BENCH="$(TOKENSCOPE_REF_CPU=native LLAMA_CPP_TARGETS=llama-bench "$ROOT/tests/reference/build_llama_cpp.sh" |
    sed -n 's/^LLAMA_BENCH=//p')"
[ -x "$LLAMA_BENCH" ] || { echo "llama-bench was not built" >&2; exit 1; }
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

echo "llama.cpp: $LLAMA_BENCH; Tokenscope: $("$OURS" bench --help >/dev/null && git -C "$ROOT" rev-parse --short HEAD)"
echo "reps $REPS (depth cells $DEPTH_REPS); pp $PP; tg $TG; depth $DEPTH; threads $THREADS; flash attention $FA (both); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"

theirs() { # model threads repack reps extra-args… → JSON lines file (empty if llama-bench failed)
    local model="$1" t="$2" rpk="$3" reps="$4"
    shift 4
    "$LLAMA_BENCH" -m "$model" -t "$t" -r "$reps" -fa "$FA" --repack "$rpk" "$@" -o jsonl 2>/dev/null || true
}

i=0
for model in $MODELS; do
    for t in $THREADS; do
        i=$((i + 1))
        for rpk in 0 1; do
            theirs "$model" "$t" "$rpk" "$REPS" -p "$PP" -n "$TG" > "$OUT/$i.theirs.$rpk"
            theirs "$model" "$t" "$rpk" "$DEPTH_REPS" -p 0 -n "$TG" -d "$DEPTH" >> "$OUT/$i.theirs.$rpk"
        done
        for p in ${PP//,/ }; do
            "$OURS" bench "$model" -t "$t" -p "$p" -n 0 -r "$REPS" --flash-attn "$FA" --json > "$OUT/$i.ours.pp$p"
        done
        "$OURS" bench "$model" -t "$t" -p 0 -n "$TG" -r "$REPS" --flash-attn "$FA" --json > "$OUT/$i.ours.tg"
        "$OURS" bench "$model" -t "$t" -p 0 -n "$TG" -d "$DEPTH" -r "$DEPTH_REPS" --flash-attn "$FA" --json > "$OUT/$i.ours.tgd"
        echo "$model $t" > "$OUT/$i.what"
    done
done
"$OURS" bench "${MODELS%% *}" -t 1 -p 0 -n 1 -r 1 --probe-threads 2 --json > "$OUT/probe"

python3 - "$OUT" "$i" "$PP" "$TG" "$DEPTH" <<'PY'
import json, os, sys
out, n, pp, tg, depth = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4], sys.argv[5]
probe = json.load(open(f"{out}/probe"))["tg"]["probe"]["read_bytes_per_second"]
print(f"read bandwidth probe (2 threads): {probe / 1e9:.2f} GB/s")
print("(each t/s is the mean over the repetitions ± its standard deviation)")
print(f"{'model':<34}{'thr':>4} {'test':<14}{'llama.cpp rpk0':>16}{'rpk1':>16}{'tokenscope':>16}{'ratio':>7}{'decode GB/s':>13}{'share':>7}")
below = []
for i in range(1, n + 1):
    model, t = open(f"{out}/{i}.what").read().split()
    name = os.path.basename(model)
    rows = {}
    for rpk in (0, 1):
        for line in open(f"{out}/{i}.theirs.{rpk}"):
            r = json.loads(line)
            key = (f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}") + (f" @ d{r['n_depth']}" if r.get("n_depth") else "")
            rows.setdefault(key, [None, None])[rpk] = (r["avg_ts"], r.get("stddev_ts", 0.0))
    ours = {f"pp{p}": json.load(open(f"{out}/{i}.ours.pp{p}"))["pp"] for p in pp}
    ours[f"tg{tg}"] = json.load(open(f"{out}/{i}.ours.tg"))["tg"]
    ours[f"tg{tg} @ d{depth}"] = json.load(open(f"{out}/{i}.ours.tgd"))["tg"]
    for key, o in ours.items():
        r0, r1 = rows.get(key, [None, None])
        best = max(x[0] for x in (r0, r1, (0.0, 0.0)) if x is not None)
        ratio = o["tokens_per_second"] / best if best else float("nan")
        bw = o.get("read_bytes_per_second")
        f = lambda x: f"{x[0]:.1f} ± {x[1]:.1f}" if x is not None else "crash"
        mine = (o["tokens_per_second"], o.get("stddev", 0.0))
        print(f"{name:<34}{t:>4} {key:<14}{f(r0):>16}{f(r1):>16}{f(mine):>16}{ratio:>7.2f}"
              + (f"{bw / 1e9:>13.2f}{bw / probe:>7.0%}" if bw else ""))
        if ratio < 1.0:
            below.append(f"{name} t{t} {key} ({ratio:.2f})")
print("below llama.cpp: " + (", ".join(below) if below else "none"))
PY
