#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Formats every C++ file of the project with Debian 12's clang-format-14 and the checked-in
# .clang-format (other clang-format versions lay some constructs out differently).
#   scripts/format.sh          rewrite the files in place
#   scripts/format.sh --check  change nothing; list the files that differ and fail (ctest's format_check)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FORMAT="$(command -v clang-format-14 || true)"
if [ -z "$FORMAT" ]; then
  echo "error: clang-format-14 is not installed (scripts/setup.sh deps installs it)" >&2
  exit 2
fi
mapfile -t files < <(cd "$ROOT" && find app engine ui tests bench -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) | sort)
cd "$ROOT"
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    "$FORMAT" --dry-run -Werror "$f" > /dev/null 2>&1 || bad+=("$f")
  done
  if [ "${#bad[@]}" -gt 0 ]; then
    printf 'not formatted: %s\n' "${bad[@]}"
    echo "${#bad[@]} of ${#files[@]} files differ from clang-format-14's layout: run scripts/format.sh" >&2
    exit 1
  fi
  echo "all ${#files[@]} C++ files formatted"
else
  "$FORMAT" -i "${files[@]}"
  echo "formatted ${#files[@]} C++ files"
fi
