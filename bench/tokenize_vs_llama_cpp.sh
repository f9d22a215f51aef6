#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Tokenizer throughput, Tokenscope against llama.cpp, in one run: both tokenize the same text with the
# same vocabulary (whole process: vocabulary load + tokenization), the ids are compared, and the
# ratio of wall times is printed.
#   bench/tokenize_vs_llama_cpp.sh [MODEL] [SIZE_BYTES]
# Needs build/release (scripts/setup.sh) and llama.cpp from tests/reference/build_llama_cpp.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODEL="${1:-${XDG_DATA_HOME:-$HOME/.local/share}/tokenscope/models/gemma-3-270m-Q4_K_M.gguf}"
SIZE="${2:-1000000}"
OURS="$ROOT/build/release/app/tokenscope-cli"
THEIRS="$("$ROOT/tests/reference/build_llama_cpp.sh" | sed -n 's/^LLAMA_TOKENIZE=//p')"
TEXT="$(mktemp)"; trap 'rm -f "$TEXT" "$TEXT".*' EXIT
# The tokenizer corpus (every script and category), repeated to SIZE bytes.
"$ROOT/.venv/bin/python" - "$ROOT/tests/data/tokenizer/corpus.json" "$SIZE" "$TEXT" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
text = "\n".join(c["text"] for c in cases if "\x00" not in c["text"])
size = int(sys.argv[2])
data = (text * (size // len(text.encode()) + 1)).encode()[:size].decode("utf-8", "ignore")
open(sys.argv[3], "w").write(data)
PY
TIMEFORMAT=%R
t_ours=$( { time "$OURS" tokenize "$MODEL" --file "$TEXT" --ids > "$TEXT.ours"; } 2>&1 )
t_theirs=$( { time "$THEIRS" -m "$MODEL" --file "$TEXT" --ids --no-escape --log-disable > "$TEXT.theirs"; } 2>&1 )
same=$(cmp -s "$TEXT.ours" "$TEXT.theirs" && echo "identical ids" || echo "IDS DIFFER")
n=$(tr ',' '\n' < "$TEXT.ours" | wc -l)
echo "text: $(wc -c < "$TEXT") bytes, $n tokens ($same)"
echo "tokenscope-cli tokenize: ${t_ours} s"
echo "llama-tokenize:          ${t_theirs} s"
echo "speed ratio (llama.cpp time / ours): $(python3 -c "print(f'{$t_theirs / $t_ours:.2f}')")"
