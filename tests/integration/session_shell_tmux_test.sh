#!/usr/bin/env bash
# `sandgate session shell` in a real terminal: tmux runs the CLI in a pane, the test types
# into it with send-keys and reads the screen with capture-pane, as a person would see it.
# The daemon runs on a temporary Unix socket; a session is made with the CLI.
#
#   tests/integration/session_shell_tmux_test.sh BUILD_DIR
# Exit 77 (skipped) without tmux.
set -euo pipefail

build=$1
command -v tmux >/dev/null || { echo "tmux is not installed (deploy/setup.sh installs it)"; exit 77; }
tmp=$(mktemp -d /tmp/sg-shell-tmux.XXXXXX)
pid=
server="sg-shell-$$"
trap 'tmux -L "$server" kill-server 2>/dev/null || true
      [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
      rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*" >&2
  echo "--- screen:" >&2
  tmux -L "$server" capture-pane -p -t shell 2>/dev/null >&2 || true
  echo "--- daemon log:" >&2
  tail -20 "$tmp/log" >&2 || true
  exit 1
}

cat >"$tmp/config.json" <<JSON
{"listen": "unix:$tmp/s.sock", "state_dir": "$tmp/state",
 "local": {"uid_base": 331000, "uid_count": 4}}
JSON
"$build/bin/sandgated" --config "$tmp/config.json" >"$tmp/out" 2>"$tmp/log" &
pid=$!
for _ in $(seq 1 300); do
  grep -q "^sandgated listening on" "$tmp/out" && break
  kill -0 "$pid" 2>/dev/null || fail "sandgated exited"
  sleep 0.1
done
export SANDGATE_ADDR="unix:$tmp/s.sock"
sid=$("$build/bin/sandgate" session create --idle 300) || fail "session create"

# Waits until the pane shows `text` (20 s at most).
screen_has() {
  for _ in $(seq 1 200); do
    tmux -L "$server" capture-pane -p -t shell | grep -qF -- "$1" && return 0
    sleep 0.1
  done
  return 1
}

tmux -L "$server" new-session -d -s shell -x 100 -y 30 \
  "SANDGATE_ADDR=$SANDGATE_ADDR $build/bin/sandgate session shell $sid; echo CLI-EXITED-\$?; sleep 60"
tmux -L "$server" send-keys -t shell 'echo $((6*7))' Enter
screen_has 42 || fail "no answer from the shell"
# The sandbox's terminal has the pane's size, and follows it when it changes.
tmux -L "$server" send-keys -t shell 'stty size' Enter
screen_has "30 100" || fail "the sandbox's terminal is not the pane's size"
# The resize reaches the sandbox when the CLI has passed it on, a while later: a command that
# waits for its SIGWINCH tells. Not bash's own `stty size` after a pause: readline writes back
# the size it read each time it shows a prompt, undoing a resize that lands in that instant.
tmux -L "$server" send-keys -t shell -l "sh -c 'trap \"stty size; exit\" WINCH; echo wai\"\"ting; while :; do sleep 0.1; done'"
tmux -L "$server" send-keys -t shell Enter
screen_has "waiting" || fail "the size watcher did not start"
tmux -L "$server" resize-window -t shell -x 120 -y 40
screen_has "40 120" || fail "a resize did not reach the sandbox"
# Ctrl-C stops what runs in the sandbox; the CLI and the shell stay. What runs takes SIGINT's
# default (death) before it says it sleeps, so no moment loses the key.
tmux -L "$server" send-keys -t shell -l "python3 -c 'import signal, time; signal.signal(signal.SIGINT, signal.SIG_DFL); print(\"sle\" + \"eping\"); time.sleep(300)'"
tmux -L "$server" send-keys -t shell Enter
screen_has "sleeping" || fail "the sleeper did not start"
tmux -L "$server" send-keys -t shell C-c
tmux -L "$server" send-keys -t shell 'echo after-$((1+1))' Enter
screen_has "after-2" || fail "Ctrl-C ended more than the command"
# The shell's exit status is the CLI's.
tmux -L "$server" send-keys -t shell 'exit 7' Enter
screen_has "CLI-EXITED-7" || fail "the exit status did not come back"
echo "ok: session shell in tmux"
