#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# What the interpretability lab costs on this machine: a patching grid of each kind (residual,
# attention, MLP: layers × positions; heads: layers × heads) and one logit attribution, on the
# default model (or MODEL) with the Eiffel Tower / Colosseum pair, through tokenscope-cli; then an
# ablation scan of every head and the head-classification probe.
# Prints runs, seconds and forward passes per second for each grid.
#   bench/lab_cost.sh [MODEL] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-}"
BUILD="${2:-build/release}"
CLI="$BUILD/app/tokenscope-cli"
[ -x "$CLI" ] || { echo "build first: bash scripts/setup.sh test (or cmake --build $BUILD)" >&2; exit 2; }
CLEAN="The Eiffel Tower is in the city of"
CORRUPT="The Colosseum is in the city of"
echo "model: ${MODEL:-default}; threads: all ($(nproc)); prompts: '$CLEAN' / '$CORRUPT'"
printf "%-10s %6s %9s %10s\n" grid runs seconds "runs/s"
for over in residual attention mlp heads; do
  json=$("$CLI" patch ${MODEL:+-m "$MODEL"} --clean "$CLEAN" --corrupt "$CORRUPT" --tokens " Paris, Rome" --over "$over" --json)
  python3 -c 'import json,sys; j=json.loads(sys.argv[1]); s=j["ms"]/1000; print("%-10s %6d %9.2f %10.1f" % (sys.argv[2], j["runs"], s, j["runs"]/s))' "$json" "$over"
done
start=$(date +%s.%N)
"$CLI" attribute ${MODEL:+-m "$MODEL"} -p "$CLEAN" --json > /dev/null
end=$(date +%s.%N)
python3 -c "import sys; print('attribute: %.2f s (process start to exit, model load included)' % (float(sys.argv[2]) - float(sys.argv[1])))" "$start" "$end"
# part 2: every head ablated in turn, and the classification probe
start=$(date +%s.%N)
"$CLI" ablate ${MODEL:+-m "$MODEL"} -p "$CLEAN" --scan --json > /tmp/tokenscope-lab-scan.json
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); s=j["ms"]/1000; print("ablation scan: %d heads in %.2f s (%.1f runs/s)" % (j["runs"], s, j["runs"]/s))' /tmp/tokenscope-lab-scan.json
rm -f /tmp/tokenscope-lab-scan.json
start=$(date +%s.%N)
"$CLI" heads ${MODEL:+-m "$MODEL"} --json > /dev/null
end=$(date +%s.%N)
python3 -c "import sys; print('heads (classification probe, 49 tokens): %.2f s with the process start' % (float(sys.argv[2]) - float(sys.argv[1])))" "$start" "$end"
