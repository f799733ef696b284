#!/usr/bin/env bash
# A throwaway PostgreSQL server (Debian's `postgresql`) in a directory of its own, on a Unix
# socket only (no TCP), run as `nobody` when this runs as root (PostgreSQL refuses root).
# Shared by deploy/cluster.sh and the fault harness (tests/faults/), which also stops and
# restarts it under load.
#
#   deploy/postgres.sh init DIR       initdb in DIR/data, start, create database `sandgate`;
#                                     prints the DSN ("host=DIR dbname=sandgate user=sandgate")
#   deploy/postgres.sh start DIR      start it again (after stop)
#   deploy/postgres.sh stop DIR [MODE]  pg_ctl stop -m MODE (default fast)
#   deploy/postgres.sh restart DIR    pg_ctl restart -m fast
#   deploy/postgres.sh status DIR     exit 0 when it runs
#
# `restart` keeps the options (pg_ctl reads them from data/postmaster.opts). DIR must be short (the socket's path is DIR/.s.PGSQL.5432) and, as root, reachable by
# `nobody`: /tmp/… is. The server's log is DIR/server.log. $SANDGATE_PG_BINDIR overrides
# /usr/lib/postgresql/15/bin.
set -euo pipefail

pg_bin=${SANDGATE_PG_BINDIR:-/usr/lib/postgresql/15/bin}

die() {
  echo "postgres: $*" >&2
  exit 1
}

# Runs a PostgreSQL command as the owner of $dir: nobody when this runs as root, else
# ourselves. From /, which nobody can enter even when the caller is in a 0700 home.
as_pg() {
  local owner
  owner=$(stat -c %U "$dir")
  if [ "$owner" != "$(id -un)" ]; then
    (cd / && setpriv --reuid="$owner" --regid="$(stat -c %G "$dir")" --clear-groups -- "$@")
  else
    "$@"
  fi
}

pg_ctl() {
  as_pg "$pg_bin/pg_ctl" -D "$dir/data" "$@"
}

# listen_addresses='' : the Unix socket in $dir (mode 0700, its owner's) is the only way in.
start() {
  pg_ctl -l "$dir/server.log" -w -s -o "-k $dir -c listen_addresses= -c max_connections=200" \
    start || die "PostgreSQL did not start; its log: $dir/server.log"
}

cmd_init() {
  [ -x "$pg_bin/initdb" ] || die "no $pg_bin/initdb: install Debian's postgresql (apt-get install postgresql)"
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown nobody:nogroup "$dir"; fi
  as_pg "$pg_bin/initdb" -D "$dir/data" -U sandgate --auth-local=trust --auth-host=reject \
    -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    die "initdb failed (log above)"
  }
  start
  as_pg "$pg_bin/createdb" -h "$dir" -U sandgate sandgate
  echo "host=$dir dbname=sandgate user=sandgate"
}

[ $# -ge 2 ] || die "usage: deploy/postgres.sh init|start|stop|restart|status DIR [MODE]"
dir=$2
case $1 in
init) cmd_init ;;
start) start ;;
stop) pg_ctl -m "${3:-fast}" -w -s stop ;;
restart) pg_ctl -l "$dir/server.log" -m fast -w -s restart ;;
status) pg_ctl status >/dev/null 2>&1 ;;
*) die "unknown command '$1' (init, start, stop, restart, status)" ;;
esac
