#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Prefill (pp) and decode (tg) tokens/s of the Vulkan backend, in its f32 arithmetic (the default) and
# its exact one (--vulkan-exact), and of the CPU backend on the same model, with the ratios to the CPU.
# Usage: bench/bench_vulkan_vs_cpu.sh [MODEL] [-p N] [-n N] [-r R] [--device D]
# (MODEL defaults to the installed default model; CLI defaults to build/release/app/tokenscope-cli,
# override with TOKENSCOPE_CLI=…).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cli="${TOKENSCOPE_CLI:-$here/build/release/app/tokenscope-cli}"
model=""
pp=128
tg=32
reps=2
device=-1
while [[ $# -gt 0 ]]; do
  case "$1" in
    -p) pp="$2"; shift 2 ;;
    -n) tg="$2"; shift 2 ;;
    -r) reps="$2"; shift 2 ;;
    --device) device="$2"; shift 2 ;;
    *) model="$1"; shift ;;
  esac
done
[[ -x "$cli" ]] || { echo "tokenscope-cli not found at $cli (build it or set TOKENSCOPE_CLI)" >&2; exit 1; }
args=(bench -p "$pp" -n "$tg" -r "$reps" --json)
[[ -n "$model" ]] && args+=(-m "$model")

cpu_json="$("$cli" "${args[@]}" --backend cpu)"
f32_json="$("$cli" "${args[@]}" --backend vulkan --device "$device")"
exact_json="$("$cli" "${args[@]}" --backend vulkan --device "$device" --vulkan-exact)"

python3 - "$cpu_json" "$f32_json" "$exact_json" <<'PY'
import json, sys
cpu, f32, exact = (json.loads(a) for a in sys.argv[1:4])
print(f"model: {cpu['model']}")
print(f"{'test':<8} {'CPU t/s':>10} {'Vulkan f32':>11} {'f32/CPU':>8} {'Vulkan exact':>13} {'exact/CPU':>10}")
for test in ("pp", "tg"):
    if test in cpu and test in f32 and test in exact:
        c = cpu[test]["tokens_per_second"]
        v, e = f32[test]["tokens_per_second"], exact[test]["tokens_per_second"]
        print(f"{test}{cpu[test]['n']:<6} {c:>10.2f} {v:>11.2f} {v / c:>7.2f}x {e:>13.2f} {e / c:>9.2f}x")
print(f"CPU backend:          {cpu['backend']}")
print(f"Vulkan (f32) backend: {f32['backend']}")
print(f"Vulkan (exact):       {exact['backend']}")
if not f32["backend"].startswith("Vulkan"):
    print("note: the Vulkan backend was not available; those rows ran on the CPU")
PY
