#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# The GPU check: Tokenscope's CUDA and Vulkan backends on a machine with a GPU, given the source tree
# and a bundle of build outputs (no model files), in a few minutes.
#
#   bench/gpu_check.sh --pack     (here, after building build/release) writes .gpu/tokenscope-gpu.tar.xz:
#                                 tokenscope-cli, the CUDA module, test_vulkan_parity, test_cuda_kernels,
#                                 test_cuda_backend and the shared libraries they need beyond glibc,
#                                 libstdc++ and the Vulkan loader (about 20 MB; add /.gpu/ to
#                                 .git/info/exclude and carry .gpu)
#   bench/gpu_check.sh [--quick]  (there) unpacks the bundle, finds a Vulkan loader and driver, runs
#                                 the CUDA kernel suite (every kernel on the device must give the
#                                 emulator's bits) and the CUDA and Vulkan parity suites on the
#                                 random-weight models of every
#                                 architecture, writes full-size random-weight twins of the default
#                                 model, the chat model and Llama 3.1 8B (make-test-model --preset),
#                                 and benchmarks pp512, tg128 and tg128 at 4,096 tokens of context on
#                                 CUDA and on Vulkan's f32 arithmetic (and the exact one on the small
#                                 twins), printing
#                                 one table with tokens/s and decode's read bandwidth as a share of
#                                 the device's (GPU_BANDWIDTH_GBS, else a table of known GPUs).
#
# A missing loader: carry .gl/*.deb (libvulkan1 …, see the device notes) and they are unpacked; the
# NVIDIA driver's ICD file is used from /usr/local/nvidia when the loader finds none. --quick skips
# the 8B twin and the depth test. Every stage prints its time.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bundle="$here/.gpu/tokenscope-gpu.tar.xz"
t0=$(date +%s)
stage() { echo "== $1 ($(($(date +%s) - t0)) s)"; }
status=0 # 1 once a check failed: reported at the end, after the benchmarks

if [[ "${1:-}" == "--pack" ]]; then
  build="${TOKENSCOPE_BUILD:-$here/build/release}"
  stage "packing $build"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/bin" "$work/lib" "$here/.gpu"
  cp "$build/app/tokenscope-cli" "$build/tests/test_vulkan_parity" "$work/bin/"
  for t in test_cuda_kernels test_cuda_backend; do [[ -x "$build/tests/$t" ]] && cp "$build/tests/$t" "$work/bin/"; done
  strip "$work"/bin/* || true
  # the CUDA module beside the CLI and the suites, where the engine looks for it
  [[ -f "$build/app/libtokenscope-cuda.so" ]] && cp "$build/app/libtokenscope-cuda.so" "$work/bin/"
  for b in "$work"/bin/*; do ldd "$b" | awk '/=>/ {print $3}'; done | sort -u |
    grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libdl|libpthread|librt|libresolv|libvulkan)\.so' |
    xargs -I{} cp -L {} "$work/lib/"
  tar -C "$work" -cJf "$bundle" bin lib
  stage "wrote $bundle ($(du -h "$bundle" | cut -f1))"
  exit 0
fi
quick=0
[[ "${1:-}" == "--quick" ]] && quick=1
pp="${GPU_CHECK_PP:-512}" # smaller values: a smoke test on a slow device (lavapipe)
tg="${GPU_CHECK_TG:-128}"

# ---- binaries ------------------------------------------------------------------------------------
if [[ -f "$bundle" ]]; then
  stage "unpacking $bundle"
  dest="$(mktemp -d)"
  trap 'rm -rf "$dest" "${twins:-}"' EXIT
  tar -C "$dest" -xJf "$bundle"
  export LD_LIBRARY_PATH="$dest/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  cli="$dest/bin/tokenscope-cli"
  parity="$dest/bin/test_vulkan_parity"
  cuda_kernels="$dest/bin/test_cuda_kernels"
  cuda_parity="$dest/bin/test_cuda_backend"
  export TOKENSCOPE_CUDA_MODULE="$dest/bin/libtokenscope-cuda.so"
else
  cli="${TOKENSCOPE_CLI:-$here/build/release/app/tokenscope-cli}"
  parity="${TOKENSCOPE_PARITY:-$here/build/release/tests/test_vulkan_parity}"
  cuda_kernels="$here/build/release/tests/test_cuda_kernels"
  cuda_parity="$here/build/release/tests/test_cuda_backend"
fi
[[ -x "$cli" ]] || { echo "no tokenscope-cli: run bench/gpu_check.sh --pack where it was built and carry .gpu" >&2; exit 1; }

# ---- Vulkan loader and driver ----------------------------------------------------------------------
if ! ldconfig -p | grep 'libvulkan\.so\.1' >/dev/null; then
  if compgen -G "$here/.gl/*.deb" >/dev/null; then
    stage "unpacking the carried Vulkan loader"
    for f in "$here"/.gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
  else
    echo "no Vulkan loader (libvulkan.so.1) and no carried .gl/*.deb" >&2
  fi
fi
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [[ -z "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" && -f "$nvidia_icd" ]]; then
  export VK_DRIVER_FILES="$nvidia_icd"
fi
stage "devices"
"$cli" devices
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

# ---- parity on the GPU: the random-weight models of every architecture ----------------------------
# run_suite NAME COMMAND...: runs a Qt Test suite, prints its results, marks the check failed on a FAIL.
run_suite() {
  local name="$1" log; shift
  stage "$name"
  log="$(mktemp)"
  "$@" >"$log" 2>&1 || status=1
  grep -E "^(PASS|FAIL|QINFO|SKIP|Totals)|Loc:" "$log" || true
  grep -q '^FAIL' "$log" && status=1
  rm -f "$log"
}
cuda=0
"$cli" devices --json | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["cuda"] else 1)' && cuda=1
if [[ $cuda == 1 ]]; then
  [[ -x "$cuda_kernels" ]] && run_suite "test_cuda_kernels (each kernel on the device: the emulator's bits)" "$cuda_kernels"
  [[ -x "$cuda_parity" ]] && run_suite "test_cuda_backend (random-weight models on the device; replay)" "$cuda_parity"
else
  stage "no CUDA device: the CUDA suites and benchmarks are skipped"
fi
if [[ -x "$parity" ]]; then
  stage "test_vulkan_parity (random-weight models, f32 and exact; decode replay)"
  parity_log="$(mktemp)"
  "$parity" testModels decodeReplay >"$parity_log" 2>&1 || status=1
  grep -E "^(PASS|FAIL|QINFO|SKIP|Totals)|Loc:" "$parity_log" || true
  grep -q '^FAIL' "$parity_log" && status=1
  rm -f "$parity_log"
fi

# ---- twins and benchmarks -------------------------------------------------------------------------
twins="$(mktemp -d)"
trap 'rm -rf "${dest:-}" "$twins"' EXIT
presets=(gemma3-270m qwen2.5-0.5b)
[[ $quick == 0 ]] && presets+=(llama-3.1-8b)
gpu="$(command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | head -1 || echo unknown)"
rows="$twins/rows.tsv"
: >"$rows"
for p in "${presets[@]}"; do
  stage "make-test-model --preset $p"
  "$cli" make-test-model --preset "$p" --out "$twins/$p.gguf" >/dev/null
  arithmetics=()
  [[ $cuda == 1 ]] && arithmetics+=(cuda)
  arithmetics+=(f32)
  [[ "$p" != llama-3.1-8b ]] && arithmetics+=(exact)
  for a in "${arithmetics[@]}"; do
    flags=(--backend vulkan)
    [[ "$a" == exact ]] && flags+=(--vulkan-exact)
    [[ "$a" == cuda ]] && flags=(--backend cuda)
    stage "bench $p ($a): pp$pp tg$tg"
    "$cli" bench -m "$twins/$p.gguf" "${flags[@]}" -p "$pp" -n "$tg" -r 1 --json >"$twins/$p-$a.json"
    printf '%s\t%s\t%s\n' "$p" "$a" "$twins/$p-$a.json" >>"$rows"
    if [[ $quick == 0 && "$a" != exact ]]; then
      stage "bench $p ($a): tg$tg at depth 4096"
      "$cli" bench -m "$twins/$p.gguf" "${flags[@]}" -p 0 -n "$tg" -d 4096 -r 1 --json >"$twins/$p-$a-d4096.json"
      printf '%s\t%s@d4096\t%s\n' "$p" "$a" "$twins/$p-$a-d4096.json" >>"$rows"
    fi
  done
  rm -f "$twins/$p.gguf"
done

stage "table"
python3 - "$rows" "$gpu" "${GPU_BANDWIDTH_GBS:-}" <<'PY'
import json, sys
rows_file, gpu, given = sys.argv[1], sys.argv[2], sys.argv[3]
known = {"H200": 4800, "H100 80GB HBM3": 3350, "H100 PCIe": 2000, "A100-SXM4-80GB": 2039, "A100-SXM4-40GB": 1555,
         "L40S": 864, "L40": 864, "L4": 300, "RTX 4090": 1008, "RTX 3090": 936}
# the longest known name the GPU's name contains ("L40S" before "L40" before "L4")
match = max((k for k in known if k in gpu), key=len, default=None)
peak = float(given) if given else (known[match] if match else 0.0)
print(f"GPU: {gpu}; peak memory bandwidth {peak:.0f} GB/s" + ("" if peak else " (unknown: set GPU_BANDWIDTH_GBS)"))
print(f"{'twin':<14} {'arith':<11} {'pp t/s':>10} {'tg t/s':>10} {'decode GB/s':>12} {'share':>7}  backend")
for line in open(rows_file):
    name, arith, path = line.rstrip("\n").split("\t")
    j = json.load(open(path))
    pp = j.get("pp", {}).get("tokens_per_second")
    tg = j.get("tg", {})
    gbs = tg.get("read_bytes_per_second", 0) / 1e9
    share = f"{100 * gbs / peak:.0f}%" if peak and gbs else "-"
    pp_s = f"{pp:.1f}" if pp else "-"
    print(f"{name:<14} {arith:<11} {pp_s:>10} {tg.get('tokens_per_second', 0):>10.1f} {gbs:>12.1f} {share:>7}  "
          f"{j['backend']}")
PY
if [[ $status != 0 ]]; then
  stage "done: the parity suite FAILED on this device (see above)"
  exit 1
fi
stage "done"
