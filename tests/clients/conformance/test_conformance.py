"""One client contract (docs/client-contract.md), checked the same way for every client: the CLI,
the Python client, the TypeScript client and the MCP server, each driven in its own process
against the real daemon with nothing but the environment a user would set. Each scenario
compares what the clients answer: the same result, or the same error code naming the same
thing.

The MCP server has no event stream of its own (its run tool waits on the TypeScript client's),
so the two stream scenarios cover the other three."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from typing import Dict, Iterator, List, Optional

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from conftest import SAMPLE_CSV, TOKEN, running_daemon  # noqa: E402
from cutting_proxy import CuttingProxy  # noqa: E402
from test_tls import make_certs  # noqa: E402

import sandgate  # noqa: E402

CLIENTS = ["cli", "python", "node", "mcp"]
STREAMING = ["cli", "python", "node"]
CLI = os.environ.get("SANDGATE_CLI_PATH", "")
# A uid range of its own, apart from every other test's daemons (they may run at once).
UIDS = {"uid_base": 330800, "uid_count": 16}  # and the next two ranges of 16


class Answer:
    """What a client answered: `ok` (a dict) or `error` {code, message}; `events` seen so far."""

    def __init__(self, line: dict, elapsed: float) -> None:
        self.ok: Optional[dict] = line.get("ok")
        self.error: Optional[dict] = line.get("error")
        self.elapsed = elapsed

    def __repr__(self) -> str:
        return f"ok={self.ok} error={self.error}"


def client_env(addr: str, token: Optional[str], extra: Optional[Dict[str, str]] = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDGATE_")}
    env["SANDGATE_ADDR"] = addr
    if token is not None:
        env["SANDGATE_TOKEN"] = token
    env.update(extra or {})
    return env


def cli_command(op: str, args: dict) -> List[List[str]]:
    """The CLI commands one operation takes (the session ones need the id the first prints)."""
    if op == "get_run":
        return [[CLI, "get", args["id"], "--json"]]
    if op == "exec_in":
        return [[CLI, "session", "exec", args["id"], "--", "true"]]
    if op == "follow":
        return [[CLI, "events", args["id"], "--follow", "--json"]]
    if op == "usage":
        return [[CLI, "session", "usage", args["id"], "--json"]]
    if op == "ports":
        return [[CLI, "session", "ports", args["id"], "--json"]]
    raise ValueError(op)


CLI_ERROR = re.compile(r"^sandgate [a-z ]+: ([A-Z_]+): (.*)$", re.M)


def cli_error(stderr: str) -> dict:
    found = CLI_ERROR.findall(stderr)
    if not found:
        return {"code": "CLIENT", "message": stderr}
    code, message = found[-1]
    return {"code": code, "message": message}


def cli_events(stdout: str) -> List[dict]:
    """The events of `sandgate events --json` (proto JSON: an int64 seq is a string), without
    heartbeats."""
    events = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    return [{"seq": int(e["seq"]), "type": e["type"]} for e in events if int(e.get("seq", 0)) > 0]


def run_cli(op: str, args: dict, env: dict) -> dict:
    def call(argv: List[str]) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)

    if op == "exec":
        made = call([CLI, "session", "create"])
        if made.returncode != 0:
            return {"error": cli_error(made.stderr)}
        sid = made.stdout.strip()
        try:
            r = call([CLI, "session", "exec", sid, "--", "echo conform"])
            if r.stderr and CLI_ERROR.search(r.stderr):
                return {"error": cli_error(r.stderr)}
            return {"ok": {"exit_code": r.returncode, "stdout": r.stdout}}
        finally:
            call([CLI, "session", "close", sid])
    r = call(cli_command(op, args)[0])
    if r.returncode != 0 and CLI_ERROR.search(r.stderr):
        return {"error": cli_error(r.stderr)}
    if op == "get_run":
        return {"ok": {"status": json.loads(r.stdout)["status"].removeprefix("RUN_STATUS_")}}
    if op == "exec_in":
        return {"ok": {"exit_code": r.returncode}}
    if op == "usage":  # proto JSON (field names kept): uint64 as a string, zeros left out
        u = json.loads(r.stdout)
        return {"ok": {"session_id": u["session_id"], "memory_bytes": int(u.get("memory_bytes", 0)),
                       "unmeasured": u.get("unmeasured", [])}}
    if op == "ports":
        return {"ok": {"ports": [json.loads(line)["port"] for line in r.stdout.splitlines()]}}
    return {"ok": {"events": cli_events(r.stdout)}}


def adapter(client: str) -> List[str]:
    if client == "python":
        return [sys.executable, os.path.join(HERE, "adapter_python.py")]
    return ["node", os.path.join(HERE, f"adapter_{'node' if client == 'node' else 'mcp'}.mjs")]


def perform(client: str, op: str, env: dict, args: Optional[dict] = None) -> Answer:
    """One operation by one client, to its end."""
    start = time.monotonic()
    if client == "cli":
        return Answer(run_cli(op, args or {}, env), time.monotonic() - start)
    r = subprocess.run(adapter(client) + [op, json.dumps(args or {})], env=env,
                       capture_output=True, text=True, timeout=120)
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    final = [line for line in lines if "ok" in line or "error" in line]
    assert final, f"{client} {op} answered nothing (exit {r.returncode}):\n{r.stdout}\n{r.stderr}"
    return Answer(final[-1], time.monotonic() - start)


def start_follow(client: str, run_id: str, env: dict) -> subprocess.Popen:
    """A follow of `run_id` by `client`, in the background: its stdout gives one line per event
    (the CLI's JSON lines, the adapters' progress lines), then the adapters' answer."""
    argv = cli_command("follow", {"id": run_id})[0] if client == "cli" else \
        adapter(client) + ["follow", json.dumps({"id": run_id})]
    # stderr to a file: communicate() would read the pipes' descriptors directly and lose what
    # first_event's readline had buffered.
    err = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
    p.err_file = err  # type: ignore[attr-defined]
    return p


def followed(client: str, p: subprocess.Popen, first: str) -> Answer:
    """What a follow started by start_follow answered, once it ended (`first`: the line
    first_event read)."""
    start = time.monotonic()
    out = first + p.stdout.read()  # the same buffered reader first_event read from
    p.wait(timeout=120)
    p.err_file.seek(0)
    err = p.err_file.read()
    if client == "cli":
        if p.returncode != 0:
            return Answer({"error": cli_error(err)}, time.monotonic() - start)
        return Answer({"ok": {"events": cli_events(out)}}, time.monotonic() - start)
    final = [json.loads(line) for line in out.splitlines()
             if line.startswith("{") and ('"ok"' in line or '"error"' in line)]
    assert final, f"{client} follow answered nothing:\n{out}\n{err}"
    return Answer(final[-1], time.monotonic() - start)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


OTHER_TOKEN = "conformance-other-tenant"


@pytest.fixture(scope="module")
def unix_daemon() -> Iterator:
    """The tests' tenant, and another whose sessions the first must not see."""
    tenants = [{"name": name, "token_sha256": hashlib.sha256(token.encode()).hexdigest()}
               for name, token in (("py", TOKEN), ("other", OTHER_TOKEN))]
    with running_daemon(config={"local": UIDS, "tenants": tenants}) as d:
        yield d


@pytest.fixture(scope="module")
def tcp_daemon() -> Iterator:
    """Plain TCP with tenants: only for the address forms, on the loopback."""
    with running_daemon(listen="tcp:127.0.0.1:0", config={
            "allow_plaintext_tokens": True,
            "local": {"uid_base": UIDS["uid_base"] + 16, "uid_count": 16}}) as d:
        yield d


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> str:
    d = str(tmp_path_factory.mktemp("certs"))
    make_certs(d)
    other = os.path.join(d, "other")
    os.mkdir(other)
    make_certs(other)  # another authority, which did not sign the daemon's certificate
    return d


@pytest.fixture(scope="module")
def tls_daemon(certs) -> Iterator:
    with running_daemon(listen="tcp:127.0.0.1:0", config={
            "tls": {"cert_file": f"{certs}/server.pem", "key_file": f"{certs}/server.key"},
            "local": {"uid_base": UIDS["uid_base"] + 32, "uid_count": 16}}) as d:
        yield d


def forms(d_unix, d_tcp) -> Dict[str, str]:
    port = d_tcp.address.rsplit(":", 1)[1]
    return {
        "unix": d_unix.address,
        "tcp": f"tcp:127.0.0.1:{port}",
        "host_port": f"127.0.0.1:{port}",
        "first_down": f"tcp:127.0.0.1:{free_port()},tcp:127.0.0.1:{port}",
    }


@pytest.mark.parametrize("form", ["unix", "tcp", "host_port", "first_down"])
@pytest.mark.parametrize("client", CLIENTS)
def test_address(client, form, unix_daemon, tcp_daemon):
    addr = forms(unix_daemon, tcp_daemon)[form]
    a = perform(client, "exec", client_env(addr, TOKEN))
    assert a.error is None, a
    assert a.ok["exit_code"] == 0 and a.ok["stdout"] == "conform\n", a


@pytest.mark.parametrize("token", [None, "not-the-token"])
@pytest.mark.parametrize("client", CLIENTS)
def test_token(client, token, unix_daemon):
    a = perform(client, "exec", client_env(unix_daemon.address, token))
    assert a.error and a.error["code"] == "UNAUTHENTICATED", a


@pytest.mark.parametrize("client", CLIENTS)
def test_tls(client, tls_daemon, certs):
    good = perform(client, "exec", client_env(tls_daemon.address, TOKEN,
                                              {"SANDGATE_TLS_CA": f"{certs}/ca.pem"}))
    assert good.error is None and good.ok["stdout"] == "conform\n", good
    bad = perform(client, "exec", client_env(tls_daemon.address, TOKEN,
                                             {"SANDGATE_TLS_CA": f"{certs}/other/ca.pem"}))
    assert bad.error and bad.error["code"] == "UNAVAILABLE", bad


@pytest.mark.parametrize("client", CLIENTS)
def test_errors(client, unix_daemon):
    env = client_env(unix_daemon.address, TOKEN)
    run = perform(client, "get_run", env, {"id": "r-conformance-missing"})
    assert run.error and run.error["code"] == "NOT_FOUND", run
    assert "r-conformance-missing" in run.error["message"], run
    for op in ("exec_in", "usage", "ports"):
        session = perform(client, op, env, {"id": "s0123456789abcdef"})
        assert session.error and session.error["code"] == "NOT_FOUND", (op, session)
        assert "s0123456789abcdef" in session.error["message"], (op, session)


@pytest.mark.parametrize("client", CLIENTS)
def test_other_tenant(client, unix_daemon):
    """Another tenant's session is NOT_FOUND, naming the id, as one that does not exist."""
    with sandgate.Client(unix_daemon.address, token=OTHER_TOKEN) as other, \
            other.session() as theirs:
        env = client_env(unix_daemon.address, TOKEN)
        for op in ("exec_in", "usage", "ports"):
            a = perform(client, op, env, {"id": theirs.id})
            assert a.error and a.error["code"] == "NOT_FOUND", (op, a)
            assert theirs.id in a.error["message"], (op, a)


@pytest.mark.parametrize("client", CLIENTS)
def test_usage(client, unix_daemon):
    """A session's usage: its id, and memory measured or named as not measured."""
    with sandgate.Client(unix_daemon.address, token=TOKEN) as c, c.session() as s:
        a = perform(client, "usage", client_env(unix_daemon.address, TOKEN), {"id": s.id})
        assert a.error is None, a
        assert a.ok["session_id"] == s.id, a
        assert a.ok["memory_bytes"] > 0 or any(
            w.startswith("memory") for w in a.ok["unmeasured"]), a
        ports = perform(client, "ports", client_env(unix_daemon.address, TOKEN), {"id": s.id})
        assert ports.error is None and ports.ok["ports"] == [], ports


def slow_run(addr: str, seconds: int) -> sandgate.Run:
    """A run whose setup command keeps it going while its stream is cut."""
    with sandgate.Client(addr, token=TOKEN) as c:
        return c.run_analysis(SAMPLE_CSV, sandbox=sandgate.pb.SandboxSpec(
            setup_commands=[f"sleep {seconds}"]))


def first_event(p: subprocess.Popen) -> str:
    """Waits for the follow's first line (its first event) and returns it."""
    line = p.stdout.readline()
    if not line:
        p.wait()
        p.err_file.seek(0)
        raise AssertionError(f"the follow ended before its first event: {p.err_file.read()}")
    return line


@pytest.mark.parametrize("client", STREAMING)
def test_resume(client, unix_daemon):
    proxy = CuttingProxy(unix_daemon.socket,
                         os.path.join(tempfile.mkdtemp(prefix="sg-cf-"), "p.sock"))
    try:
        run = slow_run(unix_daemon.address, 3)
        p = start_follow(client, run.id, client_env(proxy.address, TOKEN))
        first = first_event(p)
        cuts = 0
        for _ in range(3):  # three breaks, a second apart, while the setup command sleeps
            cuts += proxy.cut()
            time.sleep(1)
        a = followed(client, p, first)
        assert a.error is None, a
        with sandgate.Client(unix_daemon.address, token=TOKEN) as c:
            log = [(e.seq, e.type) for e in c.get_run(run.id).events(follow=False)]
        seen = [(e["seq"], e["type"]) for e in a.ok["events"]]
        assert cuts >= 1 and proxy.connections >= 2, (cuts, proxy.connections)
        assert seen == log and seen[-1][1] == "run.finished", (seen, log)
    finally:
        proxy.close()


@pytest.mark.parametrize("client", STREAMING)
def test_give_up(client, unix_daemon):
    proxy = CuttingProxy(unix_daemon.socket,
                         os.path.join(tempfile.mkdtemp(prefix="sg-cf-"), "p.sock"))
    run = slow_run(unix_daemon.address, 30)
    try:
        p = start_follow(client, run.id, client_env(proxy.address, TOKEN,
                                                    {"SANDGATE_RECONNECT_TIMEOUT": "2"}))
        first = first_event(p)
        start = time.monotonic()
        proxy.close()  # the daemon is now out of reach for good
        a = followed(client, p, first)
        waited = time.monotonic() - start
        assert a.error and a.error["code"] == "UNAVAILABLE", a
        assert waited >= 2, f"gave up after {waited:.1f} s, inside the 2 s window"
        assert waited < 30, f"still trying after {waited:.1f} s"
    finally:
        with sandgate.Client(unix_daemon.address, token=TOKEN) as c:
            c.get_run(run.id).cancel("conformance test done")
