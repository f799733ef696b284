"""The README's Python example, run verbatim against the real daemon so that it cannot rot."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import sandgate
from conftest import SAMPLE_CSV, SOURCE_DIR, TOKEN

MARKER = "<!-- This example runs verbatim in ctest (tests/clients/python/test_readme.py). -->"


def readme_example() -> str:
    with open(os.path.join(SOURCE_DIR, "README.md")) as f:
        readme = f.read()
    assert MARKER in readme, "the README lost its tested Python example"
    found = re.match(r"\s*```python\n(.*?)\n```", readme.split(MARKER, 1)[1], re.S)
    assert found, "the README's marker is not followed by a ```python block"
    return found.group(1)


def test_the_readme_example_works(daemon, tmp_path):
    (tmp_path / "example.py").write_text(readme_example())
    shutil.copy(SAMPLE_CSV, tmp_path / "statements.csv")
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(sandgate.__file__)))
    env = dict(os.environ, PYTHONPATH=package_dir, SANDGATE_ADDR=daemon.address,
               SANDGATE_TOKEN=TOKEN)
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "1 run.queued" in out and "run.finished" in out
    assert "SUCCEEDED - " in out
    assert "saved out/investment_analysis.md" in out
    assert "exit 0 lines " in out and "stdout b'1\\n" in out and "stderr b'done\\n'" in out
    assert "['data/statements.csv']" in out
    assert "StatusCode.INVALID_ARGUMENT playbook: playbook not found" in out
    assert (tmp_path / "copy.csv").read_bytes() == (tmp_path / "statements.csv").read_bytes()


PACKAGE_MARKER = "<!-- python-package-example: tested verbatim by tests/clients/python/test_readme.py -->"


def test_the_package_readme_example_works(daemon, tmp_path):
    with open(os.path.join(SOURCE_DIR, "clients", "python", "README.md")) as f:
        readme = f.read()
    assert PACKAGE_MARKER in readme, "clients/python/README.md lost its tested example"
    found = re.match(r"\s*```python\n(.*?)\n```", readme.split(PACKAGE_MARKER, 1)[1], re.S)
    assert found, "the package README's marker is not followed by a ```python block"
    (tmp_path / "example.py").write_text(found.group(1))
    shutil.copy(SAMPLE_CSV, tmp_path / "statements.csv")
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(sandgate.__file__)))
    env = dict(os.environ, PYTHONPATH=package_dir, SANDGATE_ADDR=daemon.address,
               SANDGATE_TOKEN=TOKEN)
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "exit 0 printed 42" in done.stdout
    assert "1 run.queued" in done.stdout and "run.finished" in done.stdout
    assert done.stdout.rstrip().endswith("SUCCEEDED"), done.stdout
    assert os.listdir(tmp_path / "results")
