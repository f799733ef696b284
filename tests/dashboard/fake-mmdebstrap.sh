#!/bin/sh
# Stands in for mmdebstrap in the dashboard's tests (the daemon's local.mmdebstrap), so that
# they build no real image: called as the daemon calls it,
#   fake-mmdebstrap.sh --mode=root --variant=V --include=P1,P2 SUITE DIR
# it prints progress lines (a slow build's carry markup, which the page must show as text) and makes
# DIR a root with an empty /usr, enough for a session to start on it (sandgate's init is
# bound in; no command of the image's runs). A package list with `slow-build` in it prints a
# line every 0.2 s until it is cancelled (SIGTERM); one with `missing-pkg` fails as
# mmdebstrap does for a package the archive lacks.
set -eu
include=""
for arg; do
  case "$arg" in --include=*) include=${arg#--include=} ;; esac
  dir=$arg
done
echo "I: fake mmdebstrap: $include"
case ",$include," in
*,missing-pkg,*)
  echo "E: Unable to locate package missing-pkg"
  exit 1
  ;;
*,slow-build,*)
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
echo "$include" >"$dir/etc/fake-image-packages"
echo "I: success"
