#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Full-size mixture-of-experts twins against llama.cpp, bit for bit (too large for CI's test_moe):
#   bench/moe_parity_twins.sh
# For each preset (PRESETS, default the Granite 3.1 1B-A400M twin: 24 layers × 32 experts, rows of 1024
# values, 8 experts per token, so an expert's rows cross the tiled order's 8-row threshold on long
# prompts): `make-test-model --preset`, then llama.cpp's AVX2 build (`dump_logits`, tests/reference)
# on the prompts of 1 … 600 tokens (prompts-types.json) in its plain order and with its repacking, then
# `test_moe publishedShapeAgreesWhenAsked` in the matching order. ORDERS="plain repacked" by default.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PRESETS="${PRESETS:-granite-3.1-1b-a400m}"
ORDERS="${ORDERS:-plain repacked}"
CLI="$ROOT/build/release/app/tokenscope-cli"
TEST="$ROOT/build/release/tests/test_moe"
[ -x "$CLI" ] && [ -x "$TEST" ] || { echo "build first: bash scripts/setup.sh run" >&2; exit 1; }
DUMP="$(sed -n 's/^DUMP_LOGITS=//p' <<< "$("$ROOT/tests/reference/build_dump_logits.sh")")"
[ -x "$DUMP" ] || { echo "dump_logits was not built" >&2; exit 1; }
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
status=0
for preset in $PRESETS; do
    twin="$OUT/$preset.gguf"
    "$CLI" make-test-model --preset "$preset" --out "$twin" > /dev/null
    for order in $ORDERS; do
        fixture="$OUT/$preset-$order.gguf"
        "$ROOT/.venv/bin/python" "$ROOT/tests/reference/make_logit_fixtures.py" --model "$twin" \
            --prompts "$ROOT/tests/data/logits/prompts-types.json" --out "$fixture" --n-predict 8 \
            --dump-logits "$DUMP" $([ "$order" = repacked ] && echo --repack) > "$OUT/$preset-$order.log" 2>&1 ||
            { echo "dump_logits failed for $preset ($order):" >&2; tail -5 "$OUT/$preset-$order.log" >&2; exit 1; }
        TOKENSCOPE_MOE_TWIN="$twin" TOKENSCOPE_MOE_TWIN_FIXTURE="$fixture" \
            TOKENSCOPE_MOE_TWIN_REPACK=$([ "$order" = repacked ] && echo 1 || echo 0) \
            "$TEST" publishedShapeAgreesWhenAsked > "$OUT/$preset-$order.test" 2>&1 || status=1
        grep -E "QINFO|FAIL|Totals" "$OUT/$preset-$order.test" || true
    done
done
exit $status
