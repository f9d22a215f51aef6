#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Start-up to first token and exit, Tokenscope against llama.cpp, by hyperfine over 10 runs each:
#   bench/startup_vs_llama_cpp.sh [MODEL] [THREADS]
# `tokenscope-cli generate MODEL -p P -n 1` against `llama-completion -m MODEL -p P -n 1` on a
# 10-token prompt (the default model's tokenizer counts it; BOS included), both greedy, both on THREADS
# threads (default 2). llama-completion is built natively from the registry's sdist
# (tests/reference/build_llama_cpp.sh). Also prints each side's peak resident memory (GNU time).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODEL="${1:-${XDG_DATA_HOME:-$HOME/.local/share}/tokenscope/models/gemma-3-270m-Q4_K_M.gguf}"
THREADS="${2:-2}"
OURS="$ROOT/build/release/app/tokenscope-cli"
[ -x "$OURS" ] || { echo "build first: bash scripts/setup.sh run" >&2; exit 1; }
command -v hyperfine > /dev/null || { echo "needs hyperfine (scripts/setup.sh installs it)" >&2; exit 1; }
COMPLETION="$(TOKENSCOPE_REF_CPU=native LLAMA_CPP_TARGETS=llama-completion "$ROOT/tests/reference/build_llama_cpp.sh" |
    sed -n 's/^LLAMA_COMPLETION=//p')"
[ -x "$COMPLETION" ] || { echo "llama-completion was not built" >&2; exit 1; }
PROMPT="The quick brown fox jumps over the lazy dog"
echo "prompt: \"$PROMPT\" ($("$OURS" tokenize "$MODEL" --ids "$PROMPT" 2>/dev/null | tr -cd ',' | wc -c | xargs -I{} expr {} + 1) tokens)"
hyperfine -N -w 2 -r 10 \
    -n tokenscope "$OURS generate $MODEL -p '$PROMPT' -n 1 -t $THREADS --temp 0" \
    -n llama.cpp "$COMPLETION -m $MODEL -p '$PROMPT' -n 1 -t $THREADS --temp 0 -no-cnv --no-display-prompt"
for cmd in "$OURS generate $MODEL -p '$PROMPT' -n 1 -t $THREADS --temp 0" \
    "$COMPLETION -m $MODEL -p '$PROMPT' -n 1 -t $THREADS --temp 0 -no-cnv --no-display-prompt"; do
    eval "/usr/bin/time -f '%M KiB peak resident: ${cmd%% *}' $cmd" > /dev/null 2> >(tail -1 >&2)
    sleep 0.2
done
