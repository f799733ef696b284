"""docs/sessions.md's Python example, run verbatim against the real daemon so that it cannot
rot."""

from __future__ import annotations

import os

from conftest import marked_example, run_example

MARKER = "<!-- This example runs verbatim in ctest (tests/clients/python/test_docs_sessions.py). -->"


def docs_example() -> str:
    return marked_example(os.path.join("docs", "sessions.md"), MARKER)


def test_the_sessions_doc_example_works(daemon, tmp_path):
    done = run_example(docs_example(), daemon, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "9" in lines, done.stdout                        # py.wait(): killed by SIGKILL
    assert "0 'hello\\n' ''" in lines, done.stdout          # cat.wait()
    assert lines[-1] == "['p1', 'p2', 'p3']", done.stdout
