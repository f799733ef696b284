#!/bin/sh
# A stand-in for mmdebstrap (local.mmdebstrap) for tests that need built images but not their
# software: makes a tiny root in the target directory (the last argument) at once, saying one
# progress line, without the network. tests/integration/rest_images_test.cc.
for target; do :; done
echo "I: fake mmdebstrap $*"
mkdir -p "$target/usr/bin" "$target/etc" || exit 1
echo 'PRETTY_NAME="fake"' > "$target/etc/os-release"
