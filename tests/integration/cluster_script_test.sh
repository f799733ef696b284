#!/usr/bin/env bash
# deploy/cluster.sh end to end against the built binaries: start (PostgreSQL, certificates,
# three replicas, the sample analysed through each), then stop, which must leave no process
# and no directory of the cluster behind.
#
#   tests/integration/cluster_script_test.sh REPO BUILD_DIR
set -euo pipefail

repo=$1
build=$2
tmp=$(mktemp -d /tmp/sg-cluster-test.XXXXXX)
# Uids of its own, so it runs beside the other tests and a cluster someone is trying.
export SANDGATE_CLUSTER_DIR=$tmp/cluster SANDGATE_BUILD_DIR=$build SANDGATE_CLUSTER_UID_BASE=410000
trap '"$repo/deploy/cluster.sh" stop >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# A pid that names a live process (a zombie waiting for its reaper is gone).
running() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat")" != Z ]; }

out=$("$repo/deploy/cluster.sh" start 2>&1) || {
  echo "$out"
  fail "deploy/cluster.sh start exited $?"
}
echo "$out"
for r in a b c; do
  grep -q "RUN_STATUS_SUCCEEDED  on replica-$r\$" <<<"$out" || fail "no succeeded run on replica-$r"
done
[ "$(grep -c 'checks passed: 25, checks failed: 0' <<<"$out")" -eq 3 ] ||
  fail "three verified analyses expected"
status=$("$repo/deploy/cluster.sh" status)
[ "$(grep -c ': running' <<<"$status")" -eq 4 ] || fail "status: $status"

pg_dir=$(cat "$SANDGATE_CLUSTER_DIR/pg.dir")
pids=$(cat "$SANDGATE_CLUSTER_DIR"/replica-*/pid; head -1 "$pg_dir/data/postmaster.pid")
"$repo/deploy/cluster.sh" stop

for pid in $pids; do
  if running "$pid"; then fail "process $pid survived stop: $(tr '\0' ' ' <"/proc/$pid/cmdline")"; fi
done
# Nothing else started for the cluster either (PostgreSQL's backends, sandboxes): no process
# names its directories.
for dir in "$pg_dir" "$SANDGATE_CLUSTER_DIR"; do
  for pid in $(pgrep -f "$dir" || true); do
    if running "$pid"; then fail "process $pid still uses $dir"; fi
  done
  [ ! -e "$dir" ] || fail "$dir left behind"
done
echo "PASS"
