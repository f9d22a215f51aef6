#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Peak resident memory of one long chat reply with the attention view closed and with it open,
# each in a process of its own (test_attention_watch's two cases), on the default model or the
# model given. With the view closed nothing is recorded; open, the reply's passes are recorded
# (every layer while the recording fits its 96 MiB budget, else the layers the view asked for).
#   bench/chat_memory.sh [TOKENS] [MODEL] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
TOKENS="${1:-1000}"
MODEL="${2:-}"
BUILD="${3:-build/release}"
[ -x "$BUILD/tests/test_attention_watch" ] || { echo "build first: bash scripts/setup.sh test (or cmake --build $BUILD)" >&2; exit 2; }
for case in closedRecordsNothing openRecordsTheReply; do
  QT_QPA_PLATFORM=offscreen QTEST_FUNCTION_TIMEOUT=3600000 TOKENSCOPE_WATCH_REPLY_TOKENS="$TOKENS" \
    ${MODEL:+TOKENSCOPE_MODEL="$MODEL"} "$BUILD/tests/test_attention_watch" "$case" | grep -E "QINFO|FAIL"
done
