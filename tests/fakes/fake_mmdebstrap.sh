#!/bin/sh
# A stand-in for mmdebstrap (the daemon's local.mmdebstrap) for tests that need built images
# but not their software (the clients' and the dashboard's image tests,
# integration.RestImagesTest): no network, no root, a second per build. Called as
# MmdebstrapBuilder calls mmdebstrap
# (--mode=root --variant=V --include=P1,P2 SUITE DIR), it prints progress as mmdebstrap does
# and makes DIR with a marker file. What it is asked to include steers it:
#   missing  apt's "Unable to locate package missing", exit 1 (the daemon names the package)
#   slow     two progress lines (the second carries markup a page must show as text), then
#            it waits until the build is cancelled (SIGTERM to its group)
set -eu
include=""
for arg in "$@"; do
  case "$arg" in --include=*) include="${arg#--include=}" ;; esac
  dir="$arg"
done
echo "I: fake mmdebstrap: including ${include}"
case ",$include," in
  *,missing,*)
    echo "E: Unable to locate package missing" >&2
    exit 1
    ;;
  *,slow,*)
    echo "I: waiting to be cancelled"
    echo "I: slow step 1 <img src=x onerror=window.__pwned=20>"
    exec sleep 600
    ;;
esac
mkdir -p "$dir/usr/bin" "$dir/etc"
echo 'PRETTY_NAME="fake"' > "$dir/etc/os-release"
echo "$include" > "$dir/usr/packages"
echo "I: success"
