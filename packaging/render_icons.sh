#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Re-renders the committed hicolor PNG icons from the SVG source (needs rsvg-convert, Debian: librsvg2-bin).
# Run after editing resources/icons/org.tokenscope.Tokenscope.svg and commit the PNGs it writes.
set -euo pipefail
ICONS="$(cd "$(dirname "${BASH_SOURCE[0]}")/../resources/icons" && pwd)"
SVG="$ICONS/org.tokenscope.Tokenscope.svg"
for size in 16 32 48 64 128 256 512; do
  out="$ICONS/hicolor/${size}x${size}/apps/org.tokenscope.Tokenscope.png"
  mkdir -p "$(dirname "$out")"
  rsvg-convert --width "$size" --height "$size" --format png "$SVG" --output "$out"
  echo "$out"
done
