#!/usr/bin/env bash
# examples/config/*.json, the configs docs/ and the README offer per common setup, and the
# config blocks of docs/ marked for it: each, with
# only its places (paths, addresses), token hashes and certificates replaced, passes
# `sandgated --check-config`; as shipped, one with a token placeholder is refused naming the
# key; and the ones that need nothing beside the daemon (local, dashboard, tls-tenants) start
# it and answer the CLI (over TLS with a token for tls-tenants). replicas.json needs
# PostgreSQL: the cluster tests run that setup; here it is checked only.
#
#   tests/integration/config_examples_test.sh REPO BUILD_DIR
set -euo pipefail
source "$(dirname "$0")/doc_test_lib.sh"
doc_test_init config-examples "$1" "$2"

examples=("$repo"/examples/config/*.json)
[ ${#examples[@]} -ge 4 ] || fail "expected the four example configs, found ${#examples[@]}"

# One self-signed certificate for 127.0.0.1 (server and client use) stands for every
# certificate and CA the examples name.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
  -addext extendedKeyUsage=serverAuth,clientAuth \
  -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
printf 'secret\n' >"$tmp/pg-password"
chmod 0600 "$tmp/pg-password"
token=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
hash=$(printf %s "$token" | sha256sum | cut -d' ' -f1)
ops_hash=$(printf %s "ops-$token" | sha256sum | cut -d' ' -f1)  # each tenant its own token

# The example with its places made local: state under $tmp/NAME, every address on loopback
# with a port the kernel picks, every certificate the one above, every token hash the test's
# (the operator's its own: two tenants may not share a token).
localize() {
  local name=$1 file=$2
  sed -e "s|/run/sandgate|$tmp/$name|g" -e "s|/var/lib/sandgate|$tmp/$name|g" \
    -e "s|/tmp/sandgate|$tmp/$name|g" \
    -e "s|/etc/sandgate/tls/[a-z-]*\\.pem|$tmp/cert.pem|g" \
    -e "s|/etc/sandgate/tls/[a-z-]*\\.key|$tmp/key.pem|g" \
    -e "s|/etc/sandgate/pg-password|$tmp/pg-password|g" \
    -e 's|0\.0\.0\.0:[0-9]*|127.0.0.1:0|g' -e 's|10\.0\.0\.1:[0-9]*|127.0.0.1:0|g' \
    -e 's|127\.0\.0\.1:8080|127.0.0.1:0|g' \
    -e "s|PUT-OPS-TOKEN-SHA256-HERE|$ops_hash|g" -e "s|PUT-[A-Z-]*SHA256-HERE|$hash|g" "$file"
}

for example in "${examples[@]}"; do
  name=$(basename "$example" .json)
  mkdir -p "$tmp/$name"
  chmod 0700 "$tmp/$name"
  localize "$name" "$example" >"$tmp/$name.json"
  left=$(grep -v '^ *//' "$tmp/$name.json" | grep "PUT-\|/etc/sandgate\|/var/lib\|/run/" || true)
  [ -z "$left" ] || fail "$name: a place the test does not replace: $left"
  out=$("$build/bin/sandgated" --config "$tmp/$name.json" --check-config 2>&1) ||
    fail "$name: sandgated --check-config refused it: $out"
  grep -q "config OK" <<<"$out" || fail "$name: --check-config said: $out"
  if grep -q "PUT-[A-Z-]*SHA256-HERE" "$example"; then
    # As shipped, a placeholder is not a hash: refused, naming the key, before anything runs.
    sed -e "s|/etc/sandgate/tls/[a-z-]*\\.pem|$tmp/cert.pem|g" \
      -e "s|/etc/sandgate/tls/[a-z-]*\\.key|$tmp/key.pem|g" "$example" >"$tmp/$name.raw.json"
    if out=$("$build/bin/sandgated" --config "$tmp/$name.raw.json" --check-config 2>&1); then
      fail "$name: the placeholder token hash was accepted"
    fi
    grep -q "token_sha256" <<<"$out" || fail "$name: the refusal does not name token_sha256: $out"
  fi
  [ -e "$tmp/$name/state.db" ] && fail "$name: --check-config touched the state directory"
done

# The config blocks of docs/ marked `<!-- examples.config: ... -->`, each as it stands but for
# its places (as above), its `…` token hashes (each its own hash) and, for a fragment such as
# `"store": {...}`, the braces around it.
printf 'sk-test\n' >"$tmp/openai.key"
chmod 0600 "$tmp/openai.key"
blocks=0
for doc in "$repo"/docs/*.md; do
  count=$(grep -c '^<!-- examples.config: ' "$doc" || true)
  for i in $(seq 1 "$count"); do
    name=$(basename "$doc" .md)-$i
    # The doc from its i-th marker on, in a file: piped, doc_block's early exit could end the
    # first awk with SIGPIPE, which pipefail and set -e turn into a silent exit.
    awk -v want="$i" '/^<!-- examples.config: / && ++n == want {p=1} p' "$doc" >"$tmp/$name.md"
    block=$(doc_block "$tmp/$name.md" "examples.config: " json)
    [ -n "$block" ] || fail "$doc: no json block after its examples.config marker $i"
    case $block in '"'*) block="{$block}" ;; esac
    mkdir -p "$tmp/$name"
    chmod 0700 "$tmp/$name"
    printf '%s\n' "$block" >"$tmp/$name.raw"
    localize "$name" "$tmp/$name.raw" |
      sed -e "s|/etc/sandgate/openai.key|$tmp/openai.key|g" -e "s|/run/postgresql|$tmp|g" |
      perl -pe 's/"…"/sprintf("\"%064x\"", ++$n)/ge' >"$tmp/$name.json"
    out=$("$build/bin/sandgated" --config "$tmp/$name.json" --check-config 2>&1) ||
      fail "$doc, block $i: sandgated --check-config refused it: $out"
    blocks=$((blocks + 1))
  done
done
[ "$blocks" -ge 5 ] || fail "expected at least 5 marked config blocks in docs/, found $blocks"

# A config with a mistake is refused by --check-config, naming the key, exit status 2.
printf '{"listen": "unix:%s/x.sock", "max_sandboxs": 3}\n' "$tmp" >"$tmp/bad.json"
set +e
out=$("$build/bin/sandgated" --config "$tmp/bad.json" --check-config 2>&1)
status=$?
set -e
[ "$status" = 2 ] || fail "a config with an unknown key: --check-config exited $status ($out)"
grep -q "max_sandboxs" <<<"$out" || fail "the refusal does not name the key: $out"

start_daemon --config "$tmp/local.json"
"$build/bin/sandgate" --addr "$addr" runs >/dev/null || fail "local: the CLI on $addr"
stop_daemon

start_daemon --config "$tmp/dashboard.json"
SANDGATE_TOKEN=$token "$build/bin/sandgate" --addr "$addr" runs >/dev/null ||
  fail "dashboard: the CLI on $addr"
stop_daemon

start_daemon --config "$tmp/tls-tenants.json"
case $addr in tcp:127.0.0.1:*) ;; *) fail "tls-tenants: listening on $addr, not TCP" ;; esac
SANDGATE_TOKEN=$token "$build/bin/sandgate" --addr "$addr" --tls-ca "$tmp/cert.pem" runs \
  >/dev/null || fail "tls-tenants: the CLI over TLS with a tenant's token"
if SANDGATE_TOKEN=wrong "$build/bin/sandgate" --addr "$addr" --tls-ca "$tmp/cert.pem" runs \
  >/dev/null 2>&1; then
  fail "tls-tenants: a wrong token was let in"
fi
stop_daemon
echo PASS
