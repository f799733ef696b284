"""The real daemon for the Python client's tests, as tests/integration/daemon_harness.h runs it:
sandgated (SANDGATED_PATH, from ctest) on a Unix socket in a fresh temporary directory, with
its own state directory and one tenant whose token the tests use."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Iterator, Optional

import pytest

TOKEN = "py-client-test-token"
SOURCE_DIR = os.environ.get("SANDGATE_SOURCE_DIR",
                            os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SAMPLE_CSV = os.path.join(SOURCE_DIR, "examples", "northstar_cloud_financial_statements.csv")


class Daemon:
    """One sandgated; start() may be called again after stop() (same state, same socket)."""

    def __init__(self, directory: str, listen: Optional[str] = None,
                 config: Optional[dict] = None) -> None:
        self.dir = directory
        self.state_dir = os.path.join(directory, "state")
        self.socket = os.path.join(directory, "sandgated.sock")
        # What it was told to listen on; after start(), where it listens (tcp port 0 chosen).
        self.address = listen or f"unix:{self.socket}"
        self.log_path = os.path.join(directory, "daemon.log")
        self.config_path = os.path.join(directory, "config.json")
        config = dict(config or {})
        config.setdefault(
            "tenants", [{"name": "py", "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}])
        # A uid range of its own, apart from every other test's daemon (they may run at once).
        config.setdefault("local", {"uid_base": 330000, "uid_count": 16})
        config.update({"listen": self.address, "state_dir": self.state_dir})
        with open(self.config_path, "w") as f:
            json.dump(config, f)
        self.process: Optional[subprocess.Popen] = None

    def start(self) -> None:
        """Starts it and waits for "sandgated listening on ADDRESS", which it prints once it
        serves."""
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [os.environ["SANDGATED_PATH"], "--config", self.config_path, "--log-level",
                 "debug"], stdout=subprocess.PIPE, stderr=log, close_fds=True)
        ready, _, _ = select.select([self.process.stdout], [], [], 15)
        line = self.process.stdout.readline().decode() if ready else ""
        # Where its HTTP port is comes first (http_listen: "sandgated http on URL"), then, as
        # promptly, the line awaited (perhaps already in the reader's buffer: no select).
        if line.startswith("sandgated http on "):
            line = self.process.stdout.readline().decode()
        prefix = "sandgated listening on "
        if not line.startswith(prefix):
            self.stop(signal.SIGKILL)
            pytest.fail(f"sandgated did not start (said {line!r}):\n{self.log()}")
        self.address = line[len(prefix):].strip()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process is None:
            return 0
        self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.process.stdout.close()
        self.process = None
        return code

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()


@contextlib.contextmanager
def running_daemon(before_start=None, **kwargs) -> Iterator[Daemon]:
    """A started Daemon (arguments as Daemon's) in a fresh directory, stopped and removed
    after. `before_start(daemon)` may prepare its state directory before it first reads it."""
    directory = tempfile.mkdtemp(prefix="sg-py-")
    d = Daemon(directory, **kwargs)
    try:
        if before_start is not None:
            before_start(d)
        d.start()
        yield d
    finally:
        d.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    """The daemon most tests share."""
    with running_daemon() as d:
        yield d


@pytest.fixture
def own_daemon() -> Iterator[Daemon]:
    """A daemon of the test's own, for tests that stop or restart it."""
    with running_daemon() as d:
        yield d


def marked_example(relative_path: str, marker: str) -> str:
    """The ```python block right after `marker` in the repo's file `relative_path`: examples the
    docs promise run verbatim."""
    with open(os.path.join(SOURCE_DIR, relative_path)) as f:
        text = f.read()
    assert marker in text, f"{relative_path} lost its tested example ({marker})"
    found = re.match(r"\s*```python\n(.*?)\n```", text.split(marker, 1)[1], re.S)
    assert found, f"{relative_path}: the marker is not followed by a ```python block"
    return found.group(1)


def run_example(code: str, daemon: Daemon, directory) -> subprocess.CompletedProcess:
    """Runs `code` as example.py in `directory` with /usr/bin/python3, the package this test
    imports, and the daemon's address and token in the environment, as a user would."""
    import sandgate
    (directory / "example.py").write_text(code)
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(sandgate.__file__)))
    env = dict(os.environ, PYTHONPATH=package_dir, SANDGATE_ADDR=daemon.address,
               SANDGATE_TOKEN=TOKEN)
    return subprocess.run([sys.executable, "example.py"], cwd=directory, env=env,
                          capture_output=True, text=True, timeout=60)
