"""docs/sessions.md's snapshots example, run verbatim against the real daemon so that it cannot
rot."""

from __future__ import annotations

import os

from conftest import marked_example, run_example

MARKER = "<!-- This example runs verbatim in ctest (tests/clients/python/test_docs_snapshots.py). -->"


def docs_example() -> str:
    return marked_example(os.path.join("docs", "sessions.md"), MARKER)


def test_the_snapshots_doc_example_works(daemon, tmp_path):
    done = run_example(docs_example(), daemon, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["True", "step 3", "600", "", "True"], done.stdout
