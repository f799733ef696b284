#!/usr/bin/env bash
# Image build time and size (docs/images.md): the exact command the daemon's MmdebstrapBuilder
# runs (core/mmdebstrap_builder.h), N times into fresh directories, with the median wall time
# and the size on disk (du, as ImageStore records it). Needs root and mmdebstrap.
#
#   tests/bench/bench_images.sh [RUNS] [PACKAGES]     defaults: 3 busybox
set -euo pipefail
runs=${1:-3}
packages=${2:-busybox}
command -v mmdebstrap >/dev/null || { echo "mmdebstrap is NOT INSTALLED" >&2; exit 77; }
tmp=$(mktemp -d /tmp/sg-bench-images-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
times=()
for i in $(seq "$runs"); do
  start=$(date +%s.%N)
  mmdebstrap --mode=root --variant=essential --include="$packages" bookworm "$tmp/root$i" \
    >"$tmp/log$i" 2>&1 || { tail -5 "$tmp/log$i" >&2; exit 1; }
  end=$(date +%s.%N)
  t=$(echo "$end - $start" | bc)
  mib=$(du -sm "$tmp/root$i" | cut -f1)
  echo "run $i: ${t} s, ${mib} MiB"
  times+=("$t")
  rm -rf "$tmp/root$i"
done
median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
echo "packages $packages: median build ${median} s over $runs runs (variant essential, bookworm)"
