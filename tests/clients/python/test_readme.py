"""The README's Python example, run verbatim against the real daemon so that it cannot rot."""

from __future__ import annotations

import os
import shutil

from conftest import SAMPLE_CSV, marked_example, run_example

MARKER = "<!-- This example runs verbatim in ctest (tests/clients/python/test_readme.py). -->"


def readme_example() -> str:
    return marked_example("README.md", MARKER)


def test_the_readme_example_works(daemon, tmp_path):
    shutil.copy(SAMPLE_CSV, tmp_path / "statements.csv")
    done = run_example(readme_example(), daemon, tmp_path)
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
    code = marked_example(os.path.join("clients", "python", "README.md"), PACKAGE_MARKER)
    shutil.copy(SAMPLE_CSV, tmp_path / "statements.csv")
    done = run_example(code, daemon, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "exit 0 printed 42" in done.stdout
    assert "1 run.queued" in done.stdout and "run.finished" in done.stdout
    assert done.stdout.rstrip().endswith("SUCCEEDED"), done.stdout
    assert os.listdir(tmp_path / "results")
