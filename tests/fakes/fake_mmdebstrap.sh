#!/bin/sh
# A stand-in for mmdebstrap (the daemon's local.mmdebstrap) for tests that need built images
# but not their software (the clients' and the dashboard's image tests,
# integration.RestImagesTest): no network, no root, a second per build. Called as
# MmdebstrapBuilder calls mmdebstrap
# (--mode=root --variant=V --include=P1,P2 SUITE DIR), it prints progress as mmdebstrap does
# and makes DIR with a marker file. What it is asked to include steers it:
#   missing  apt's "Unable to locate package missing", exit 1 (the daemon names the package)
#   slow     a progress line every 0.2 s until the build is cancelled (SIGTERM to its group);
#            the lines carry markup, which a page must show as text
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
    trap 'echo "I: terminated"; exit 143' TERM
    step=0
    while :; do
      step=$((step + 1))
      echo "I: slow step $step <img src=x onerror=window.__pwned=20>"
      sleep 0.2
    done
    ;;
esac
mkdir -p "$dir/usr/bin" "$dir/etc"
echo 'PRETTY_NAME="fake"' > "$dir/etc/os-release"
echo "$include" > "$dir/usr/packages"
echo "I: success"
