# What the tests of documented examples share (sourced by *_test.sh here): a temporary
# directory removed on exit together with the daemon started in it, `fail` naming the problem
# with the daemon's log, a documentation block after its marker, and a daemon started and
# waited for.
#
#   source "$(dirname "$0")/doc_test_lib.sh"
#   doc_test_init NAME REPO BUILD_DIR       # sets repo, build, tmp
#   block=$(doc_block FILE MARKER_TEXT sh)  # the ```sh block after the line holding MARKER_TEXT
#   start_daemon --config FILE              # sets pid, addr (gRPC) and url (REST, if any)
#   start_rest_daemon UID_BASE UID_COUNT     # one tenant (its token in $token), a REST port
#   stop_daemon                             # SIGTERM: it must drain and exit 0

doc_test_init() {
  repo=$2
  build=$3
  tmp=$(mktemp -d "/tmp/sg-$1.XXXXXX")
  pid=
  trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
}

fail() {
  echo "FAIL: $*" >&2
  [ -f "$tmp/log" ] && tail -20 "$tmp/log" >&2
  exit 1
}

doc_block() {
  awk -v marker="$2" -v fence="\`\`\`$3" 'index($0, marker) {found=1; next}
       found && $0 == fence {inside=1; next}
       inside && /^```$/ {exit}
       inside {print}' "$1"
}

start_daemon() {
  : >"$tmp/out"
  "$build/bin/sandgated" "$@" >"$tmp/out" 2>"$tmp/log" &
  pid=$!
  addr=
  for _ in $(seq 1 300); do
    addr=$(sed -n 's/^sandgated listening on //p' "$tmp/out")
    if [ -n "$addr" ]; then
      url=$(sed -n 's/^sandgated http on //p' "$tmp/out")
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || fail "sandgated exited ($*)"
    sleep 0.1
  done
  fail "sandgated never said where it listens ($*)"
}

start_rest_daemon() {
  token=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
  local hash
  hash=$(printf %s "$token" | sha256sum | cut -d' ' -f1)
  mkdir -p "$tmp/state"
  cat >"$tmp/config.json" <<EOF
{"listen": "unix:$tmp/state/sock", "state_dir": "$tmp/state", "http_listen": "127.0.0.1:0",
 "allow_plaintext_tokens": true, "local": {"uid_base": $1, "uid_count": $2},
 "tenants": [{"name": "reader", "token_sha256": "$hash"}]}
EOF
  start_daemon --config "$tmp/config.json"
  [ -n "$url" ] || fail "sandgated never said where its REST port is"
}

stop_daemon() {
  kill "$pid"
  wait "$pid" || fail "sandgated did not drain cleanly"
  pid=
}
