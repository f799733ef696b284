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

Most of a unit's time is parsing the same third-party headers (gRPC, protobuf and the generated
sandgate.pb.h, Abseil, nlohmann/json, the standard library), so units with the same flags share
a clang precompiled header of the third-party headers they include (built with those flags,
-Wthread-safety -Werror included). It changes no verdict: a group whose header does not build
is checked without one, and a unit that fails with it is checked again without it, its verdict
and diagnostics being those of the plain run. SANDGATE_THREAD_SAFETY_PCH=0 turns it off.
"""
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
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


# Third-party headers worth precompiling: the C++ libraries every unit parses again. C and
# POSIX headers stay out (some clash with each other, e.g. <net/if.h> and <linux/if.h>).
PCH_PREFIXES = ("absl/", "grpcpp/", "grpc/", "google/protobuf/", "nlohmann/", "sandgate/v1/")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def include_dirs(args):
    """The -I directories of a command line (project headers), in order."""
    dirs = []
    for i, a in enumerate(args):
        if a == "-I" and i + 1 < len(args):
            dirs.append(args[i + 1])
        elif a.startswith("-I") and len(a) > 2:
            dirs.append(a[2:])
    return dirs


def third_party_includes(path, dirs, source, seen, out):
    """Adds to `out` the precompilable headers that `path` includes, following the project's
    own headers (those found under `source` through the -I directories)."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return
    for kind, name in INCLUDE.findall(text):
        if name.startswith(PCH_PREFIXES) or (kind == "<" and "." not in name):
            out.setdefault(name, None)
            continue
        if kind != '"':
            continue
        for d in [os.path.dirname(path)] + dirs:
            candidate = os.path.realpath(os.path.join(d, name))
            if candidate.startswith(source + os.sep) and os.path.isfile(candidate):
                if candidate not in seen:
                    seen.add(candidate)
                    third_party_includes(candidate, dirs, source, seen, out)
                break


def build_pchs(units, clangxx, source, tmp, pool):
    """{unit path: extra clang args that use its group's precompiled header}: one header per
    group of two or more units with the same flags; groups whose header fails get none."""
    groups = {}
    for path, e in units.items():
        args = clang_args(e, clangxx)
        flags = tuple(a for a in args if a != e["file"] and a != path)
        groups.setdefault((e["directory"], flags), []).append(path)

    def build(item):
        n, ((directory, flags), paths) = item
        if len(paths) < 2:
            return paths, None
        headers = {}
        seen = set()
        for p in sorted(paths):
            third_party_includes(p, include_dirs(flags), source, seen, headers)
        if not headers:
            return paths, None
        header = os.path.join(tmp, f"group{n}.h")
        with open(header, "w") as f:
            f.writelines(f"#include <{h}>\n" for h in headers)
        pch = header + ".pch"
        args = [a for a in flags if a != "-fsyntax-only"] + ["-x", "c++-header", header, "-o", pch]
        r = subprocess.run(args, cwd=directory, capture_output=True, text=True)
        return paths, (["-include-pch", pch] if r.returncode == 0 else None)

    extra = {}
    for paths, use in pool.map(build, enumerate(groups.items())):
        if use:
            for p in paths:
                extra[p] = use
    return extra


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

    def run(e, extra):
        args = clang_args(e, clangxx)
        r = subprocess.run(args[:1] + extra + args[1:], cwd=e["directory"], capture_output=True,
                           text=True)
        return r.returncode, r.stdout + r.stderr

    start = time.monotonic()
    failed = []
    with tempfile.TemporaryDirectory(prefix="sandgate-thread-safety-") as tmp, \
            concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        pch = {}
        if os.environ.get("SANDGATE_THREAD_SAFETY_PCH", "1") != "0":
            pch = build_pchs(units, clangxx, source, tmp, pool)

        def check(item):
            path, e = item
            rc, out = run(e, pch.get(path, []))
            if rc != 0 and path in pch:
                rc, out = run(e, [])  # the verdict is the plain run's
            return path, rc, out

        for path, rc, out in pool.map(check, sorted(units.items())):
            if rc != 0:
                failed.append(os.path.relpath(path, source))
                sys.stdout.write(out)
    took = time.monotonic() - start
    shared = f", {len(pch)} with a shared precompiled header" if pch else ""
    if failed:
        print(f"thread_safety: {len(failed)} of {len(units)} units fail clang -Wthread-safety "
              f"-Werror ({took:.0f} s):")
        for p in failed:
            print(f"  {p}")
        return 1
    print(f"thread_safety: {len(units)} units pass clang -Wthread-safety -Werror ({took:.0f} s"
          f"{shared})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
