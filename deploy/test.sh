#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test (ctest). Exit status is ctest's.
#
#   deploy/test.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${SANDGATE_BUILD_DIR:-$repo/build}
"$repo/deploy/setup.sh" "$build"
cd "$build"
# Every test, the style checks included (label `style`: deploy/format.sh --check, and clang's
# thread-safety analysis over daemon/ and client/, tests/style/thread_safety.py). Integration
# tests run the daemon and sandboxes; they are serialised, the rest in parallel.
ctest --output-on-failure --parallel "$(nproc)" --timeout 300
