#!/bin/sh
# buf lint (STANDARD, with the exceptions proto/buf.yaml records and explains) on the public
# API. Installs the pinned buf from the npm registry (npm ci) the first time.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$here/buf"
if [ ! -x node_modules/.bin/buf ]; then
  npm ci --no-audit --no-fund >&2 || { echo "buf_lint: npm ci failed" >&2; exit 2; }
fi
cd "$repo/proto"
"$here/buf/node_modules/.bin/buf" lint
echo "buf lint: proto/ is clean"
