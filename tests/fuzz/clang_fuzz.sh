#!/bin/sh
# The fuzz target's compiler and linker launcher (tests/fuzz/CMakeLists.txt): runs clang++ in
# place of the compiler CMake chose (its first argument after the mode), with libFuzzer's
# coverage and the sanitizers. Mixing is safe: both use libstdc++ and the same ABI.
#
#   clang_fuzz.sh compile|link <clang++> <the compiler CMake chose> <its arguments>...
set -eu
mode=$1
clangxx=$2
shift 3
sanitizers="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
case "$mode" in
  # -Wno-error: warnings are the normal build's to police; clang's set differs from gcc's.
  compile) exec "$clangxx" "$@" $sanitizers -fsanitize=fuzzer-no-link -fno-omit-frame-pointer \
             -Wno-error ;;
  link) exec "$clangxx" "$@" $sanitizers -fsanitize=fuzzer ;;
  *) echo "clang_fuzz.sh: mode compile or link, not '$mode'" >&2; exit 2 ;;
esac
