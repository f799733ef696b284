#!/bin/sh
# The dashboard's libraries from npm (package-lock.json pins them, with their integrity
# hashes), copied into this directory; the daemon embeds these copies, so building it needs
# neither npm nor the network.
#   update.sh          fetch the locked packages (npm ci) and copy their files here
#   update.sh --check  fail unless the copies here are those files, byte for byte
#                      (tests/dashboard/run_tests.sh runs it)
# To move to another version: change package.json, `npm install --package-lock-only`, then
# update.sh, and look at the licenses below.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
check=0
[ "${1:-}" = --check ] && check=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/package.json" "$here/package-lock.json" "$work/"
(cd "$work" && npm ci --ignore-scripts --no-audit --no-fund >/dev/null) ||
  { echo "vendor/update.sh: npm ci failed" >&2; exit 2; }
m="$work/node_modules/@xterm"
# <file in the package> <copy here>
set -- \
  "$m/xterm/lib/xterm.js" xterm.js \
  "$m/xterm/css/xterm.css" xterm.css \
  "$m/xterm/LICENSE" LICENSE.xterm \
  "$m/addon-fit/lib/addon-fit.js" addon-fit.js \
  "$m/addon-fit/LICENSE" LICENSE.addon-fit
status=0
while [ $# -gt 0 ]; do
  if [ "$check" -eq 1 ]; then
    cmp -s "$1" "$here/$2" || { echo "vendor/update.sh: $2 is not the locked package's file" >&2; status=1; }
  else
    cp "$1" "$here/$2"
  fi
  shift 2
done
exit "$status"
