#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# UI responsiveness while the model generates (the app streams 128 tokens of a reply with the
# default model, offscreen) and while a 120,000-character paste is tokenized and drawn: a 5 ms timer
# measures how late the event loop serves it, and
# prints the worst delay. A benchmark, not a pass/fail test. Target: ≤ 50 ms on 2 cores.
#   bench/ui_latency.sh [MODEL]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODEL="${1:-${XDG_DATA_HOME:-$HOME/.local/share}/tokenscope/models/gemma-3-270m-Q4_K_M.gguf}"
DATA="$(mktemp -d)"; trap 'rm -rf "$DATA"' EXIT
args=(--latency-probe --model "$MODEL")
QT_QPA_PLATFORM=offscreen XDG_DATA_HOME="$DATA" XDG_CONFIG_HOME="$DATA" "$ROOT/build/release/ui/tokenscope" "${args[@]}" 2>/dev/null
# …and while a 120,000-character paste is tokenized and drawn in the tokenizer panel.
QT_QPA_PLATFORM=offscreen XDG_DATA_HOME="$DATA" XDG_CONFIG_HOME="$DATA" "$ROOT/build/release/ui/tokenscope" \
  --latency-paste 120000 --model "$MODEL" 2>/dev/null
