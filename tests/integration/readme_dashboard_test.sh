#!/usr/bin/env bash
# docs/dashboard.md "The dashboard on your own machine": the config block there, as it stands,
# starts the daemon and serves the dashboard and the API to the token whose hash it holds. It
# is examples/config/dashboard.json, byte for byte (the README points there). Only the
# places it names (socket, state_dir, port) and the hash are replaced, so that the test runs
# beside others; a key missing from the block, or one the daemon refuses, fails it.
#
#   tests/integration/readme_dashboard_test.sh REPO BUILD_DIR
set -euo pipefail
source "$(dirname "$0")/doc_test_lib.sh"
doc_test_init readme-dashboard "$1" "$2"

block=$(doc_block "$repo/docs/dashboard.md" "integration.readme_dashboard starts the daemon" json)
[ -n "$block" ] ||
  fail "docs/dashboard.md has no config block after the integration.readme_dashboard marker"
[ "$block" = "$(cat "$repo/examples/config/dashboard.json")" ] ||
  fail "docs/dashboard.md's block and examples/config/dashboard.json differ"

token=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
hash=$(printf %s "$token" | sha256sum | cut -d' ' -f1)
config=$(sed -e "s|/tmp/sandgate|$tmp/state|g" -e 's|127.0.0.1:8080|127.0.0.1:0|' \
  -e "s|PUT-THE-SHA256-HERE|$hash|" <<<"$block")
grep -q "$hash" <<<"$config" || fail "the block has no PUT-THE-SHA256-HERE to replace"
mkdir -p "$tmp/state"
printf '%s\n' "$config" >"$tmp/dashboard.json"

start_daemon --config "$tmp/dashboard.json"
[ -n "$url" ] || fail "sandgated never said where its dashboard is"

code() { curl -sS -o "$tmp/body" -w '%{http_code}' "$@"; }
[ "$(code "$url/")" = 200 ] || fail "GET / did not serve the dashboard"
grep -qi '<html' "$tmp/body" || fail "GET / is not the dashboard's page"
[ "$(code -H "Authorization: Bearer $token" "$url/v1/runs")" = 200 ] ||
  fail "the token whose hash is in the config was refused: $(cat "$tmp/body")"
[ "$(code "$url/v1/runs")" = 401 ] || fail "a call without the token was not refused"
[ "$(code -H "Authorization: Bearer $token" "$url/v1/sessions")" = 200 ] ||
  fail "sessions: $(cat "$tmp/body")"
SANDGATE_TOKEN=$token "$build/bin/sandgate" --addr "unix:$tmp/state/sandgated.sock" runs >/dev/null ||
  fail "the CLI on the documented socket"
echo PASS
