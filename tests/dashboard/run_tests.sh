#!/bin/sh
# The dashboard in Debian's headless Chromium (puppeteer-core, pinned by package-lock.json,
# npm ci the first time) against the real daemon; screenshots go to ARTIFACTS_DIR:
#   tests/dashboard/run_tests.sh path/to/sandgated ARTIFACTS_DIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
for tool in node npm chromium; do
  command -v "$tool" >/dev/null 2>&1 || { echo "tests/dashboard: $tool is needed (deploy/setup.sh installs it)" >&2; exit 2; }
done
export SANDGATED="$(realpath "$1")"
mkdir -p "$2"
export SANDGATE_ARTIFACTS_DIR="$(realpath "$2")"
cd "$here"
if [ ! -d node_modules/puppeteer-core ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund >&2 || { echo "tests/dashboard: npm ci failed" >&2; exit 2; }
fi
# The terminal's xterm.js embedded in the daemon is the package its package-lock.json pins.
"$here/../../daemon/server/dashboard/vendor/update.sh" --check
exec node --test --test-concurrency=1 "$here"/*.test.mjs
