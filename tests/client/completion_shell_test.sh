#!/usr/bin/env bash
# The completion scripts in the shells themselves, and the man page through groff:
#   tests/client/completion_shell_test.sh path/to/sandgate
# bash: the script is sourced and its function called as bash calls it (COMP_WORDS,
# COMP_CWORD); zsh: the same, with compadd and _files stood in for (they exist only inside
# a completion widget). The man page must render with no groff warning.
set -euo pipefail
sandgate=$(realpath "$1")
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/work/sub" && touch "$dir/work/statements.csv"
cd "$dir/work"

bash_complete() {  # words... (the last is the word under the cursor)
  bash --norc --noprofile -c '
    source <("$0" completion bash)
    COMP_WORDS=("$0" "${@}"); COMP_CWORD=$#
    _sandgate; printf "%s\n" "${COMPREPLY[@]}"' "$sandgate" "$@"
}
[ "$(bash_complete session exe)" = exec ] || fail "bash: session exe -> $(bash_complete session exe)"
[ "$(bash_complete run --network re)" = restricted ] || fail "bash: --network re"
[ "$(bash_complete run stat)" = statements.csv ] || fail "bash: run stat -> $(bash_complete run stat)"
[ "$(bash_complete run --out s)" = sub ] || fail "bash: --out s -> $(bash_complete run --out s)"
registered=$(bash --norc --noprofile -c 'source <("$0" completion bash); complete -p sandgate' \
  "$sandgate")
grep -q "_sandgate sandgate" <<<"$registered" || fail "bash: not registered"

if command -v zsh >/dev/null; then
  zsh_complete() {
    zsh -f -c '
      compdef() { :; }
      compadd() { [[ "$1" == -Q ]] && shift; [[ "$1" == -- ]] && shift; print -l -- "$@"; }
      _files() { print -l -- "FILES$*"; }
      source <("$0" completion zsh)
      words=("$0" "$@"); CURRENT=$(( $# + 1 ))
      _sandgate' "$sandgate" "$@"
  }
  [ "$(zsh_complete session exe)" = exec ] || fail "zsh: session exe -> $(zsh_complete session exe)"
  [ "$(zsh_complete run "")" = FILES ] || fail "zsh: run -> $(zsh_complete run "")"
  [ "$(zsh_complete run --out "")" = FILES-/ ] || fail "zsh: --out -> $(zsh_complete run --out "")"
  [ -z "$(zsh_complete zz)" ] || fail "zsh: zz -> $(zsh_complete zz)"
else
  echo "zsh is not installed: its script is checked by its C++ test only" >&2
fi

warnings=$("$sandgate" man | groff -man -Tutf8 -ww -z 2>&1)
[ -z "$warnings" ] || fail "groff: $warnings"
page=$("$sandgate" man | MANWIDTH=100 man -l - 2>/dev/null)
for c in "session exec" "admin purge" completion; do
  grep -q "usage: sandgate $c" <<<"$page" || fail "man: no usage of $c"
done
echo "completion and man page: ok"
