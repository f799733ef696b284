#!/bin/sh
# Builds the TypeScript client in clients/node (npm ci the first time: @grpc/grpc-js,
# @grpc/proto-loader, typescript, pinned by its package-lock.json) and runs these tests
# (node's test runner) against the real daemon:
#   tests/clients/node/run_tests.sh path/to/sandgated
set -eu
here=$(cd "$(dirname "$0")" && pwd)
package="$here/../../../clients/node"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "clients/node: node and npm are needed (deploy/setup.sh installs them)" >&2
  exit 2
fi
export SANDGATED="$1"
cd "$package"
if [ ! -d node_modules/@grpc/grpc-js ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund >&2 || { echo "clients/node: npm ci failed" >&2; exit 2; }
fi
npm run --silent build
exec node --test --test-concurrency=1 "$here"/*.test.mjs
