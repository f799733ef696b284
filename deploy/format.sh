#!/usr/bin/env bash
# Formats every C++ source of daemon/, client/ and tests/ in place with the checked-in
# .clang-format (Google, 100 columns). Generated code lives in the build directory and is never
# listed; build directories and node_modules are skipped wherever they are.
#
#   deploy/format.sh            rewrite the files
#   deploy/format.sh --check    change nothing; list the files that are not formatted and exit 1
#                               if there are any (ctest style.clang_format)
#
# CLANG_FORMAT names the binary (default: clang-format).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
clang_format=${CLANG_FORMAT:-clang-format}
check=0
case "${1:-}" in
  "") ;;
  --check) check=1 ;;
  *) echo "usage: deploy/format.sh [--check]" >&2; exit 2 ;;
esac
if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "format: $clang_format not found (Debian package clang-format; deploy/setup.sh installs it)" >&2
  exit 2
fi

cd "$repo"
# A build directory is any directory holding a CMakeCache.txt, whatever its name.
mapfile -d '' files < <(
  find daemon client tests \
    -type d \( -name node_modules -o -name .git -o -exec test -e '{}/CMakeCache.txt' \; \) -prune \
    -o -type f \( -name '*.cc' -o -name '*.h' -o -name '*.cpp' -o -name '*.hpp' \) \
    ! -name '*.pb.cc' ! -name '*.pb.h' -print0 | sort -z)
if [ ${#files[@]} -eq 0 ]; then
  echo "format: no C++ sources found under $repo/{daemon,client,tests}" >&2
  exit 2
fi

if [ "$check" -eq 0 ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 50 -P "$(nproc)" "$clang_format" -i --style=file
  echo "format: formatted ${#files[@]} files"
  exit 0
fi

# One clang-format per file (in parallel): a file with a violation prints "UNFORMATTED <file>";
# any other failure (unreadable file, bad .clang-format) prints clang-format's own message.
check_one() {
  local out
  if ! out=$("$clang_format" --style=file --dry-run --Werror "$1" 2>&1 >/dev/null); then
    if grep -q 'code should be clang-formatted' <<<"$out"; then
      echo "UNFORMATTED $1"
    else
      echo "FAILED $1: $out"
    fi
  fi
}
export -f check_one
export clang_format
report=$(printf '%s\0' "${files[@]}" | xargs -0 -n 1 -P "$(nproc)" bash -c 'check_one "$1"' _ |
  sort)
if grep -q '^FAILED ' <<<"$report"; then
  echo "format: $clang_format failed:" >&2
  grep '^FAILED ' <<<"$report" | sed 's/^FAILED /  /' >&2
  exit 2
fi
mapfile -t bad < <(sed -n 's/^UNFORMATTED //p' <<<"$report")
if [ ${#bad[@]} -gt 0 ]; then
  echo "format: ${#bad[@]} of ${#files[@]} files are not formatted (run deploy/format.sh):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "format: all ${#files[@]} files are formatted"
