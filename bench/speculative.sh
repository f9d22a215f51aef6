#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Speculative decoding, Tokenscope beside llama.cpp in one run:
#   bench/speculative.sh [MODEL.gguf]
# On code-editing prompts (give a function back with one change) and ordinary chat prompts, greedy,
# each draft source at k = 2, 4, 8: acceptance (accepted / drafted) and speedup over plain decoding.
# Tokenscope: `tokenscope-cli generate --speculate SOURCE --draft-max K --json` (it runs the plain loop
# on the same prompt in the same call: speedup = speculative tokens/s ÷ plain tokens/s). llama.cpp,
# built natively from the registry's sdist by tests/reference/build_llama_cpp.sh: `llama-lookup`
# (prompt lookup) and `llama-speculative` (draft model) with --spec-draft-n-max K, against
# `llama-completion` for its plain decode speed (its "eval time" line; llama.cpp has no early exit: "—"). Both without weight repacking
# (-nr: repacking crashes this llama.cpp on AMX CPUs) and with EOS ignored (our runs generate exactly
# N tokens).
# Defaults: the chat model, N=64 tokens, 2 threads, early exit at L=21 (EARLY), the draft model DRAFT
# (default: the target itself — no smaller model with its vocabulary is installed offline, so its
# acceptance is the upper bound and its cost a full pass: say so when quoting).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODELS_DIR="${XDG_DATA_HOME:-$HOME/.local/share}/tokenscope/models"
MODEL="${1:-$MODELS_DIR/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}"
DRAFT="${DRAFT:-$MODEL}"
EARLY="${EARLY:-21}"
N="${N:-64}"
THREADS="${THREADS:-2}"
KS="${KS:-2 4 8}"
OURS="$ROOT/build/release/app/tokenscope-cli"
[ -x "$OURS" ] || { echo "build first: bash scripts/setup.sh run" >&2; exit 1; }
TOOLS="$(TOKENSCOPE_REF_CPU=native LLAMA_CPP_TARGETS="llama-lookup llama-speculative llama-completion" \
    "$ROOT/tests/reference/build_llama_cpp.sh")"
LOOKUP="$(sed -n 's/^LLAMA_LOOKUP=//p' <<< "$TOOLS")"
SPECULATIVE="$(sed -n 's/^LLAMA_SPECULATIVE=//p' <<< "$TOOLS")"
COMPLETION="$(sed -n 's/^LLAMA_COMPLETION=//p' <<< "$TOOLS")"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

chat() { printf '<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n' "$1"; }
FUNC1=$'def average(values):\n    total = 0\n    for v in values:\n        total += v\n    return total / len(values)\n'
FUNC2=$'def find_user(users, name):\n    for user in users:\n        if user["name"] == name:\n            return user\n    return None\n\ndef count_active(users):\n    active = 0\n    for user in users:\n        if user["active"]:\n            active += 1\n    return active\n'
PROMPTS=(
    "edit-rename|$(chat "Rename total to sum and give the whole function back:"$'\n\n'"$FUNC1")"
    "edit-users|$(chat "Rename users to people everywhere and give the whole code back:"$'\n\n'"$FUNC2")"
    "chat-hashmap|$(chat "What is a hash map? Answer in one paragraph.")"
    "chat-cache|$(chat "Explain what a CPU cache is and why it matters.")"
)

echo "model $(basename "$MODEL"); draft model $(basename "$DRAFT")$([ "$DRAFT" = "$MODEL" ] && echo ' (the target itself)'); early exit L=$EARLY"
echo "N=$N tokens, greedy, $THREADS threads; k = $KS"
echo "llama.cpp: $(dirname "$LOOKUP") ($(grep -m1 '^LLAMA_CPP_VERSION_LINE=' <<< "$TOOLS" | cut -d= -f2-)); Tokenscope: $(git -C "$ROOT" rev-parse --short HEAD); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"

llama_speed() { sed -n 's/.*decoded *\([0-9]*\) tokens in *\([0-9.]*\) seconds, speed: *\([0-9.]*\) t\/s.*/\3/p' "$1" | tail -1; }
llama_plain() { sed -n 's/.*[^t] eval time = .*per token, *\([0-9.]*\) tokens per second.*/\1/p' "$1" | tail -1; }
llama_count() { sed -n "s/.*$2 *= *\([0-9]*\).*/\1/p" "$1" | tail -1; }

for entry in "${PROMPTS[@]}"; do
    name="${entry%%|*}"
    prompt="${entry#*|}"
    "$COMPLETION" -m "$MODEL" -p "$prompt" -n "$N" -t "$THREADS" --temp 0 -nr --ignore-eos -no-cnv -c 2048 \
        > "$OUT/$name.plain" 2>&1 < /dev/null || true
    for k in $KS; do
        for src in lookup "early-exit:$EARLY" "draft:$DRAFT"; do
            tag="${src%%:*}"
            "$OURS" generate "$MODEL" -p "$prompt" -n "$N" --temp 0 --speculate "$src" --draft-max "$k" \
                -t "$THREADS" --json > "$OUT/$name.$tag.$k.ours" 2> "$OUT/$name.$tag.$k.ours.err" || true
        done
        common=(-m "$MODEL" -p "$prompt" -n "$N" --spec-draft-n-max "$k" -t "$THREADS" --temp 0 -c 2048 -nr --ignore-eos)
        "$LOOKUP" "${common[@]}" > "$OUT/$name.lookup.$k.theirs" 2>&1 || true
        "$SPECULATIVE" "${common[@]}" -md "$DRAFT" > "$OUT/$name.draft.$k.theirs" 2>&1 || true
    done
done

names=""
for entry in "${PROMPTS[@]}"; do names="$names ${entry%%|*}"; done
python3 - "$OUT" "$KS" $names <<'PY'
import json, os, re, sys
out, ks, names = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
def text(path):
    return open(path, errors="replace").read() if os.path.exists(path) else ""
def last(pattern, s):
    m = re.findall(pattern, s)
    return m[-1] if m else None
print(f"\n{'prompt':<13} {'source':<11} {'k':>2} | {'ours acc.':>9} {'speedup':>8} | {'llama acc.':>10} {'speedup':>8}")
plains = {}
for name in names:
    plain = last(r"[^t] eval time = .*?per token,\s*([0-9.]+) tokens per second", text(f"{out}/{name}.plain"))
    plains[name] = float(plain) if plain else None
    for k in ks:
        for tag in ("lookup", "early-exit", "draft"):
            try:
                j = json.load(open(f"{out}/{name}.{tag}.{k}.ours"))
                ours = f"{100 * j['acceptance']:8.0f}% {j['speedup']:8.2f}"
            except Exception:
                ours = f"{'error: ' + text(f'{out}/{name}.{tag}.{k}.ours.err')[:40]:>18}"
            theirs = f"{'—':>10} {'—':>8}"
            if tag != "early-exit":
                t = text(f"{out}/{name}.{tag}.{k}.theirs")
                speed = last(r"decoded\s+\d+ tokens in\s+[0-9.]+ seconds, speed:\s+([0-9.]+) t/s", t)
                drafted = last(r"n_drafted\s*=\s*(\d+)", t)
                accepted = last(r"n_accept\s*=\s*(\d+)", t)
                if speed and drafted is not None and plains[name]:
                    acc = f"{100 * int(accepted) / int(drafted):.0f}%" if int(drafted) else "none"
                    theirs = f"{acc:>10} {float(speed) / plains[name]:8.2f}"
                else:
                    theirs = f"{'failed':>10} {'—':>8}"
            print(f"{name:<13} {tag:<11} {k:>2} | {ours} | {theirs}")
print("llama.cpp plain decode (llama-completion), tokens/s: " +
      ", ".join(f"{n} {plains[n]}" for n in names))
PY
