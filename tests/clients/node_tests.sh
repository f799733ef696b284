#!/bin/sh
# Builds the named packages of clients/ (npm ci the first time, pinned by each one's
# package-lock.json; then its build script) and runs their tests, tests/clients/PACKAGE/
# (node's test runner), against the real daemon:
#   tests/clients/node_tests.sh path/to/sandgated PACKAGE...
#   tests/clients/node_tests.sh build/bin/sandgated node mcp
# With --build-only first, it only builds them (the conformance suite's adapters use them).
set -eu
build_only=0
if [ "${1:-}" = "--build-only" ]; then
  build_only=1
  shift
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "tests/clients: node and npm are needed (deploy/setup.sh installs them)" >&2
  exit 2
fi
export SANDGATED="$(realpath "$1")"
shift
here="$(cd "$(dirname "$0")" && pwd)"
clients="$here/../../clients"
tests=""
for package in "$@"; do
  cd "$clients/$package"
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund >&2 || { echo "clients/$package: npm ci failed" >&2; exit 2; }
  fi
  npm run --silent build
  tests="$tests $here/$package/*.test.mjs"
done
[ "$build_only" -eq 1 ] && exit 0
# shellcheck disable=SC2086 # the globs expand here
exec node --test --test-concurrency=1 $tests
