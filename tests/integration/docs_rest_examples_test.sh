#!/usr/bin/env bash
# docs/api.md "REST": the curl block there, command by command as it stands, against a daemon
# with http_listen and a tenant. Only what a reader fills in is filled in: $SANDGATE_URL and
# $SANDGATE_TOKEN (the block's `export` line), RUN_ID and SESSION_ID (from the answers of the
# commands that made them), run.json and q3.csv. Every command must exit 0, and the files the
# block says it saves must arrive with the run's and the upload's bytes.
#
#   tests/integration/docs_rest_examples_test.sh REPO BUILD_DIR
set -euo pipefail
source "$(dirname "$0")/doc_test_lib.sh"
doc_test_init docs-rest "$1" "$2"

block=$(doc_block "$repo/docs/api.md" "integration.docs_rest_examples runs these" sh)
[ -n "$block" ] || fail "docs/api.md has no sh block after the integration.docs_rest_examples marker"
# One command a line: continuations joined, comments and the reader's `export` line left out.
commands=$(sed -e 's/[[:space:]]*#.*$//' <<<"$block" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta' |
  grep -v '^[[:space:]]*$' | grep -v '^export ')
[ "$(grep -c '^curl' <<<"$commands")" -ge 8 ] || fail "expected the block's 8 curl commands: $commands"

mkdir -p "$tmp/cwd"
start_rest_daemon 330500 16

sample=$repo/examples/northstar_cloud_financial_statements.csv
printf '{"playbook": "financial-analyst", "inputs": [{"name": "q3.csv", "content": "%s"}]}\n' \
  "$(base64 -w0 "$sample")" >"$tmp/cwd/run.json"
cp "$sample" "$tmp/cwd/q3.csv"

run_id=
session_id=
n=0
while IFS= read -r command; do
  n=$((n + 1))
  command=${command//RUN_ID/$run_id}
  command=${command//SESSION_ID/$session_id}
  case $command in *RUN_ID* | *SESSION_ID* | */runs//* | */sessions//*)
    fail "command $n needs an id no earlier command gave: $command" ;;
  esac
  out=$(cd "$tmp/cwd" && SANDGATE_URL=$url SANDGATE_TOKEN=$token bash -c "$command" 2>&1) ||
    fail "command $n exited non-zero: $command
$out"
  case $command in
    *'"$SANDGATE_URL/v1/runs"') run_id=$(sed -n 's/^{"id":"\([^"]*\)".*/\1/p' <<<"$out") ;;
    *'"$SANDGATE_URL/v1/sessions"') session_id=$(sed -n 's/^{"id":"\([^"]*\)".*/\1/p' <<<"$out") ;;
  esac
  printf '%s\n' "$out" >"$tmp/answer.$n"
done <<<"$commands"
[ -n "$run_id" ] && [ -n "$session_id" ] || fail "the block made no run or no session"
grep -q '"run.finished"\|event: run.finished' "$tmp"/answer.* || fail "no answer followed the run to run.finished"
grep -q 'RUN_STATUS_SUCCEEDED' "$tmp"/answer.* || fail "the run did not succeed"
[ -s "$tmp/cwd/investment_analysis.md" ] || fail "the block did not save investment_analysis.md"
cmp -s "$tmp/cwd/q3.copy.csv" "$sample" || fail "the downloaded q3.copy.csv is not the uploaded file"
grep -q '"data":"'"$(printf '7 in/q3.csv\n' | base64 -w0)"'"' "$tmp"/answer.* ||
  fail "the exec's output is not wc -l's"
echo PASS
