#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Every libFuzzer target for SECONDS each (default 3600), one after another, each keeping its corpus
# under build/sanitize/fuzz-corpus/<target> between runs; prints each one's execution count. Needs the
# sanitizer tree (bash scripts/setup.sh test builds it).
#   bench/fuzz.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-3600}"
BUILD="${2:-build/sanitize}"
for target in fuzz_gguf fuzz_model fuzz_tokenizer fuzz_text_formats; do
  exe="$BUILD/tests/fuzz/$target"
  [ -x "$exe" ] || { echo "missing $exe: bash scripts/setup.sh test builds it" >&2; exit 2; }
  echo "== $target, $SECONDS_EACH s"
  seeds=()
  [ "$target" = fuzz_gguf ] && seeds=("$BUILD/fuzz-seeds" tests/data/tokenizer)
  "$exe" -max_total_time="$SECONDS_EACH" -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 \
    "$BUILD/fuzz-corpus/$target" "${seeds[@]}" 2>&1 | grep -E "stat::number_of_executed_units|ERROR|SUMMARY|crash-" || true
done
