#!/usr/bin/env bash
# From a fresh clone to a verified financial analysis:
# installs and builds, starts sandgated in the background with embedded defaults (state in
# .sandgate-quickstart/), analyses the sample statements, and shows where the results are.
#
#   deploy/quickstart.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${SANDGATE_BUILD_DIR:-$repo/build}
state=$repo/.sandgate-quickstart
out=$repo/quickstart-results

"$repo/deploy/setup.sh" "$build"

mkdir -p "$state"
chmod 0700 "$state"
socket=$state/sandgated.sock
export SANDGATE_ADDR=unix:$socket

if [ -f "$state/sandgated.pid" ] && kill -0 "$(cat "$state/sandgated.pid")" 2>/dev/null; then
  echo "quickstart: sandgated already running (pid $(cat "$state/sandgated.pid"))"
else
  "$build/bin/sandgated" --listen "unix:$socket" --state-dir "$state" \
    >"$state/sandgated.out" 2>"$state/sandgated.log" &
  echo $! >"$state/sandgated.pid"
  for _ in $(seq 1 100); do
    [ -S "$socket" ] && break
    if ! kill -0 "$(cat "$state/sandgated.pid")" 2>/dev/null; then
      echo "quickstart: sandgated failed to start; its log:" >&2
      cat "$state/sandgated.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "quickstart: sandgated running (pid $(cat "$state/sandgated.pid")), socket $socket"
fi

echo
"$build/bin/sandgate" run "$repo/examples/northstar_cloud_financial_statements.csv" --out "$out"

cat <<TXT

Results:   $out/  (the six artifacts and events.jsonl)
Daemon:    pid $(cat "$state/sandgated.pid"), log $state/sandgated.log, state $state/
Use it:    export SANDGATE_ADDR=$SANDGATE_ADDR; $build/bin/sandgate runs
Stop it:   kill $(cat "$state/sandgated.pid")    (drains: cancels runs, cleans up, exits)
TXT
