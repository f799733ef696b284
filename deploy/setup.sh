#!/usr/bin/env bash
# Installs what sandgate needs from Debian's archive (only what is missing; `apt-get update`
# only when something must be installed), then configures and builds.
#
#   deploy/setup.sh [BUILD_DIR]     (default: build/ in the repo)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$repo/build}

packages=(
  build-essential cmake pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libcurl4-openssl-dev libssl-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libsqlite3-dev libseccomp-dev libexpat1-dev
  libpq-dev postgresql
  libmicrohttpd-dev libgnutls28-dev curl
  bubblewrap python3 python3-grpcio python3-protobuf python3-pytest procps
  clang clang-format lld
  groff-base man-db zsh
  libjs-marked node-dompurify chromium
)
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

# Node.js runs the check of the fake OpenAI server with the official client (tests only);
# machines of this kind ship it, a bare Debian gets the archive's.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
fi

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
# With clang (the style checks' compiler), the REST fuzz target too, and its short run in ctest
# (tests/fuzz/CMakeLists.txt).
fuzz=()
command -v clang++ >/dev/null 2>&1 && fuzz=(-DSANDGATE_FUZZ=ON)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$repo" -B "$build" "${generator[@]}" "${fuzz[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    >/dev/null
fi
cmake --build "$build" --parallel "$(nproc)"
echo "setup: built in $build"
