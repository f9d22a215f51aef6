#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Greedy continuations of ordinary prompts (not the fixtures'), Tokenscope against llama.cpp's AVX2
# build in one run, in three of llama.cpp's orders: for each prompt and model, where
# `tokenscope-cli trace --temp 0` (its default: llama.cpp's default settings, weights repacked and
# flash attention on) parts from llama.cpp's greedy tokens with its defaults (dump_logits --repack
# --flash-attn), where `trace --flash-attn off` parts from llama.cpp's with repacking and -fa off, and
# where `trace --no-repack --flash-attn off` parts from llama.cpp's --no-repack -fa off (one batch),
# with llama.cpp's own top-2 gap at the first near-tie (< 0.1); then, as text, llama-completion with
# its defaults and with --no-repack -fa off.
#   bench/parity_beyond_fixtures.sh [PROMPTS_FILE] [N]   (prompts: one per line, "\n" for a newline)
# MODELS="a.gguf b.gguf" runs other GGUFs instead of the two installed models (e.g. a user's file, or
# the weight-type twins of bench/types_vs_llama_cpp.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROMPTS="${1:-$ROOT/bench/parity_prompts.txt}"
N="${2:-32}"
PY="$ROOT/.venv/bin/python"
CLI="$ROOT/build/release/app/tokenscope-cli"
kv="$(bash "$ROOT/tests/reference/build_dump_logits.sh")"
DUMP="$(printf '%s\n' "$kv" | sed -n 's/^DUMP_LOGITS=//p')"
BIN="$(dirname "$DUMP")"
LLAMA_CPP_TARGETS="llama-completion" bash "$ROOT/tests/reference/build_llama_cpp.sh" > /dev/null
MODELS_DIR="${XDG_DATA_HOME:-$HOME/.local/share}/tokenscope/models"
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
MODELS="${MODELS:-$MODELS_DIR/gemma-3-270m-Q4_K_M.gguf $MODELS_DIR/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}"
for model in $MODELS; do
  echo "== $(basename "$model"), $N greedy tokens"
  "$PY" - "$model" "$PROMPTS" "$N" "$DUMP" "$BIN/llama-completion" "$CLI" "$TMP" <<'PYEOF'
import json, struct, subprocess, sys
model, prompts, n, dump, completion, cli, tmp = sys.argv[1:]
def read_dump(path):
    d = open(path, 'rb').read()
    off = 8; jl = struct.unpack('<I', d[off:off + 4])[0]; off += 4
    h = json.loads(d[off:off + jl]); off += jl
    off += 4 * h['n_prompt'] + 4 * h['n_vocab']
    k = h['n_predict']
    greedy = list(struct.unpack(f'<{k}i', d[off:off + 4 * k])); off += 8 * k
    gaps = list(struct.unpack(f'<{k}f', d[off:off + 4 * k]))
    return greedy, gaps
ORDERS = (('default', ['--repack', '--flash-attn'], []),
          ('repack -fa off', ['--repack'], ['--flash-attn', 'off']),
          ('no-repack -fa off', [], ['--no-repack', '--flash-attn', 'off']))
same = {o[0]: 0 for o in ORDERS}
lines = [l.replace('\\n', '\n') for l in open(prompts, encoding='utf-8').read().splitlines() if l.strip()]
for i, p in enumerate(lines):
    pf = f'{tmp}/p.txt'; open(pf, 'w', encoding='utf-8').write(p)
    verdicts = []
    for order, dump_extra, ours_extra in ORDERS:
        subprocess.run([dump, '-m', model, '-f', pf, '-o', f'{tmp}/ref.bin', '--n-predict', n, '--threads', '2']
                       + dump_extra, check=True, capture_output=True)
        ref, gaps = read_dump(f'{tmp}/ref.bin')
        subprocess.run([cli, 'trace', model, '-p', p, '-n', n, '--temp', '0', '-t', '2', '--json', f'{tmp}/t.json'] + ours_extra,
                       check=True, capture_output=True)
        ours = [s['token'] for s in json.load(open(f'{tmp}/t.json'))['steps']]
        part = next((j for j in range(min(len(ours), len(ref))) if ours[j] != ref[j]), None)
        tie = next((j for j, g in enumerate(gaps) if g < 0.1), None)
        same[order] += part is None and len(ours) == len(ref)
        verdicts.append(f'{order}: {"identical" if part is None else f"parts at step {part}"} (first top-2 gap < 0.1 at {tie})')
    texts = {}
    for label, extra in (('default', []), ('plain', ['--no-repack', '-fa', 'off'])):
        r = subprocess.run([completion, '-m', model, '-p', p, '-n', n, '--temp', '0', '-c', '4096',
                            '-b', '2048', '-ub', '2048', '-t', '2', '-no-cnv', '--no-warmup'] + extra,
                           capture_output=True)
        texts[label] = r.stdout  # bytes: a continuation may end inside a UTF-8 sequence
    print(f'{i}: ' + '; '.join(verdicts) + '; llama-completion text: its defaults '
          f'{"equal" if texts["default"] == texts["plain"] else "differ from"} --no-repack -fa off')
print('identical: ' + ', '.join(f'{same[o[0]]} of {len(lines)} in llama.cpp\'s {o[0]} order' for o in ORDERS))
PYEOF
done
