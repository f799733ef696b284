"""The real daemon for the Python client's tests, as tests/integration/daemon_harness.h runs it:
sandgated (SANDGATED_PATH, from ctest) on a Unix socket in a fresh temporary directory, with
its own state directory and one tenant whose token the tests use."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Iterator, Optional

import grpc
import pytest

TOKEN = "py-client-test-token"
SOURCE_DIR = os.environ.get("SANDGATE_SOURCE_DIR",
                            os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SAMPLE_CSV = os.path.join(SOURCE_DIR, "examples", "northstar_cloud_financial_statements.csv")


def healthy(address: str) -> bool:
    """grpc.health.v1.Health/Check for the whole server answers SERVING (the bytes 08 01)."""
    with grpc.insecure_channel(address) as channel:
        try:
            return channel.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=0.5) == \
                b"\x08\x01"
        except grpc.RpcError:
            return False


class Daemon:
    """One sandgated; start() may be called again after stop() (same state, same socket)."""

    def __init__(self, directory: str, socket_path: Optional[str] = None) -> None:
        self.dir = directory
        self.state_dir = os.path.join(directory, "state")
        self.socket = socket_path or os.path.join(directory, "sandgated.sock")
        self.address = f"unix:{self.socket}"
        self.log_path = os.path.join(directory, "daemon.log")
        self.config_path = os.path.join(directory, "config.json")
        config = {
            "listen": self.address,
            "state_dir": self.state_dir,
            "tenants": [{"name": "py", "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}],
        }
        with open(self.config_path, "w") as f:
            json.dump(config, f)
        self.process: Optional[subprocess.Popen] = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [os.environ["SANDGATED_PATH"], "--config", self.config_path, "--log-level",
                 "debug"], stdout=subprocess.DEVNULL, stderr=log, close_fds=True)
        deadline = time.monotonic() + 15
        while not healthy(self.address):
            if self.process.poll() is not None:
                pytest.fail(f"sandgated exited during start:\n{self.log()}")
            if time.monotonic() > deadline:
                pytest.fail(f"sandgated did not become healthy:\n{self.log()}")
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process is None:
            return 0
        self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.process = None
        return code

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    directory = tempfile.mkdtemp(prefix="sg-py-")
    d = Daemon(directory)
    d.start()
    yield d
    d.stop()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def own_daemon() -> Iterator[Daemon]:
    """A daemon of the test's own, for tests that stop or restart it."""
    directory = tempfile.mkdtemp(prefix="sg-py-")
    d = Daemon(directory)
    d.start()
    yield d
    d.stop()
    shutil.rmtree(directory, ignore_errors=True)
