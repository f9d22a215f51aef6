#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Every libFuzzer target for SECONDS each (default 3600), one after another, each keeping its corpus
# under build/sanitize/fuzz-corpus/<target> between runs; prints each one's execution count. Needs the
# sanitizer tree (bash scripts/setup.sh test builds it).
#   bench/fuzz.sh [SECONDS] [BUILD_DIR] [TARGET...]
# fuzz_run's corpus starts from the committed one (tests/data/fuzz/run); `-merge=1` into that folder
# keeps a minimized corpus after a long run (test_saved_runs opens every entry in the app).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-3600}"
BUILD="${2:-build/sanitize}"
shift $(( $# > 2 ? 2 : $# ))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_gguf fuzz_model fuzz_tokenizer fuzz_text_formats fuzz_jinja fuzz_run)
for target in "${targets[@]}"; do
  exe="$BUILD/tests/fuzz/$target"
  [ -x "$exe" ] || { echo "missing $exe: bash scripts/setup.sh test builds it" >&2; exit 2; }
  echo "== $target, $SECONDS_EACH s"
  seeds=()
  [ "$target" = fuzz_gguf ] && seeds=("$BUILD/fuzz-seeds" tests/data/tokenizer)
  [ "$target" = fuzz_run ] && seeds=(tests/data/fuzz/run)
  "$exe" -max_total_time="$SECONDS_EACH" -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 \
    "$BUILD/fuzz-corpus/$target" "${seeds[@]}" 2>&1 | grep -E "stat::number_of_executed_units|ERROR|SUMMARY|crash-" || true
done
