#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Builds the Debian package from a configured and built tree, validates the desktop entry and the
# AppStream metainfo, unpacks the .deb into a scratch root and runs the binaries from there.
#   packaging/test_package.sh BUILD_DIR        (e.g. build/release)
# Prints one line per check and a closing "package: N checks passed, M failed"; exits non-zero on
# any failure. Needs cpack, dpkg-deb, dpkg-shlibdeps (dpkg-dev), desktop-file-validate
# (desktop-file-utils), appstreamcli (appstream) and the default model (scripts/setup.sh installs it).
set -uo pipefail

if [ $# -ne 1 ] || [ ! -f "$1/CPackConfig.cmake" ]; then
  echo "usage: $0 BUILD_DIR   (a configured GUI build tree: BUILD_DIR/CPackConfig.cmake must exist)" >&2
  exit 2
fi
BUILD="$(cd "$1" && pwd)"
APP_ID="org.tokenscope.Tokenscope"
MODEL="${TOKENSCOPE_MODEL:-${XDG_DATA_HOME:-$HOME/.local/share}/tokenscope/models/gemma-3-270m-Q4_K_M.gguf}"
VERSION=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$BUILD/CPackConfig.cmake")
ARCH=$(dpkg --print-architecture)
DEB="$BUILD/package/tokenscope_${VERSION}_${ARCH}.deb"

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/tokenscope-package.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
ROOT="$SCRATCH/root"
LOG="$SCRATCH/check.log"

passed=0
failed=0
# check [-v] NAME COMMAND...: runs COMMAND and counts it; prints its output when it fails, or always
# with -v (the validators: their warnings and hints are worth seeing even when they pass).
check() {
  local verbose=0; if [ "$1" = -v ]; then verbose=1; shift; fi
  local name="$1"; shift
  if "$@" >"$LOG" 2>&1; then
    passed=$((passed + 1)); echo "  ok    $name"
  else
    failed=$((failed + 1)); echo "  FAIL  $name"; verbose=1
  fi
  if [ "$verbose" = 1 ]; then sed '/^$/d; s/^/        | /' "$LOG"; fi
  return 0
}
finish() {
  echo "package: $passed checks passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
}

# ---- build the package ---------------------------------------------------------------------------
rm -f "$DEB"
check "cpack -G DEB builds $(basename "$DEB")" bash -c 'cd "$1" && cpack -G DEB && test -f "$2"' _ "$BUILD" "$DEB"
if [ ! -f "$DEB" ]; then finish; fi
echo "        $(du -h "$DEB" | cut -f1)  $DEB"

# ---- control fields ------------------------------------------------------------------------------
DEPENDS=$(dpkg-deb -f "$DEB" Depends)
echo "        Depends: $DEPENDS"
has_dep() { grep -Eq "(^|, )$1( |,|$)" <<<"$DEPENDS"; }
for p in libqt6sql6-sqlite libqt6svg6 qt6-qpa-plugins; do
  check "Depends lists the Qt plugin package $p" has_dep "$p"
done
# dpkg-shlibdeps ran: the libraries the binaries link come with versions.
for p in libc6 libqt6core6 libqt6widgets6; do
  check "Depends lists the shared library package $p (dpkg-shlibdeps)" has_dep "$p"
done
check "control: Package tokenscope, Version $VERSION, Section science" \
  test "$(dpkg-deb -f "$DEB" Package Version Section | tr '\n' ' ')" = "Package: tokenscope Version: $VERSION Section: science "
check "control: Maintainer and Homepage" \
  test "$(dpkg-deb -f "$DEB" Maintainer Homepage | tr '\n' ' ')" \
    = "Maintainer: Tokenscope developers <dev@tokenscope.org> Homepage: https://tokenscope.org "

# ---- unpack into a scratch root and look at the files --------------------------------------------
check "dpkg-deb -x into a scratch root" dpkg-deb -x "$DEB" "$ROOT"
SHARE="$ROOT/usr/share"
for f in usr/bin/tokenscope usr/bin/tokenscope-cli; do
  check "/$f is an executable" test -x "$ROOT/$f"
done
for f in "applications/$APP_ID.desktop" "metainfo/$APP_ID.metainfo.xml" "mime/packages/$APP_ID.xml" \
         "icons/hicolor/scalable/apps/$APP_ID.svg" doc/tokenscope/copyright; do
  check "/usr/share/$f" test -s "$SHARE/$f"
done
# PNG signature, then the IHDR chunk: width and height as big-endian 32-bit integers at bytes 16..23.
png_size_is() {
  [ "$(od -An -tx1 -N8 "$1" | tr -d ' \n')" = 89504e470d0a1a0a ] || return 1
  [ "$(od -An -tu1 -j16 -N8 "$1" | awk '{ print $1*16777216 + $2*65536 + $3*256 + $4 "x" $5*16777216 + $6*65536 + $7*256 + $8 }')" = "$2x$2" ]
}
for s in 16 32 48 64 128 256 512; do
  check "/usr/share/icons/hicolor/${s}x${s}/apps/$APP_ID.png is a ${s}x${s} PNG" \
    png_size_is "$SHARE/icons/hicolor/${s}x${s}/apps/$APP_ID.png" "$s"
done
no_runpath() { ! readelf -d "$1" | grep -Eq 'RPATH|RUNPATH'; }
for f in tokenscope tokenscope-cli; do
  check "/usr/bin/$f has no RPATH/RUNPATH (nothing from the build tree)" no_runpath "$ROOT/usr/bin/$f"
done

# ---- validators ----------------------------------------------------------------------------------
check -v "desktop-file-validate $APP_ID.desktop" desktop-file-validate "$SHARE/applications/$APP_ID.desktop"
check -v "appstreamcli validate --no-net $APP_ID.metainfo.xml" \
  appstreamcli validate --no-net "$SHARE/metainfo/$APP_ID.metainfo.xml"
# The metainfo, desktop entry and icon agree with each other as installed.
check -v "appstreamcli validate-tree --no-net (scratch root)" appstreamcli validate-tree --no-net "$ROOT"
if command -v update-mime-database >/dev/null; then
  gguf_glob_registered() {
    update-mime-database "$SHARE/mime" && grep -q 'application/x-gguf:\*\.gguf' "$SHARE/mime/globs2"
  }
  check "update-mime-database: *.gguf is application/x-gguf" gguf_glob_registered
fi

# ---- run the installed binaries (from /, without the build tree's environment) -------------------
# run_installed PATTERN BINARY ARGS...: runs BINARY from the scratch root, its output must match PATTERN.
run_installed() {
  local pattern="$1" bin="$2" out; shift 2
  out=$(cd / && env -u LD_LIBRARY_PATH "$ROOT/usr/bin/$bin" "$@") || { printf '%s\n' "$out"; return 1; }
  printf '%s\n' "$out"
  grep -Eq "$pattern" <<<"$out"
}
check "tokenscope --version prints $VERSION" run_installed "^tokenscope $VERSION\$" tokenscope --version
check "tokenscope-cli info $(basename "$MODEL")" run_installed '^architecture +gemma3$' tokenscope-cli info "$MODEL"

finish
