#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Build tests/reference/dump_tensors.cpp (ours) against the out-of-tree llama.cpp
# build made by build_llama_cpp.sh (static libllama + ggml), like
# build_dump_logits.sh. The binary goes into the cache directory, never into the
# repository. Relinks only when the source or a library is newer than the binary.
#
# Environment: TOKENSCOPE_REF_DIR, PYTHON, JOBS, TOKENSCOPE_REF_CPU (avx2 | native, default
# avx2; see build_llama_cpp.sh), CXX (default c++). The binary is linked against that
# variant's libraries and goes into that variant's bin dir.
# Output (stdout): the KEY=VALUE lines of build_llama_cpp.sh plus DUMP_TENSORS=/path/to/dump_tensors
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JOBS="${JOBS:-2}"
CXX="${CXX:-c++}"

kv="$("$SCRIPT_DIR/build_llama_cpp.sh")"
get() { printf '%s\n' "$kv" | sed -n "s/^$1=//p" | head -1; }
LLAMA_SRC="$(get LLAMA_CPP_SRC)"
BIN_DIR="$(get LLAMA_CPP_BIN_DIR)"
BUILD_DIR="$(dirname "$BIN_DIR")"

cmake --build "$BUILD_DIR" --parallel "$JOBS" --target llama ggml ggml-cpu ggml-base >&2

LIBS=(
    "$BUILD_DIR/src/libllama.a"
    "$BUILD_DIR/ggml/src/libggml.a"
    "$BUILD_DIR/ggml/src/libggml-cpu.a"
    "$BUILD_DIR/ggml/src/libggml-base.a"
)
for l in "${LIBS[@]}"; do [[ -f "$l" ]] || { echo "error: missing $l" >&2; exit 1; }; done

EXTRA=(-ldl -lm -pthread)
if grep -q '^GGML_OPENMP:BOOL=ON' "$BUILD_DIR/CMakeCache.txt"; then
    EXTRA=(-fopenmp "${EXTRA[@]}")
fi

SRC="$SCRIPT_DIR/dump_tensors.cpp"
OUT="$BIN_DIR/dump_tensors"
need=0
[[ -x "$OUT" ]] || need=1
for dep in "$SRC" "$0" "${LIBS[@]}" "$LLAMA_SRC/include/llama.h"; do
    [[ $need == 1 || "$dep" -nt "$OUT" ]] && need=1
done
if [[ $need == 1 ]]; then
    echo "building $OUT ..." >&2
    "$CXX" -std=c++20 -O2 -Wall -Wextra \
        -DTSDL_LLAMA_CPP_COMMIT="\"$(get LLAMA_CPP_COMMIT)\"" \
        -DTSDL_CPU_VARIANT="\"$(get LLAMA_CPP_CPU_VARIANT)\"" \
        -I"$LLAMA_SRC/include" -I"$LLAMA_SRC/ggml/include" \
        "$SRC" -o "$OUT.tmp" "${LIBS[@]}" "${EXTRA[@]}"
    mv -f "$OUT.tmp" "$OUT"
fi

printf '%s\n' "$kv"
echo "DUMP_TENSORS=$OUT"
