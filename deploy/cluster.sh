#!/usr/bin/env bash
# A throwaway three-replica sandgate cluster on this machine, to try replicas:
#   - a PostgreSQL server (Debian's `postgresql`) in a temporary directory, on a Unix socket
#     only (no TCP), run as `nobody` when this runs as root (PostgreSQL refuses root);
#   - a throwaway CA with one certificate for the replicas (serverAuth and clientAuth: they
#     call each other with mutual TLS) and one for the CLI;
#   - three sandgated replicas on 127.0.0.1, replica-a, -b and -c: one config but for the
#     identity, the listen/advertise address and the state directory;
#   - the sample statements analysed through each replica with the CLI, the verified result
#     printed, and how to stop it all.
#
#   deploy/cluster.sh start     start everything and analyse the sample (the default)
#   deploy/cluster.sh status    what runs, where
#   deploy/cluster.sh stop      drain the replicas, stop PostgreSQL, delete every directory
#
# It uses the binaries in build/ (or $SANDGATE_BUILD_DIR) and builds them with
# deploy/setup.sh only when they are missing. Its state is in .sandgate-cluster/ (or
# $SANDGATE_CLUSTER_DIR); PostgreSQL's directory is under /tmp (its socket path must be short,
# and `nobody` must reach it even when the clone is in a 0700 home). Ports: three free ones
# on 127.0.0.1, or $SANDGATE_CLUSTER_PORTS ("7443,7444,7445"). Sandbox uids: from 400000, or
# $SANDGATE_CLUSTER_UID_BASE.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${SANDGATE_BUILD_DIR:-$repo/build}
state=${SANDGATE_CLUSTER_DIR:-$repo/.sandgate-cluster}
pg_bin=${SANDGATE_PG_BINDIR:-/usr/lib/postgresql/15/bin}
replicas=(a b c)
sample=$repo/examples/northstar_cloud_financial_statements.csv
# Sandbox uids: replica i has uid_base + 1000 i and the 100 after it; nothing else may use them.
uid_base=${SANDGATE_CLUSTER_UID_BASE:-400000}
pg_dir=""  # PostgreSQL's directory (data/, the socket, server.log), once made

say() { echo "cluster: $*"; }
die() {
  echo "cluster: $*" >&2
  exit 1
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Three free TCP ports on 127.0.0.1 (the kernel's choice, so two clusters or a test run
# beside one do not collide).
free_ports() {
  python3 - <<'PY'
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(",".join(str(s.getsockname()[1]) for s in socks))
PY
}

make_certs() {
  local dir=$1 key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  mkdir -p "$dir"
  (
    cd "$dir"
    umask 077
    openssl req -x509 "${key[@]}" -days 7 -subj /CN=sandgate-cluster-ca -keyout ca.key \
      -out ca.pem -addext basicConstraints=critical,CA:TRUE \
      -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
    # One certificate for the three replicas: the CLI's --addr a,b,c checks every replica
    # against the first one's host, and each replica presents it when it calls another.
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" \
      "extendedKeyUsage=serverAuth,clientAuth" >replica.ext
    printf '%s\n' "extendedKeyUsage=clientAuth" >client.ext
    for name in replica client; do
      openssl req "${key[@]}" -subj "/CN=sandgate-cluster-$name" -keyout "$name.key" \
        -out "$name.csr" 2>/dev/null
      openssl x509 -req -days 7 -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
        -extfile "$name.ext" -out "$name.pem" 2>/dev/null
    done
    rm -f ./*.csr ./*.ext ca.srl
  )
}

# PostgreSQL's directory and server: deploy/postgres.sh (shared with tests/faults/).
start_postgres() {
  pg_dir=$(mktemp -d /tmp/sg-cluster-pg.XXXXXX)
  echo "$pg_dir" >"$state/pg.dir"
  "$repo/deploy/postgres.sh" init "$pg_dir" >/dev/null
}

write_config() {
  local r=$1 port=$2 dsn=$3 token_sha=$4 uid_base=$5 certs=$state/certs
  mkdir -p "$state/replica-$r/state"
  chmod 0700 "$state/replica-$r"
  cat >"$state/replica-$r/config.json" <<JSON
{
  "listen": "tcp:127.0.0.1:$port",
  "state_dir": "$state/replica-$r/state",
  "store": {"type": "postgres", "dsn": "$dsn"},
  "replica": {"id": "replica-$r", "advertise_address": "127.0.0.1:$port"},
  "tls": {"cert_file": "$certs/replica.pem", "key_file": "$certs/replica.key",
          "client_ca_file": "$certs/ca.pem", "require_client_cert": true},
  "tenants": [{"name": "demo", "token_sha256": "$token_sha"}],
  "local": {"uid_base": $uid_base, "uid_count": 100}
}
JSON
}

# Waits until replica $1 says where it listens (its first line on stdout), or fails with
# its log.
wait_listening() {
  local dir=$state/replica-$1
  for _ in $(seq 1 150); do
    grep -q "^sandgated listening on" "$dir/stdout" 2>/dev/null && return 0
    alive "$dir/pid" || {
      cat "$dir/log" >&2
      die "replica-$1 exited during start (its log above)"
    }
    sleep 0.1
  done
  die "replica-$1 did not start listening in 15 s; its log: $dir/log"
}

cli() {
  local addr=$1
  shift
  "$build/bin/sandgate" --addr "$addr" --token-file "$state/token" --tls-ca "$state/certs/ca.pem" --tls-cert "$state/certs/client.pem" \
    --tls-key "$state/certs/client.key" "$@"
}

cmd_start() {
  if [ -d "$state" ]; then
    die "a cluster is already set up in $state (deploy/cluster.sh status; deploy/cluster.sh stop)"
  fi
  if [ ! -x "$build/bin/sandgated" ] || [ ! -x "$build/bin/sandgate" ] ||
    [ ! -x "$build/bin/sandgate-init" ]; then
    "$repo/deploy/setup.sh" "$build"
  fi
  # The replicas' shared store; the quickstart's setup does not install it (only tests need it).
  if [ ! -x "$pg_bin/initdb" ] && [ "$(id -u)" -eq 0 ]; then
    echo "cluster: installing postgresql"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  fi
  [ -x "$pg_bin/initdb" ] || die "no $pg_bin/initdb: install Debian's postgresql (apt-get install postgresql)"
  command -v openssl >/dev/null || die "openssl is needed for the certificates"
  # sandgated gives each sandbox a host uid of its own and mounts its file systems.
  [ "$(id -u)" -eq 0 ] || die "sandgated runs as root (each sandbox gets a host uid of its own); run this as root"
  mkdir -p "$state"
  chmod 0700 "$state"
  # A failed start leaves nothing running and nothing behind.
  trap 'echo "cluster: start failed; cleaning up" >&2; cmd_stop >/dev/null 2>&1 || true' EXIT

  local ports
  ports=${SANDGATE_CLUSTER_PORTS:-$(free_ports)}
  IFS=, read -r -a port <<<"$ports"
  [ ${#port[@]} -eq 3 ] || die "SANDGATE_CLUSTER_PORTS: expected three ports, got '$ports'"
  echo "$ports" >"$state/ports"

  say "PostgreSQL (Unix socket only) ..."
  start_postgres
  local dsn
  dsn="host=$pg_dir dbname=sandgate user=sandgate"

  say "certificates (a throwaway CA, mutual TLS) ..."
  make_certs "$state/certs"
  (umask 077 && openssl rand -hex 24 | tr -d '\n' >"$state/token")
  local token_sha
  token_sha=$(sha256sum <"$state/token" | cut -d' ' -f1)

  local i r id addrs=()
  for i in 0 1 2; do
    r=${replicas[$i]}
    # One host, so each replica its own range of sandbox uids; on separate hosts the same.
    write_config "$r" "${port[$i]}" "$dsn" "$token_sha" $((uid_base + i * 1000))
    setsid "$build/bin/sandgated" --config "$state/replica-$r/config.json" \
      >"$state/replica-$r/stdout" 2>"$state/replica-$r/log" </dev/null &
    echo $! >"$state/replica-$r/pid"
    addrs+=("tcp:127.0.0.1:${port[$i]}")
  done
  for r in "${replicas[@]}"; do wait_listening "$r"; done
  say "replicas running: ${addrs[*]}"

  local all
  all=$(
    IFS=,
    echo "${addrs[*]}"
  )
  local runs=() out
  for i in 0 1 2; do
    r=${replicas[$i]}
    out=$state/results-$r
    say "analysing the sample through replica-$r (${addrs[$i]}); the CLI's output: $out.txt"
    if ! cli "${addrs[$i]}" run "$sample" --out "$out" >"$out.txt" 2>&1; then
      cat "$out.txt" >&2
      die "the analysis through replica-$r did not succeed (its output above)"
    fi
    runs+=("$(sed -n 's/^run \([^ ]*\) started for .*/\1/p' "$out.txt")")
    # The verifier's verdict: the daemon recomputed every metric from the input.
    grep -E "^unusual movements: |^SUCCEEDED: " "$out.txt" | sed 's/^/    /'
  done
  echo
  say "the three runs, each read through all three replicas (--addr $all, round robin):"
  for id in "${runs[@]}"; do
    cli "$all" get "$id" --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("    %s  %s  on %s" % (r["id"], r["status"], r.get("replica", "?")))'
  done
  cat <<TXT

Cluster:   $state/ (replica-{a,b,c}/: config.json, log, state/; certs/; token)
Database:  $dsn
Results:   $state/results-{a,b,c}/
Use it:    $build/bin/sandgate --addr $all --token-file $state/token \\
             --tls-ca $state/certs/ca.pem --tls-cert $state/certs/client.pem \\
             --tls-key $state/certs/client.key runs
Kill one:  kill -9 \$(cat $state/replica-a/pid)   (another fails its running runs at its lease's end)
Stop it:   ${SANDGATE_CLUSTER_DIR:+SANDGATE_CLUSTER_DIR=$state }$repo/deploy/cluster.sh stop   (drains the replicas, stops PostgreSQL, deletes $state and $pg_dir)
TXT
  trap - EXIT
}

# Sends SIGTERM (a drain) to process $1, waits up to $2 seconds, then SIGKILL.
stop_pid() {
  local pid=$1 grace=$2
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 $((grace * 10))); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  echo "cluster: pid $pid did not exit in ${grace}s; SIGKILL" >&2
  kill -KILL "$pid" 2>/dev/null || true
}

cmd_stop() {
  if [ ! -d "$state" ]; then
    say "nothing to stop ($state does not exist)"
    return 0
  fi
  local r
  for r in "${replicas[@]}"; do
    [ -f "$state/replica-$r/pid" ] && say "draining replica-$r (pid $(cat "$state/replica-$r/pid"))"
  done
  # The three drain at once; each waits for its runs and closes its sandboxes.
  for r in "${replicas[@]}"; do
    [ -f "$state/replica-$r/pid" ] && stop_pid "$(cat "$state/replica-$r/pid")" 30 &
  done
  wait
  if [ -f "$state/pg.dir" ]; then
    pg_dir=$(cat "$state/pg.dir")
    if [ -f "$pg_dir/data/postmaster.pid" ]; then
      say "stopping PostgreSQL"
      "$repo/deploy/postgres.sh" stop "$pg_dir" ||
        stop_pid "$(head -1 "$pg_dir/data/postmaster.pid")" 10
    fi
    case $pg_dir in /tmp/sg-cluster-pg.*) rm -rf "$pg_dir" ;; esac
  fi
  rm -rf "$state"
  say "stopped; removed $state"
}

cmd_status() {
  if [ ! -d "$state" ]; then
    say "not running ($state does not exist)"
    return 0
  fi
  local r i=0 ports
  IFS=, read -r -a ports <<<"$(cat "$state/ports")"
  for r in "${replicas[@]}"; do
    if alive "$state/replica-$r/pid"; then
      say "replica-$r: running, pid $(cat "$state/replica-$r/pid"), tcp:127.0.0.1:${ports[$i]}"
    else
      say "replica-$r: not running (log: $state/replica-$r/log)"
    fi
    i=$((i + 1))
  done
  pg_dir=$(cat "$state/pg.dir" 2>/dev/null || true)
  if [ -d "$pg_dir" ] && "$repo/deploy/postgres.sh" status "$pg_dir"; then
    say "PostgreSQL: running, socket in $pg_dir"
  else
    say "PostgreSQL: not running"
  fi
}

case ${1:-start} in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
*)
  echo "usage: deploy/cluster.sh [start|status|stop]" >&2
  exit 2
  ;;
esac
