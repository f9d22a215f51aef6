#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Writes tests/data/runs: saved runs as the app and `tokenscope-cli trace` write them, which later
# versions must open unchanged (test_saved_runs committedRunsOpenUnchanged compares what they read
# with <file>.expected). The model is a generated gemma3 with the built-in byte-level vocabulary, so
# the files stay small. Run from the repository root after building build/release; commit the files
# only when the run format itself changes (then add new ones, keep the old).
set -euo pipefail
build="${TOKENSCOPE_BUILD:-build/release}"
out=tests/data/runs
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
"$build/app/tokenscope-cli" make-test-model --arch gemma3 --seed 1 -o "$tmp/gemma3-tiny.gguf" >/dev/null
# The CLI's trace: six greedy steps, two heads' attention.
"$build/app/tokenscope-cli" trace "$tmp/gemma3-tiny.gguf" -p "The cat sat on the mat" -n 6 --temp 0 -t 1 \
  --attention 0:0,5:1 --run "$out/cli-trace-gemma3-tiny.tsrun" >/dev/null
# The app's save: stepper (a forced step), attention, text analysis, head classes, steering.
QT_QPA_PLATFORM=offscreen TOKENSCOPE_THREADS=1 TOKENSCOPE_MODEL="$tmp/gemma3-tiny.gguf" \
  TOKENSCOPE_WRITE_RUN_FIXTURE="$PWD/$out/app-gemma3-tiny.tsrun" "$build/tests/test_saved_runs" writeAppFixture
# What each opens as, for the comparison.
QT_QPA_PLATFORM=offscreen TOKENSCOPE_MODEL="$tmp/gemma3-tiny.gguf" TOKENSCOPE_WRITE_RUN_EXPECTATIONS=1 \
  "$build/tests/test_saved_runs" committedRunsOpenUnchanged
ls -l "$out"
