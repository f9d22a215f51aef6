#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Redraw time of the attention head view for a 2,048 x 2,048 matrix (fitted, zoomed, zoomed with
# labels), offscreen. Usage: bench/attention_view.sh [BUILD_DIR]
set -euo pipefail
BUILD="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/release}"
QT_QPA_PLATFORM=offscreen "$BUILD/ui/tokenscope" --bench-attention-view
