#!/usr/bin/env bash
# README "A first session": the shell block there, as it stands (only `build/bin/` and
# `examples/` made absolute), against a daemon on a temporary socket: it must create a
# session, upload, exec, download the sorted file and close the session.
#
#   tests/integration/readme_first_session_test.sh REPO BUILD_DIR
set -euo pipefail
source "$(dirname "$0")/doc_test_lib.sh"
doc_test_init readme-session "$1" "$2"

block=$(doc_block "$repo/README.md" "integration.readme_first_session runs these commands" sh)
[ -n "$block" ] || fail "README.md has no shell block after the integration.readme_first_session marker"
grep -q "session create" <<<"$block" || fail "the block creates no session"
printf '%s\n' "$block" | sed -e "s|build/bin/|$build/bin/|g" -e "s| examples/| $repo/examples/|g" \
  >"$tmp/first_session.sh"

mkdir -p "$tmp/state" "$tmp/cwd"
start_daemon --listen "unix:$tmp/state/sock" --state-dir "$tmp/state"

(cd "$tmp/cwd" && SANDGATE_ADDR="unix:$tmp/state/sock" bash -euo pipefail "$tmp/first_session.sh") \
  >"$tmp/session.out" 2>&1 || { cat "$tmp/session.out" >&2; fail "the README's commands failed"; }
cmp -s "$tmp/cwd/sorted.csv" <(sort "$repo/examples/northstar_cloud_financial_statements.csv") ||
  fail "sorted.csv is not the sorted sample"
grep -q "^7 in/q.csv" "$tmp/session.out" || fail "wc -l did not show 7 lines: $(cat "$tmp/session.out")"
SANDGATE_ADDR="unix:$tmp/state/sock" "$build/bin/sandgate" session list --all >"$tmp/list"
grep -q CLOSED "$tmp/list" || fail "the session was not closed: $(cat "$tmp/list")"
echo PASS
