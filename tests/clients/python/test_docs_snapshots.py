"""docs/sessions.md's snapshots example, run verbatim against the real daemon so that it cannot
rot."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import sandgate
from conftest import SOURCE_DIR, TOKEN

MARKER = "<!-- This example runs verbatim in ctest (tests/clients/python/test_docs_snapshots.py). -->"


def docs_example() -> str:
    with open(os.path.join(SOURCE_DIR, "docs", "sessions.md")) as f:
        text = f.read()
    assert MARKER in text, "docs/sessions.md lost its tested snapshots example"
    found = re.match(r"\s*```python\n(.*?)\n```", text.split(MARKER, 1)[1], re.S)
    assert found, "the marker is not followed by a ```python block"
    return found.group(1)


def test_the_snapshots_doc_example_works(daemon, tmp_path):
    (tmp_path / "example.py").write_text(docs_example())
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(sandgate.__file__)))
    env = dict(os.environ, PYTHONPATH=package_dir, SANDGATE_ADDR=daemon.address,
               SANDGATE_TOKEN=TOKEN)
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["True", "step 3", "600", "", "True"], done.stdout
