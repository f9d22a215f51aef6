#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# ptxas's resource report for every CUDA kernel (ctest test_cuda_resources): each kernel of
# TOKENSCOPE_CUDA_KERNELS must be in the module, for every real architecture the build targets, with
# no stack frame (no local-memory arrays) and no register spills. Prints the table it checked.
# Usage: test_cuda_resources.sh NVCC SOURCE_ROOT "ARCHS" FLAGS...
set -euo pipefail
nvcc="$1" root="$2" archs="$3"
shift 3
kernels=$(sed -n 's/^ *X(\([A-Za-z0-9_]*\)).*/\1/p' "$root/engine/backend/cuda/kernels/kernels.h")
[ -n "$kernels" ] || { echo "no kernel list found in kernels.h" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for arch in $(echo "$archs" | tr ';' ' '); do
  case "$arch" in *-virtual) continue ;; esac # PTX only: ptxas runs when the driver loads it
  arch=${arch%-real}
  "$nvcc" -std=c++20 -O3 -I"$root/engine" "$@" --resource-usage -gencode "arch=compute_$arch,code=sm_$arch" \
    -c "$root/engine/backend/cuda/module/cuda_device.cu" -o "$tmp/module.o" > "$tmp/report" 2>&1 || {
    cat "$tmp/report"; exit 1; }
  printf 'sm_%s  %-12s %9s %6s %6s %6s\n' "$arch" kernel registers stack spill_st spill_ld
  for k in $kernels; do
    # the report's lines for run_kernel<K>: "Function properties for …K…", then stack/spills, then registers
    line=$(grep -A2 "Function properties for .*run_kernel.*[0-9]${k}E" "$tmp/report" | tr '\n' ' ' || true)
    if [ -z "$line" ]; then
      echo "sm_$arch: kernel $k is missing from the module's resource report" >&2
      status=1
      continue
    fi
    stack=$(sed -E 's/.* ([0-9]+) bytes stack frame.*/\1/' <<<"$line")
    st=$(sed -E 's/.* ([0-9]+) bytes spill stores.*/\1/' <<<"$line")
    ld=$(sed -E 's/.* ([0-9]+) bytes spill loads.*/\1/' <<<"$line")
    regs=$(sed -E 's/.*Used ([0-9]+) registers.*/\1/' <<<"$line")
    printf 'sm_%s  %-12s %9s %6s %6s %6s\n' "$arch" "$k" "$regs" "$stack" "$st" "$ld"
    if [ "$stack" != 0 ] || [ "$st" != 0 ] || [ "$ld" != 0 ]; then
      echo "sm_$arch: kernel $k uses local memory (stack $stack bytes, spills $st/$ld bytes)" >&2
      status=1
    fi
  done
done
exit $status
