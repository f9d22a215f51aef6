#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Runs a command inside a private D-Bus session with a GNOME keyring daemon (the Secret Service)
# unlocked with a throwaway password; the keyring's files live in a temporary home that is removed
# afterwards, so the user's own keyring is never touched.
set -euo pipefail
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tokenscope-keyring.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export HOME="$tmp" XDG_DATA_HOME="$tmp/data" XDG_CONFIG_HOME="$tmp/config" XDG_CACHE_HOME="$tmp/cache"
export XDG_RUNTIME_DIR="$tmp/run"
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
# dbus-daemon warns that it may not raise its file limit when not privileged: not a failure.
dbus-run-session -- bash -c '
  printf "throwaway" | gnome-keyring-daemon --daemonize --unlock --components=secrets >/dev/null
  "$@"' with_keyring "$@" 2> >(grep -v "Failed to set fd limit" >&2)
