#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Prefill and decode speed, Tokenscope against llama.cpp, in one run, same model and threads:
#   bench/bench_vs_llama_cpp.sh [MODEL] [THREADS] [REPS]
# Builds the llama.cpp reference (tests/reference/build_llama_cpp.sh, native CPU variant: llama.cpp
# at its fastest here) and runs llama-bench and `tokenscope-cli bench` with -p 512 -n 128, then
# prints both and the ratios. llama-bench runs with --repack 0: on CPUs with AMX its repacked
# weights crash this llama.cpp version (see tests/reference/README.md).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODEL="${1:-${XDG_DATA_HOME:-$HOME/.local/share}/tokenscope/models/gemma-3-270m-Q4_K_M.gguf}"
THREADS="${2:-$(nproc)}"
REPS="${3:-3}"
OURS="$ROOT/build/release/app/tokenscope-cli"
[ -x "$OURS" ] || { echo "build first: bash scripts/setup.sh run" >&2; exit 1; }
BIN_DIR="$(TOKENSCOPE_REF_CPU=native "$ROOT/tests/reference/build_llama_cpp.sh" | sed -n 's/^LLAMA_BENCH=//p' | xargs dirname)"
LLAMA_BENCH="$BIN_DIR/llama-bench"

theirs=$("$LLAMA_BENCH" -m "$MODEL" -t "$THREADS" -p 512 -n 128 -r "$REPS" --repack 0 -o json 2>/dev/null)
ours=$("$OURS" bench "$MODEL" -t "$THREADS" -p 512 -n 128 -r "$REPS" --json)
python3 - "$theirs" "$ours" "$THREADS" <<'PY'
import json, sys
theirs = json.loads(sys.argv[1]); ours = json.loads(sys.argv[2]); threads = sys.argv[3]
t = {("pp" if r["n_prompt"] else "tg"): r["avg_ts"] for r in theirs}
o = {"pp": ours["pp"]["tokens_per_second"], "tg": ours["tg"]["tokens_per_second"]}
print(f"threads {threads}; llama.cpp build {theirs[0].get('build_commit','?')} ({theirs[0].get('cpu_info','').strip()})")
print(f"{'test':<8}{'llama.cpp t/s':>16}{'tokenscope t/s':>18}{'ratio':>8}")
for k, name in (("pp", "pp512"), ("tg", "tg128")):
    print(f"{name:<8}{t[k]:>16.2f}{o[k]:>18.2f}{o[k] / t[k]:>8.2f}")
PY
