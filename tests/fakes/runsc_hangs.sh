#!/bin/sh
# A runsc that hangs at boot, as Debian 12's does with --platform=kvm under nested
# virtualization: says it is booting, then never returns (tests/sandbox/local/gvisor_probe_test.cc).
echo "fake runsc: booting the sandbox on $*" >&2
exec sleep 3600
