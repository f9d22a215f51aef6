#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Soak: N generated tokens (default 10,000) on the default model with the resident set sampled every
# 64 tokens; fails if it grows by more than the KV cache allocated meanwhile + 32 MiB, and prints
# tokens/s early and late. CI runs the same test with 1,000 tokens (test_soak).
#   bench/soak.sh [TOKENS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
TOKENS="${1:-10000}"
BUILD="${2:-build/release}"
[ -x "$BUILD/tests/test_soak" ] || { echo "build first: bash scripts/setup.sh test (or cmake --build $BUILD)" >&2; exit 2; }
# QTEST_FUNCTION_TIMEOUT: Qt Test stops a test function after 5 minutes by default.
QTEST_FUNCTION_TIMEOUT=7200000 TOKENSCOPE_SOAK_TOKENS="$TOKENS" "$BUILD/tests/test_soak" | grep -E "QINFO|PASS|FAIL|Totals"
