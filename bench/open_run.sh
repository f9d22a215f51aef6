#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# How long the largest legitimate saved runs take to open in the app (offscreen): a stepper over a
# 128K-token context and a text analysis as long as a run's 16 MiB document holds (the limits are
# README's "Saved runs"). Runs test_saved_runs' theLargestLegitimateRunsOpen, which saves a real run
# of the default model first, and prints its timings.
#   bench/open_run.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build/release}"
exe="$BUILD/tests/test_saved_runs"
[ -x "$exe" ] || { echo "missing $exe: build the Release tree first" >&2; exit 2; }
QT_QPA_PLATFORM=offscreen TOKENSCOPE_THREADS="${TOKENSCOPE_THREADS:-2}" \
  "$exe" aRunReopensInEveryPanelWithoutTheModel theLargestLegitimateRunsOpen 2>&1 |
  grep -E "opened|FAIL|Totals"
