#!/usr/bin/env bash
# The Debian package, installed on a clean Debian root, serves a run.
#
#   tests/package/deb_install_test.sh REPO BUILD_DIR      (as root; ctest package.deb)
#
# 1. CPack builds the package from BUILD_DIR (cmake/DebianPackage.cmake).
# 2. A clean Debian 12 root: mmdebstrap's minbase with only the packages the .deb depends on
#    and systemd (so a library it needs and does not declare is missing), cached as a tarball under
#    BUILD_DIR/package/ keyed by that list; the first run fetches Debian's archive (about a
#    minute), later runs are offline.
# 3. `dpkg -i` in the root (dpkg refuses unmet dependencies), then the files are checked:
#    binaries, unit, conffile, man pages, completions; `systemd-analyze verify` and `security`
#    on the installed unit (its exposure must stay below 5).
# 4. systemd is not PID 1 here, so the daemon starts as the unit's ExecStartPre and ExecStart
#    lines say, in a container that applies what of the unit's hardening can be applied
#    without systemd (see docs/operations.md): the root read-only but for the state and
#    runtime directories (ProtectSystem=strict, StateDirectory=, RuntimeDirectory=), a private
#    /tmp (PrivateTmp=), no /home or /root (ProtectHome=), other users' processes hidden
#    (ProtectProc=invisible), the devices cgroup of DevicePolicy=closed, no_new_privs
#    (NoNewPrivileges=) and the unit's CapabilityBoundingSet. Its seccomp filters
#    (SystemCallFilter=, RestrictAddressFamilies=, ...) are not applied here. The packaged CLI then runs the financial analysis
#    there: a real bubblewrap sandbox, verified, exit 0. SIGTERM drains it (exit 0).
# 5. A reinstall keeps an operator's edit of the conffile.
# 6. `dpkg --purge` leaves no file of the package and no state.
set -euo pipefail

repo=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
[ "$(id -u)" = 0 ] || { echo "FAIL: must run as root (dpkg in a root, the daemon)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/sg-deb.XXXXXX)
pid=
proc_mounted=
devices_cgroup=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  [ -n "$proc_mounted" ] && umount "$tmp/proc"
  [ -n "$devices_cgroup" ] && rmdir "$devices_cgroup" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp/daemon.err" "$tmp/run.out"; do
    [ -s "$f" ] && { echo "--- $f" >&2; tail -30 "$f" >&2; }
  done
  exit 1
}

# 1. The package.
(cd "$build" && cpack -G DEB >"$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log" >&2; fail "cpack"; }
deb="$build/package/sandgate_$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")_amd64.deb"
[ -f "$deb" ] || fail "cpack made no $deb"
depends=$(dpkg-deb -f "$deb" Depends)
packages=$(sed -e 's/([^)]*)//g' -e 's/[[:space:]]//g' <<<"$depends")
[ -n "$packages" ] || fail "the package declares no dependencies"

# 2. The clean root, cached per dependency list. It also has systemd (which a server running
# the unit has), so that `systemd-analyze verify --root` finds the targets the unit names.
packages+=",systemd"
key=$(printf '%s' "$packages" | sha256sum | cut -c1-16)
cache="$build/package/debian-root-$key.tar"
if [ ! -f "$cache" ]; then
  echo "making a clean Debian root (mmdebstrap, once per dependency list): $packages"
  mmdebstrap --variant=minbase --format=tar --include="$packages" bookworm "$cache.partial" \
    >"$tmp/mmdebstrap.log" 2>&1 || { tail -20 "$tmp/mmdebstrap.log" >&2; fail "mmdebstrap (is Debian's archive reachable?)"; }
  mv "$cache.partial" "$cache"
fi
root=$tmp/root
mkdir "$root"
tar -C "$root" -xf "$cache"

# 3. Install; check what landed.
cp "$deb" "$root/tmp/sandgate.deb"
chroot "$root" dpkg -i /tmp/sandgate.deb >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log" >&2; fail "dpkg -i"; }
for f in /usr/sbin/sandgated /usr/bin/sandgate /usr/libexec/sandgate/sandgate-init \
  /usr/lib/systemd/system/sandgated.service /etc/sandgate/sandgated.json \
  /usr/share/man/man8/sandgated.8 /usr/share/man/man1/sandgate.1 \
  /usr/share/bash-completion/completions/sandgate /usr/share/zsh/vendor-completions/_sandgate \
  /usr/share/doc/sandgate/README.md; do
  [ -e "$root$f" ] || fail "the package did not install $f"
done
grep -qx /etc/sandgate/sandgated.json "$root/var/lib/dpkg/info/sandgate.conffiles" ||
  fail "/etc/sandgate/sandgated.json is not a conffile"
# Every option of the daemon's usage has its entry in the man page.
for option in $(chroot "$root" sandgated --help | grep -o -- '--[a-z-]*' | sort -u); do
  grep -q -- "${option//-/\\\\-}" "$root/usr/share/man/man8/sandgated.8" ||
    fail "sandgated.8 does not describe $option"
done
unit=$root/usr/lib/systemd/system/sandgated.service
systemd-analyze verify --root="$root" --man=no sandgated.service >"$tmp/verify.log" 2>&1 ||
  { cat "$tmp/verify.log" >&2; fail "systemd-analyze verify"; }
[ ! -s "$tmp/verify.log" ] || { cat "$tmp/verify.log" >&2; fail "systemd-analyze verify complained"; }
exposure=$(systemd-analyze security --offline=true --root="$root" sandgated.service 2>/dev/null |
  sed -n 's/.*Overall exposure level for sandgated.service: \([0-9.]*\).*/\1/p')
[ -n "$exposure" ] || fail "systemd-analyze security gave no exposure level"
awk -v e="$exposure" 'BEGIN { exit !(e < 5) }' ||
  fail "the unit's exposure level is $exposure, not below 5"
echo "unit exposure level: $exposure"

# 4. The daemon, as the unit starts it.
unit_value() { sed -n "s/^$1=//p" "$unit"; }
start_pre=$(unit_value ExecStartPre)
start=$(unit_value ExecStart)
caps=$(unit_value CapabilityBoundingSet)
[ -n "$start" ] && [ -n "$caps" ] || fail "the unit has no ExecStart or CapabilityBoundingSet"
[ "$(unit_value NoNewPrivileges)" = yes ] || fail "the unit does not set NoNewPrivileges"
[ "$(unit_value ProtectSystem)" = strict ] || fail "the unit does not set ProtectSystem=strict"
bounding=-all
for cap in $caps; do
  cap=${cap#CAP_}
  bounding+=",+${cap,,}"
done
# What systemd makes writable for the unit: its RuntimeDirectory= (under /run) and
# StateDirectory= (under /var/lib) entries; nothing else of the root is.
writable=()
for d in $(unit_value RuntimeDirectory); do writable+=("/run/$d"); done
for d in $(unit_value StateDirectory); do writable+=("/var/lib/$d"); done
binds=()
for d in "${writable[@]}"; do
  mkdir -p -m 0700 "$root$d"
  binds+=(--bind "$root$d" "$d")
done
cp "$repo/examples/northstar_cloud_financial_statements.csv" "$root/sample.csv"
# The container: the root read-only, the unit's directories writable, private /tmp, no
# homes, the host's /dev and /sys (cgroups: Delegate=), and a /proc of the host's PID
# namespace mounted with hidepid=invisible (ProtectProc=invisible), so the daemon sees its
# sandboxes as it would under systemd. (bwrap's own --proc would cover /proc/sys, which a
# sandbox's procfs mount refuses to sit beside; so does systemd's ProtectKernelTunables=.)
mkdir "$tmp/proc"
mount -t proc -o hidepid=invisible proc "$tmp/proc"
proc_mounted=1
container=(bwrap --ro-bind "$root" / "${binds[@]}" --tmpfs /tmp --tmpfs /home --tmpfs /root
  --dev-bind /dev /dev --bind /sys /sys --bind "$tmp/proc" /proc --die-with-parent --)
# DevicePolicy=closed: the devices systemd leaves a closed unit (null, zero, full, random,
# urandom, tty, ptmx; pts read and write), as a cgroup v1 devices allow-list where the host
# has one (systemd applies it with BPF on cgroup v2).
devices_cgroup=
if [ -d /sys/fs/cgroup/devices ]; then
  devices_cgroup=/sys/fs/cgroup/devices/sg-deb-test-$$
  mkdir "$devices_cgroup"
  echo a >"$devices_cgroup/devices.deny"
  for dev in 1:3 1:5 1:7 1:8 1:9 5:0 5:2; do echo "c $dev rwm" >"$devices_cgroup/devices.allow"; done
  echo "c 136:* rw" >"$devices_cgroup/devices.allow"
  container=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$devices_cgroup" "${container[@]}")
else
  echo "note: no cgroup v1 devices controller here; DevicePolicy=closed is not emulated"
fi
hardened=(setpriv --no-new-privs --bounding-set "$bounding" --)
# shellcheck disable=SC2086  # the unit's command lines split on spaces, as systemd does
"${container[@]}" "${hardened[@]}" $start_pre >"$tmp/check.out" 2>&1 ||
  { cat "$tmp/check.out" >&2; fail "ExecStartPre ($start_pre) refused the packaged config"; }
# bwrap says the daemon's pid on --info-fd (bwrap itself stays its parent), so that SIGTERM
# goes to the daemon, as systemd's KillSignal= does.
daemon_run=("${container[@]}")
daemon_run[${#daemon_run[@]}-1]=--info-fd
daemon_run+=(3 --)
# shellcheck disable=SC2086
"${daemon_run[@]}" "${hardened[@]}" $start >"$tmp/daemon.out" 2>"$tmp/daemon.err" 3>"$tmp/info" &
pid=$!
for _ in $(seq 1 300); do
  grep -q "^sandgated listening on unix:/run/sandgate/sandgated.sock" "$tmp/daemon.out" && break
  kill -0 "$pid" 2>/dev/null || fail "the packaged daemon exited"
  sleep 0.1
done
grep -q "^sandgated listening on" "$tmp/daemon.out" || fail "the packaged daemon did not listen"
"${container[@]}" sandgate run /sample.csv --out /tmp/results >"$tmp/run.out" 2>&1 ||
  fail "the packaged CLI's run on the packaged daemon did not succeed"
grep -q "checks failed: 0" "$tmp/run.out" || fail "the run's summary has no verified checks"
# A kept session with the network proxy (restricted), a command in it, and its close: the
# paths a run does not take (setns into the sandbox's network, exec, upload).
"${container[@]}" sh -c 'set -e
  id=$(sandgate session create --network restricted --allow example.com --json |
       sed -n "s/^{\"id\": *\"\([^\"]*\)\".*/\1/p")
  [ -n "$id" ]
  sandgate session upload "$id" /sample.csv in/q.csv
  sandgate session exec "$id" -- sh -c "wc -l < in/q.csv; sleep 30 & echo started"
  sandgate session close "$id"' >"$tmp/session.out" 2>&1 ||
  { cat "$tmp/session.out" >&2; fail "a kept session on the packaged daemon"; }
grep -qx 7 "$tmp/session.out" || fail "the session's command did not run: $(cat "$tmp/session.out")"
daemon_pid=$(sed -n 's/.*"child-pid": *\([0-9]*\).*/\1/p' "$tmp/info")
[ -n "$daemon_pid" ] || fail "bwrap did not say the daemon's pid"
kill -TERM "$daemon_pid"
wait "$pid" || fail "the packaged daemon did not drain cleanly on SIGTERM"
pid=

# 5. An operator's edit of the config survives a reinstall (dpkg keeps a changed conffile).
sed -i 's/"max_sandboxes": 64/"max_sandboxes": 32/' "$root/etc/sandgate/sandgated.json"
grep -q '"max_sandboxes": 32' "$root/etc/sandgate/sandgated.json" ||
  fail "the packaged config has no \"max_sandboxes\": 64 to edit"
chroot "$root" dpkg -i /tmp/sandgate.deb >"$tmp/dpkg.log" 2>&1 </dev/null ||
  { cat "$tmp/dpkg.log" >&2; fail "dpkg -i again"; }
grep -q '"max_sandboxes": 32' "$root/etc/sandgate/sandgated.json" ||
  fail "reinstalling the package replaced the operator's config"

# 6. Purge.
chroot "$root" dpkg --purge sandgate >"$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log" >&2; fail "dpkg --purge"; }
for f in /usr/sbin/sandgated /usr/bin/sandgate /etc/sandgate /var/lib/sandgate; do
  [ ! -e "$root$f" ] || fail "$f is left after purge"
done
echo PASS
