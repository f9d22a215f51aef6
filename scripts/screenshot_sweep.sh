#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Every panel of the app after a real run, at the three sizes the layouts are checked at (1280x800 and
# 1920x1080 at 1x, 1280x800 at 2x), on the given models: PNGs to look at, one per panel, size and
# model. The geometry itself is asserted by test_layout; this is for the eyes.
#
#   scripts/screenshot_sweep.sh OUT_DIR MODEL.gguf [MODEL.gguf ...]
#
# Offscreen (no display needed). Needs build/release/ui/tokenscope.
set -euo pipefail
out=${1:?usage: screenshot_sweep.sh OUT_DIR MODEL.gguf [MODEL.gguf ...]}
shift
[[ $# -ge 1 ]] || { echo "give at least one model" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
app=$root/build/release/ui/tokenscope
mkdir -p "$out"
prompt="The keeper climbed the stairs of the lighthouse every evening and wrote in his log what the sea had done that day."
panels=(main chat tokenizer stepper attention kv context timeline text lab library connect)
failed=0
for model in "$@"; do
    name=$(basename "$model" .gguf)
    for size in 1280x800@1 1920x1080@1 1280x800@2; do
        wh=${size%@*}
        scale=${size#*@}
        for panel in "${panels[@]}"; do
            file="$out/$name-$panel-$wh-${scale}x.png"
            start=$(date +%s%N)
            if QT_QPA_PLATFORM=offscreen timeout 300 "$app" --model "$model" --screenshot "$file" --panel "$panel" \
                --size "$wh" --scale "$scale" --prompt "$prompt" --max-tokens 24 >/dev/null 2>"$out/last.log"; then
                printf '%-70s %6d ms\n' "$(basename "$file")" $((($(date +%s%N) - start) / 1000000))
            else
                echo "FAILED: $(basename "$file")"
                cat "$out/last.log" >&2
                failed=$((failed + 1))
            fi
        done
    done
done
rm -f "$out/last.log"
echo "$failed failed"
[[ $failed -eq 0 ]]
