#!/usr/bin/env python3
"""Runs clang's thread-safety analysis over every daemon/ and client/ translation unit.

    thread_safety.py BUILD_DIR SOURCE_DIR

Reads BUILD_DIR/compile_commands.json (the project sets CMAKE_EXPORT_COMPILE_COMMANDS), takes
the entries whose source is under SOURCE_DIR/daemon or SOURCE_DIR/client, and compiles each
again with clang++ -fsyntax-only -Wthread-safety -Werror and the same flags otherwise (our
-Wall -Wextra -Werror included), so an ABSL_GUARDED_BY member touched without its mutex, or
an ABSL_EXCLUSIVE_LOCKS_REQUIRED function called without it, fails the test. Syntax only: no
object code, so it costs a fraction of a build. The generated protobuf headers must exist
(the normal build makes them). CLANGXX names the compiler (default clang++). Exit 0 when every
unit passes, 1 when one fails (its diagnostics are printed), 2 when the check cannot run.
"""
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

# GCC-only options that clang rejects or warns about (a warning is an error under -Werror).
GCC_ONLY_PREFIXES = ("-fno-semantic-interposition", "-fconcepts", "-Wno-stringop",
                     "-fstack-clash-protection", "-Wno-maybe-uninitialized")


def clang_args(entry, clangxx):
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out = [clangxx]
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c" or a.startswith("-fdiagnostics-color") or a.startswith(GCC_ONLY_PREFIXES):
            continue
        out.append(a)
    return out + ["-fsyntax-only", "-Wthread-safety", "-Werror"]


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    build, source = (os.path.realpath(p) for p in sys.argv[1:3])
    clangxx = os.environ.get("CLANGXX", "clang++")
    if shutil.which(clangxx) is None:
        print(f"thread_safety: {clangxx} not found (Debian package clang; deploy/setup.sh "
              "installs it)", file=sys.stderr)
        return 2
    db = os.path.join(build, "compile_commands.json")
    try:
        with open(db) as f:
            entries = json.load(f)
    except (OSError, ValueError) as e:
        print(f"thread_safety: cannot read {db}: {e}", file=sys.stderr)
        return 2
    roots = tuple(os.path.join(source, d) + os.sep for d in ("daemon", "client"))
    units = {}
    for e in entries:
        path = os.path.realpath(os.path.join(e["directory"], e["file"]))
        if path.startswith(roots) and path.endswith((".cc", ".cpp")):
            units.setdefault(path, e)  # a source built twice (two targets) is checked once
    if not units:
        print(f"thread_safety: no daemon/ or client/ units in {db}", file=sys.stderr)
        return 2

    def check(item):
        path, e = item
        r = subprocess.run(clang_args(e, clangxx), cwd=e["directory"], capture_output=True,
                           text=True)
        return path, r.returncode, r.stdout + r.stderr

    start = time.monotonic()
    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for path, rc, out in pool.map(check, sorted(units.items())):
            if rc != 0:
                failed.append(os.path.relpath(path, source))
                sys.stdout.write(out)
    took = time.monotonic() - start
    if failed:
        print(f"thread_safety: {len(failed)} of {len(units)} units fail clang -Wthread-safety "
              f"-Werror ({took:.0f} s):")
        for p in failed:
            print(f"  {p}")
        return 1
    print(f"thread_safety: {len(units)} units pass clang -Wthread-safety -Werror ({took:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
