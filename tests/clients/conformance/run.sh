#!/bin/sh
# ctest clients.conformance (docs/client-contract.md): builds the TypeScript client and the MCP
# server the adapters use, then runs the suite with Debian's python3 and pytest:
#   tests/clients/conformance/run.sh path/to/sandgated path/to/sandgate
# (PYTHONPATH must hold the Python client the build assembles: build/clients/python.)
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
"$here/../node_tests.sh" --build-only "$1" node mcp
export SANDGATED_PATH="$(realpath "$1")" SANDGATE_CLI_PATH="$(realpath "$2")"
exec "${SANDGATE_PYTHON:-/usr/bin/python3}" -m pytest -q -p no:cacheprovider "$here"
