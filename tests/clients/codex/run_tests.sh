#!/bin/sh
# Installs the published Codex CLI here (npm ci, pinned by package-lock.json: @openai/codex
# 0.169.0 and its native codex-linux-x64, about 400 MB, from the npm cache once it holds them)
# and runs the Codex tests against the real daemon:
#   tests/clients/codex/run_tests.sh path/to/sandgated
set -eu
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "tests/clients/codex: node and npm are needed (deploy/setup.sh installs them)" >&2
  exit 2
fi
export SANDGATED="$(realpath "$1")"
cd "$(dirname "$0")"
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --prefer-offline --no-audit --no-fund >&2 || { echo "tests/clients/codex: npm ci failed" >&2; exit 2; }
fi
exec node --test --test-concurrency=1 ./*.test.mjs
