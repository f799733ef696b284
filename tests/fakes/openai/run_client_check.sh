#!/bin/sh
# Checks the fake OpenAI server with the official `openai` npm client: installs the pinned client
# (npm ci) if needed, starts the fake on a free port, runs client_check/check.mjs, then
# client_check/agents_check.mjs (the beta Agents API), stops the fake.
# Exits with check.mjs's status (or 2 when the setup fails, 77 = skipped: no node/npm here).
set -eu
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "run_client_check: node and npm are needed; skipping" >&2
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
key=check-key
cd "$here/client_check"
if [ ! -d node_modules/openai ]; then
  npm ci --no-audit --no-fund >&2 || { echo "run_client_check: npm ci failed" >&2; exit 2; }
fi

tmp=$(mktemp -d)
fake_pid=
cleanup() {
  if [ -n "$fake_pid" ]; then
    kill "$fake_pid" 2>/dev/null || true
    i=0
    while kill -0 "$fake_pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -9 "$fake_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkfifo "$tmp/out"
python3 "$here/fake_openai.py" --port 0 --api-key "$key" >"$tmp/out" 2>"$tmp/fake.log" &
fake_pid=$!
# the first stdout line names the port; bounded wait
line=$(timeout 20 head -n 1 "$tmp/out" || true)
case "$line" in
  "listening on http://"*) base=${line#listening on } ;;
  *) echo "run_client_check: the fake did not start: '$line'" >&2; cat "$tmp/fake.log" >&2; exit 2 ;;
esac

status=0
for check in check.mjs agents_check.mjs; do
  OPENAI_BASE_URL="$base/v1" OPENAI_API_KEY="$key" timeout 300 node "$check" || status=$?
  if [ $status -ne 0 ]; then
    echo "run_client_check: $check exited $status; the fake's log:" >&2
    tail -n 60 "$tmp/fake.log" >&2
    break
  fi
done
exit $status
