#!/usr/bin/env python3
"""Every enum value the documentation names exists in the API.

A README line that says a session "is `SESSION_EXPIRED`" sends a caller looking for a value
the proto does not have (it is `SESSION_STATUS_EXPIRED`). A name is taken for an enum value
when its first word starts a value of the proto (RUN, SESSION, …) and its last word ends one
of those values (EXPIRED, SUCCEEDED, …), so placeholders like `RUN_ID` are left alone; each
such name must be a value of sandgate.v1 or a prefix of values (`RUN_STATUS_`).

  doc_enum_names.py REPO
"""
import glob
import os
import re
import sys

NAME = re.compile(r"(?<![A-Za-z0-9_])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?![A-Za-z0-9_])")
VALUE = re.compile(r"^\s*([A-Z][A-Z0-9_]+)\s*=\s*\d+\s*;", re.M)


def enum_values(repo):
    values = set()
    for path in glob.glob(os.path.join(repo, "proto", "sandgate", "v1", "*.proto")):
        with open(path, encoding="utf-8") as f:
            values.update(VALUE.findall(f.read()))
    return values


def unknown_names(repo):
    values = enum_values(repo)
    last_words = {}
    for v in values:
        words = v.split("_")
        last_words.setdefault(words[0], set()).add(words[-1])
    docs = [os.path.join(repo, "README.md"), os.path.join(repo, "SECURITY.md")]
    docs += sorted(glob.glob(os.path.join(repo, "docs", "*.md")))
    docs += sorted(glob.glob(os.path.join(repo, "clients", "*", "README.md")))
    for path in docs:
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                for name in NAME.findall(line):
                    words = name.split("_")
                    if words[-1] not in last_words.get(words[0], ()):
                        continue
                    if name in values or any(v.startswith(name + "_") for v in values):
                        continue
                    yield os.path.relpath(path, repo), number, name


def main():
    found = list(unknown_names(sys.argv[1]))
    for path, number, name in found:
        print(f"{path}:{number}: {name} is not a value of sandgate.v1 (proto/sandgate/v1/)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
