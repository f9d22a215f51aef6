#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Build the llama.cpp reference tools (llama-tokenize, llama-bench, llama-simple, llama-perplexity,
# llama-completion) OUT OF TREE from the llama.cpp copy vendored in the PyPI sdist
# of llama-cpp-python. Nothing from llama.cpp is ever copied into this repository.
#
# Idempotent: re-running reuses the downloaded sdist, the unpacked sources and the
# build directory (ninja only rebuilds what changed).
#
# Environment:
#   LLAMA_CPP_TARGETS   the tools to build (default: all of the above)
#   TOKENSCOPE_REF_DIR  cache dir (default: $HOME/.cache/tokenscope/reference)
#   PYTHON              python with pip (default: <repo>/.venv/bin/python, else python3)
#   JOBS                parallel build jobs (default: 2)
#   TOKENSCOPE_REF_CPU  CPU variant of ggml's CPU backend (default: avx2)
#                         avx2    GGML_NATIVE=OFF, SSE4.2/AVX/AVX2/FMA/F16C/BMI2 on, every
#                                 AVX-512/AVX-VNNI/AMX option off; build/llama.cpp-<commit>-avx2.
#                                 The fixtures are made with this one: the engine mirrors ggml's
#                                 AVX2 code paths, and CI machines may lack AVX-512.
#                         native  GGML_NATIVE=ON (-march=native); build/llama.cpp-<commit>.
#                                 Float summation orders depend on the build machine.
#                       Both: one CPU backend variant only (GGML_CPU_ALL_VARIANTS=OFF,
#                       GGML_BACKEND_DL=OFF), GGML_LLAMAFILE left at its default (ON).
#
# Output (stdout): KEY=VALUE lines, e.g. LLAMA_TOKENIZE=/path/to/llama-tokenize
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="0.3.36"
# sha256 of llama_cpp_python-0.3.36.tar.gz as downloaded from PyPI
SDIST_SHA256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
# llama.cpp commit vendored by llama-cpp-python 0.3.36 (from its CHANGELOG.md:
# "feat: update llama.cpp to ggml-org/llama.cpp@0c1e57098"); the sdist has no .git,
# so we pass it to CMake so that `llama-tokenize --version` reports it.
LLAMA_CPP_COMMIT="0c1e57098"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
REF_DIR="${TOKENSCOPE_REF_DIR:-$HOME/.cache/tokenscope/reference}"
JOBS="${JOBS:-2}"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$REPO_ROOT/.venv/bin/python" ]]; then PYTHON="$REPO_ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi

case "$REF_DIR" in
    "$REPO_ROOT"|"$REPO_ROOT"/*) echo "error: TOKENSCOPE_REF_DIR must be outside the repository" >&2; exit 1;;
esac

SDIST_DIR="$REF_DIR/sdist"
SDIST="$SDIST_DIR/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
SRC_ROOT="$REF_DIR/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION"
LLAMA_SRC="$SRC_ROOT/vendor/llama.cpp"
CPU_VARIANT="${TOKENSCOPE_REF_CPU:-avx2}"
case "$CPU_VARIANT" in
    avx2)
        BUILD_DIR="$REF_DIR/build/llama.cpp-$LLAMA_CPP_COMMIT-avx2"
        CPU_FLAGS=(
            -DGGML_NATIVE=OFF
            -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
            -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF
            -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
        )
        # CMakeCache.txt values that must hold (guards against a stale/hand-edited cache)
        EXPECT_CACHE=(GGML_NATIVE=OFF GGML_SSE42=ON GGML_AVX=ON GGML_AVX2=ON GGML_FMA=ON GGML_F16C=ON
                      GGML_BMI2=ON GGML_AVX512=OFF GGML_AVX512_VBMI=OFF GGML_AVX512_VNNI=OFF
                      GGML_AVX512_BF16=OFF GGML_AVX_VNNI=OFF GGML_AMX_TILE=OFF GGML_AMX_INT8=OFF
                      GGML_AMX_BF16=OFF)
        ;;
    native)
        # historical location (the first fixtures were made with this build)
        BUILD_DIR="$REF_DIR/build/llama.cpp-$LLAMA_CPP_COMMIT"
        CPU_FLAGS=(-DGGML_NATIVE=ON)
        EXPECT_CACHE=(GGML_NATIVE=ON)
        ;;
    *) echo "error: TOKENSCOPE_REF_CPU must be avx2 or native (got '$CPU_VARIANT')" >&2; exit 1;;
esac
CPU_FLAGS+=(-DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF)
EXPECT_CACHE+=(GGML_CPU_ALL_VARIANTS=OFF GGML_BACKEND_DL=OFF)

mkdir -p "$SDIST_DIR" "$REF_DIR/src"

# 1. download the sdist (source only, no dependencies): the file straight from the package index
#    ($PIP_INDEX_URL, else PyPI), since `pip download` first prepares the package's metadata, which
#    installs its build tools (minutes); pip as the fallback. The sha256 below checks either.
fetch_sdist() {
    "$PYTHON" - "$LLAMA_CPP_PYTHON_VERSION" "$SDIST_DIR" <<'PY'
import os, re, sys, urllib.parse, urllib.request
version, dest = sys.argv[1], sys.argv[2]
page = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/") + "/llama-cpp-python/"
html = urllib.request.urlopen(page, timeout=120).read().decode("utf-8", "replace")
name = f"llama_cpp_python-{version}.tar.gz"
m = re.search(r'href="([^"#]*' + re.escape(name) + r')(#[^"]*)?"', html)
if not m:
    sys.exit(f"{name} is not listed at {page}")
part = os.path.join(dest, name + ".part")
urllib.request.urlretrieve(urllib.parse.urljoin(page, m.group(1).replace("&amp;", "&")), part)
os.replace(part, os.path.join(dest, name))
PY
}
if [[ ! -f "$SDIST" ]]; then
    echo "downloading llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION sdist ..." >&2
    if ! fetch_sdist >&2; then
        echo "(from the index page failed; asking pip)" >&2
        "$PYTHON" -m pip download --quiet --no-deps --no-binary :all: \
            "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$SDIST_DIR" >&2
    fi
fi
actual_sha="$(sha256sum "$SDIST" | cut -d' ' -f1)"
if [[ "$actual_sha" != "$SDIST_SHA256" ]]; then
    echo "error: sha256 mismatch for $SDIST: $actual_sha (expected $SDIST_SHA256)" >&2
    exit 1
fi

# 2. unpack
if [[ ! -f "$LLAMA_SRC/CMakeLists.txt" ]]; then
    echo "unpacking $SDIST ..." >&2
    rm -rf "$SRC_ROOT"
    tar -xzf "$SDIST" -C "$REF_DIR/src"
fi

# 3. configure (CPU only, no network features, static libs)
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
    echo "configuring llama.cpp ($CPU_VARIANT) in $BUILD_DIR ..." >&2
    cmake -S "$LLAMA_SRC" -B "$BUILD_DIR" -G Ninja \
        -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=OFF \
        "${CPU_FLAGS[@]}" \
        -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_HIP=OFF -DGGML_SYCL=OFF -DGGML_OPENCL=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON \
        -DLLAMA_BUILD_COMMIT="$LLAMA_CPP_COMMIT" >&2
fi

cache_val() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD_DIR/CMakeCache.txt" | head -1; }
for kv_ in "${EXPECT_CACHE[@]}"; do
    k_="${kv_%%=*}"; v_="${kv_#*=}"
    if [[ "$(cache_val "$k_")" != "$v_" ]]; then
        echo "error: $BUILD_DIR/CMakeCache.txt has $k_=$(cache_val "$k_"), expected $v_ for variant $CPU_VARIANT" >&2
        echo "       (delete $BUILD_DIR to reconfigure)" >&2
        exit 1
    fi
done
if [[ "$CPU_VARIANT" == avx2 ]] && grep -Eq -- '-march=native|-mavx512|-mamx|-mavxvnni' "$BUILD_DIR/build.ninja"; then
    echo "error: $BUILD_DIR/build.ninja has -march=native/AVX-512/AMX/AVX-VNNI flags" >&2
    exit 1
fi

# 4. build only the targets we use (LLAMA_CPP_TARGETS: a space-separated subset, e.g. only what the
#    test suite needs; the KEY=VALUE lines below name only the tools that were built)
read -r -a TARGETS <<< "${LLAMA_CPP_TARGETS:-llama-tokenize llama-bench llama-simple llama-completion llama-server llama-perplexity}"
cmake --build "$BUILD_DIR" --parallel "$JOBS" --target "${TARGETS[@]}" >&2

BIN_DIR="$BUILD_DIR/bin"
for t in "${TARGETS[@]}"; do
    [[ -x "$BIN_DIR/$t" ]] || { echo "error: $BIN_DIR/$t was not built" >&2; exit 1; }
done

version_line="$("$BIN_DIR/${TARGETS[0]}" --version 2>&1 | grep -m1 '^version' || true)"
echo "LLAMA_CPP_PYTHON_VERSION=$LLAMA_CPP_PYTHON_VERSION"
echo "LLAMA_CPP_COMMIT=$LLAMA_CPP_COMMIT"
echo "LLAMA_CPP_CPU_VARIANT=$CPU_VARIANT"
echo "LLAMA_CPP_LLAMAFILE=$(cache_val GGML_LLAMAFILE)"
echo "LLAMA_CPP_VERSION_LINE=$version_line"
echo "LLAMA_CPP_SRC=$LLAMA_SRC"
echo "LLAMA_CPP_BIN_DIR=$BIN_DIR"
for t in "${TARGETS[@]}"; do
    key="$(printf '%s' "${t#llama-}" | tr 'a-z-' 'A-Z_')"
    echo "LLAMA_$key=$BIN_DIR/$t"
done
