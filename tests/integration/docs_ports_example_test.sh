#!/usr/bin/env bash
# docs/sessions.md "Exposed ports": the shell block there, command by command as it stands,
# against a daemon with http_listen and a tenant. Only what a reader has is filled in:
# `sandgate` on the PATH, $SANDGATE_ADDR, $SANDGATE_TOKEN and $SANDGATE_URL. Every command must
# exit 0; the page must come through the exposed port with the token and through the signed
# URL without one, and unexposing must end both.
#
#   tests/integration/docs_ports_example_test.sh REPO BUILD_DIR
set -euo pipefail
source "$(dirname "$0")/doc_test_lib.sh"
doc_test_init docs-ports "$1" "$2"

block=$(doc_block "$repo/docs/sessions.md" "integration.docs_ports_example runs these" sh)
[ -n "$block" ] || fail "docs/sessions.md has no sh block after the integration.docs_ports_example marker"
# One command a line, comments (the outputs shown) left out.
commands=$(sed -e 's/[[:space:]]*#.*$//' <<<"$block" | grep -v '^[[:space:]]*$')
[ "$(grep -c '^sandgate session expose' <<<"$commands")" -eq 2 ] ||
  fail "expected the block's two expose commands: $commands"

start_rest_daemon 333300 8

export PATH="$build/bin:$PATH" SANDGATE_ADDR="unix:$tmp/state/sock" SANDGATE_TOKEN=$token
export SANDGATE_URL=$url
# Each command runs in this shell (the first sets $sid), as a reader would type them.
sid=
signed=
n=0
while IFS= read -r command; do
  n=$((n + 1))
  out=$tmp/answer.$n
  case $command in
  curl*)
    # The server starts in the background: asked until it answers, as a reader would.
    for _ in $(seq 1 60); do
      eval "$command" >"$out" 2>&1 || fail "command $n exited non-zero: $command
$(cat "$out")"
      grep -q "Directory listing for /" "$out" && break
      sleep 0.5
    done
    grep -q "Directory listing for /" "$out" || fail "the page did not come through: $(cat "$out")"
    continue
    ;;
  "sandgate session unexpose"*)
    # Before it: the signed URL the block printed opens the page with no token.
    # Not piped into grep -q: its early exit would fail curl (SIGPIPE) under pipefail.
    page=$(curl -s "$signed")
    grep -q "Directory listing for /" <<<"$page" || fail "the signed URL $signed does not open the page"
    ;;
  esac
  eval "$command" >"$out" 2>&1 || fail "command $n exited non-zero: $command
$(cat "$out")"
  case $command in
  *"expose \$sid 8000 --signed"*)
    signed=$(grep -o "$url/v1/sessions/$sid/ports/8000:signed/[^ ]*" "$out" | head -1)
    [ -n "$signed" ] || fail "expose --signed printed no signed URL: $(cat "$out")"
    grep -q "^expires " "$out" || fail "expose --signed did not say when it expires: $(cat "$out")"
    ;;
  "sandgate session expose \$sid 8000")
    grep -qx "$url/v1/sessions/$sid/ports/8000/" "$out" || fail "expose printed no URL: $(cat "$out")"
    ;;
  *"session ports"*)
    grep -Eq "^ *8000 +[0-9]+ +$url/v1/sessions/$sid/ports/8000/" "$out" ||
      fail "session ports did not list 8000: $(cat "$out")"
    ;;
  esac
done <<<"$commands"
[ -n "$sid" ] && [ -n "$signed" ] || fail "the block made no session or no signed URL"
# The unexpose command ran last: neither URL reaches the port any more.
code=$(curl -s -o /dev/null -w '%{http_code}' "$signed")
[ "$code" = 404 ] || fail "the signed URL still answers $code after unexpose"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" \
  "$url/v1/sessions/$sid/ports/8000/")
[ "$code" = 404 ] || fail "the port still answers $code after unexpose"
stop_daemon
echo PASS
