#!/usr/bin/env bash
# Installs what sandgate needs from Debian's archive (only what is missing; `apt-get update`
# only when something must be installed), then configures and builds.
#
#   deploy/setup.sh [--tests] [BUILD_DIR]     (default: build/ in the repo)
#
# Without --tests (deploy/quickstart.sh): what the daemon, the CLI and the Python client need
# to build and run, and only those targets. With --tests (deploy/test.sh): also what the tests
# need (GoogleTest, PostgreSQL, clang, Chromium, Node.js, …), and every target.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
tests=0
if [ "${1:-}" = "--tests" ]; then
  tests=1
  shift
fi
build=${1:-$repo/build}

# To build and run: the compiler and CMake, the libraries, bubblewrap for local sandboxes,
# runsc for gVisor sandboxes (isolation gvisor), mmdebstrap to build sandbox images
# (docs/images.md), python3 for the playbooks' programs inside them, marked and DOMPurify for
# the dashboard.
packages=(
  build-essential cmake pkg-config ninja-build lld
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libcurl4-openssl-dev libssl-dev nlohmann-json3-dev
  libsqlite3-dev libseccomp-dev libexpat1-dev libpq-dev
  libmicrohttpd-dev libgnutls28-dev libwebsocketpp-dev
  bubblewrap runsc mmdebstrap python3 procps
  libjs-marked node-dompurify
)
# Only to test: GoogleTest, a PostgreSQL server the replica tests start, the Python client's
# runtime and pytest, clang (thread-safety analysis, the fuzz target), the style checks, the
# man page and completion checks, Chromium for the dashboard's browser tests; CPack's
# dependency list (dpkg-dev) and systemd-analyze for the
# package's install test (tests/package/); libfaketime for the fault harness's clock steps
# (tests/faults/); tmux for `session shell` in a real terminal.
test_packages=(
  libgtest-dev libgmock-dev postgresql curl faketime
  python3-grpcio python3-protobuf python3-pytest
  clang clang-format groff-base man-db zsh chromium tmux
  dpkg-dev systemd
)
[ "$tests" -eq 1 ] && packages+=("${test_packages[@]}")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: must run as root to install packages (or install them first)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Node.js runs the TypeScript client's and the MCP server's tests and the check of the fake
# OpenAI server with the official client (tests only); machines of this kind ship it, a bare
# Debian gets the archive's.
if [ "$tests" -eq 1 ] && { ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; }; then
  if [ "$(id -u)" -eq 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
fi

# A build directory keeps its choice of tests until --tests turns them on; the quickstart
# never turns them off in a directory deploy/test.sh configured. It keeps its build type too:
# a new one for the tests has debug information (RelWithDebInfo), one for the quickstart not
# (-O2 alone compiles in about three quarters of the time; BENCHMARKS.md, "The quickstart").
configure=()
if [ ! -f "$build/CMakeCache.txt" ]; then
  if [ "$tests" -eq 1 ]; then
    configure+=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
  else
    configure+=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG"
      "-DCMAKE_C_FLAGS_RELEASE=-O2 -DNDEBUG")
  fi
fi
if [ "$tests" -eq 1 ]; then
  # With clang (a test package), the REST fuzz target too, and its short run in ctest
  # (tests/fuzz/CMakeLists.txt).
  configure+=(-DSANDGATE_TESTS=ON -DSANDGATE_FUZZ=ON)
elif [ ! -f "$build/CMakeCache.txt" ]; then
  configure+=(-DSANDGATE_TESTS=OFF)
fi
generator=()
[ -f "$build/CMakeCache.txt" ] || generator=(-G Ninja)
cmake -S "$repo" -B "$build" "${generator[@]}" "${configure[@]}" >/dev/null
cmake --build "$build" --parallel "$(nproc)"
echo "setup: built in $build"
