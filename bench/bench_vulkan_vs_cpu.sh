#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Prefill (pp) and decode (tg) tokens/s of the Vulkan backend and the CPU backend on the same model,
# and their ratio. Usage: bench/bench_vulkan_vs_cpu.sh [MODEL] [-p N] [-n N] [-r R] [--device D]
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
vk_json="$("$cli" "${args[@]}" --backend vulkan --device "$device")"

python3 - "$cpu_json" "$vk_json" <<'PY'
import json, sys
cpu, vk = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"model: {cpu['model']}")
print(f"{'test':<8} {'CPU t/s':>12} {'Vulkan t/s':>12} {'Vulkan/CPU':>11}")
for test in ("pp", "tg"):
    if test in cpu and test in vk:
        c, v = cpu[test]["tokens_per_second"], vk[test]["tokens_per_second"]
        print(f"{test}{cpu[test]['n']:<6} {c:>12.2f} {v:>12.2f} {v / c:>10.2f}x")
print(f"CPU backend:    {cpu['backend']}")
print(f"Vulkan backend: {vk['backend']}")
if not vk["backend"].startswith("Vulkan"):
    print("note: the Vulkan backend was not available; both rows ran on the CPU")
PY
