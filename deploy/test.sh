#!/usr/bin/env bash
# Installs dependencies (the tests' too), builds everything, and runs every test (ctest).
# Exit status is ctest's.
#
#   deploy/test.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${SANDGATE_BUILD_DIR:-$repo/build}
"$repo/deploy/setup.sh" --tests "$build"
cd "$build"
# Every test, the style checks included (label `style`: deploy/format.sh --check, and clang's
# thread-safety analysis over daemon/ and client/, tests/style/thread_safety.py). Twice as many
# at once as there are cores: most tests wait (daemons, sandboxes, the fakes' delays) rather
# than compute. The CPU-bound ones count as two processors (PROCESSORS), tests that share a
# sandbox uid range hold its RESOURCE_LOCK, the load test runs alone (RUN_SERIAL); the longest
# start first (COST). See tests/integration/CMakeLists.txt and BENCHMARKS.md "CI time".
jobs=${SANDGATE_TEST_JOBS:-$((2 * $(nproc)))}
ctest --output-on-failure --parallel "$jobs" --timeout 300
