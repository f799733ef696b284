"""The Agents API (beta) of the fake OpenAI server: sessions on `openai_hosted` environments.

Mounted by fake_openai.py (which imports this module at its end); shares its HTTP plumbing,
auth, faults, Files store, clock, scenario and bubblewrap runner. Shapes follow
docs/openai-api.md §7 and the `openai` npm client 7.59.0
(`resources/beta/agents/**`). See README.md ("Agents API") for the script protocol, the
control surface and what is a guess.

A session owns one environment: a workspace directory bound at /workspace in a bubblewrap
sandbox. A worker thread per session provisions it (files, setup commands) and then plays the
turns one at a time; every fact is an event appended to the session's log, which streams read.
All state here is guarded by LOCK (CV wakes the streams).
"""

import base64
import binascii
import copy
import os
import posixpath
import queue
import re
import secrets
import shutil
import socket
import tempfile
import threading
import time

import fake_openai as core
from fake_openai import (ApiError, bad, invalid_type, invalid_value, missing, new_id, not_found,
                         reject_unknown, route, text_pieces, tokens)

BETA = "agents=v1"
WORKSPACE = "/workspace"
OUTPUTS = "/workspace/outputs"
CONTAINER_SIZES = ("small", "medium", "large")
NETWORK_ACCESS = ("enabled", "disabled", "restricted")
MAX_DOMAINS = 100
AGENT_COMMAND_TIMEOUT_MS = 120_000  # an agent harness allows long commands (the analyst's)
SETUP_COMMAND_TIMEOUT_MS = 120_000
HEARTBEAT_S = 5.0
SESSION_KEYS = ("agent", "agent_id", "environment", "input", "metadata", "vault_ids", "stream")
ENV_KEYS = ("type", "container_size", "network", "packages", "files", "setup_commands", "env",
            "skills", "plugins", "capability_directories", "desktop", "environment_template_id")
LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
HOST_RE = re.compile(r"^%s(\.%s)*$" % (LABEL, LABEL))
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TURN_END_EVENTS = ("agent.session.turn.completed", "agent.session.turn.failed",
                   "agent.session.turn.cancelled")
PROXY_PORT = 3128  # inside a restricted sandbox, as the daemon's local provider does
PROXY_MOUNT = "/run/fake-proxy"
# What a hosted Linux box has in /etc that commands look at (the OS name; with a network, name
# resolution and CA certificates), read-only from the host when present.
ETC_BINDS = ("/etc/os-release", "/etc/hosts", "/etc/resolv.conf", "/etc/nsswitch.conf",
             "/etc/ssl", "/etc/ca-certificates")

LOCK = threading.RLock()
CV = threading.Condition(LOCK)


class Registry:
    """Every session, environment and artifact; the agent faults. Guarded by LOCK."""

    def __init__(self):
        self.sessions = {}  # id -> session record
        self.environments = {}  # id -> environment record
        self.faults = []  # {"kind", "after_commands", "times", "code", "message"}
        self.leave_network_open = False
        self.stream = default_stream()  # POST /_fake/agents/stream


def default_stream():
    """How GET …/events behaves: replay from the last rest (the default) or live only; hold
    the next N streams until their session rests; cut a stream right after an event type."""
    return {"replay": True, "hold_next": 0, "cut_after_type": None, "cut_times": 0}


REG = Registry()


def now():
    return core.STATE.now()


def register(oid):
    """Gives an id its place in cursor order (lock order: LOCK, then STATE.lock)."""
    with core.STATE.lock:
        core.STATE.register(oid)


# --------------------------------------------------------------------------------------------
# validation of POST /agents/sessions


def check_beta(h):
    values = [v.strip() for v in (h.headers.get("OpenAI-Beta") or "").split(",")]
    if BETA not in values:
        raise bad("The Agents API is in beta: send the header 'OpenAI-Beta: %s'." % BETA,
                  param="OpenAI-Beta", code="missing_beta_header")


def agents_route(method, pattern):
    """A /v1/agents route: the beta header is checked after auth and faults (as handle_any
    runs them), before the handler."""
    def deco(fn):
        def wrapped(h, *args):
            check_beta(h)
            return fn(h, *args)
        route(method, pattern)(wrapped)
        return fn
    return deco


def str_list(v, p):
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise invalid_type(p, "an array of strings")
    return list(v)


def validate_domains(v, p):
    doms = str_list(v, p)
    for i, d in enumerate(doms):
        if "*" in d:
            raise invalid_value("%s[%d]" % (p, i),
                                "'%s': wildcards are not supported, list exact host names." % d)
        if not HOST_RE.match(d) or len(d) > 253:
            raise invalid_value("%s[%d]" % (p, i), "'%s' is not a host name." % d)
    return [d.lower() for d in doms]


def validate_network(n):
    p = "environment.network"
    if n is None:
        return {"access": "enabled", "allowed_domains": [], "blocked_domains": []}  # beta default
    if not isinstance(n, dict):
        raise invalid_type(p, "an object")
    reject_unknown(n, ("access", "allowed_domains", "blocked_domains"), p + ".")
    access = n.get("access")
    if access is None:
        raise missing(p + ".access")
    if access not in NETWORK_ACCESS:
        raise invalid_value(p + ".access", "expected one of %s." % ", ".join(NETWORK_ACCESS))
    allowed = validate_domains(n.get("allowed_domains"), p + ".allowed_domains")
    blocked = validate_domains(n.get("blocked_domains"), p + ".blocked_domains")
    if access == "restricted":
        if not allowed:
            raise invalid_value(p + ".allowed_domains", "'restricted' needs 1 to %d host names."
                                % MAX_DOMAINS)
        if len(allowed) > MAX_DOMAINS:
            raise invalid_value(p + ".allowed_domains", "at most %d host names." % MAX_DOMAINS)
        both = sorted(set(allowed) & set(blocked))
        if both:
            raise invalid_value(p + ".blocked_domains", "'%s' is also allowed." % both[0])
    else:
        if allowed:
            raise invalid_value(p + ".allowed_domains", "only with access 'restricted'.")
        if blocked:
            raise invalid_value(p + ".blocked_domains", "only with access 'restricted'.")
    return {"access": access, "allowed_domains": allowed, "blocked_domains": blocked}


def workspace_path(path, p):
    if not isinstance(path, str) or not path:
        raise missing(p)
    norm = posixpath.normpath(path)
    if not path.startswith("/") or not norm.startswith(WORKSPACE + "/") or "\x00" in path:
        raise invalid_value(p, "'%s' is not a path under %s/." % (path, WORKSPACE))
    return norm


def validate_files(files):
    out = []
    for i, f in enumerate(files or []):
        p = "environment.files[%d]" % i
        if not isinstance(f, dict):
            raise invalid_type(p, "an object")
        path = workspace_path(f.get("path"), p + ".path")
        t = f.get("type")
        if t == "inline":
            if not isinstance(f.get("data"), str):
                raise missing(p + ".data")
            try:
                data = base64.b64decode(f["data"], validate=True)
            except (binascii.Error, ValueError):
                raise invalid_value(p + ".data", "not valid base64.")
            out.append({"type": "inline", "path": path, "data": data})
        elif t == "file_id":
            fid = f.get("file_id")
            if not isinstance(fid, str):
                raise missing(p + ".file_id")
            with core.STATE.lock:
                try:
                    data = core.STATE.live_file(fid)["data"]
                except ApiError:
                    raise ApiError(404, "No such File object: %s" % fid, param=p + ".file_id")
            out.append({"type": "file_id", "file_id": fid, "path": path, "data": data})
        else:
            raise invalid_value(p + ".type", "expected 'inline' or 'file_id'.")
    return out


def validate_env_vars(env):
    if env is None:
        return {}
    if not isinstance(env, dict):
        raise invalid_type("environment.env", "an object of strings")
    for k, v in env.items():
        p = "environment.env.%s" % k
        if not ENV_NAME_RE.match(k):
            raise invalid_value(p, "not a variable name.")
        if k in ("PATH", "OPENAI_API_KEY") or k.startswith("CODEX_"):
            raise invalid_value(p, "'%s' cannot be set." % k)
        if not isinstance(v, str):
            raise invalid_type(p, "a string")
    return dict(env)


def validate_setup(cmds):
    out = []
    for i, c in enumerate(cmds or []):
        p = "environment.setup_commands[%d]" % i
        if not isinstance(c, dict):
            raise invalid_type(p, "an object")
        if not isinstance(c.get("command"), str) or not c["command"]:
            raise missing(p + ".command")
        cwd = c.get("cwd") or WORKSPACE
        if not isinstance(cwd, str) or not cwd.startswith("/"):
            raise invalid_value(p + ".cwd", "expected an absolute path.")
        out.append({"command": c["command"], "cwd": posixpath.normpath(cwd)})
    return out


def validate_environment(e):
    if e is None:
        raise missing("environment")
    if not isinstance(e, dict):
        raise invalid_type("environment", "an object")
    t = e.get("type")
    if t is None:
        raise missing("environment.type")
    if t != "openai_hosted":
        raise invalid_value("environment.type", "the fake serves only 'openai_hosted' (got %r)."
                            % (t,))
    reject_unknown(e, ENV_KEYS, "environment.")
    if e.get("environment_template_id") is not None:
        raise invalid_value("environment.environment_template_id",
                            "the fake has no environment templates.")
    size = e.get("container_size")
    if size is None:
        size = "medium"
    if size not in CONTAINER_SIZES:
        raise invalid_value("environment.container_size",
                            "expected one of %s." % ", ".join(CONTAINER_SIZES))
    pk = e.get("packages") or {}
    if not isinstance(pk, dict):
        raise invalid_type("environment.packages", "an object")
    packages = {k: str_list(pk.get(k), "environment.packages." + k)
                for k in ("npm", "python", "system")}
    for k in ("skills", "plugins", "capability_directories"):
        if e.get(k) is not None and not isinstance(e[k], list):
            raise invalid_type("environment." + k, "an array")
    return {"container_size": size, "network": validate_network(e.get("network")),
            "packages": packages, "files": validate_files(e.get("files")),
            "env": validate_env_vars(e.get("env")),
            "setup": validate_setup(e.get("setup_commands")),
            "capability_directories": str_list(e.get("capability_directories"),
                                               "environment.capability_directories")}


def input_messages(v, p):
    """The input of a session or an input.message event: a string or a message list. Returns
    the message list (user role) and its text."""
    if isinstance(v, str):
        v = [{"role": "user", "content": [{"type": "input_text", "text": v}]}]
    if not isinstance(v, list) or not v:
        raise invalid_type(p, "a string or a non-empty array of messages")
    texts = []
    for i, m in enumerate(v):
        q = "%s[%d]" % (p, i)
        if not isinstance(m, dict):
            raise invalid_type(q, "an object")
        content = m.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        if not isinstance(content, list):
            raise missing(q + ".content")
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise invalid_type("%s.content[%d]" % (q, j), "an object with a type")
            if part["type"] == "input_text":
                if not isinstance(part.get("text"), str):
                    raise missing("%s.content[%d].text" % (q, j))
                texts.append(part["text"])
    return v, "\n".join(texts)


# --------------------------------------------------------------------------------------------
# objects


def usage_of(inp, out):
    return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": inp + out}


def env_state(env):
    o = env["obj"]
    return {"id": o["id"], "error": env["error"], "status": o["status"], "type": o["type"]}


def session_view(s):
    return copy.deepcopy(s["obj"])


def emit(s, type_, **fields):
    """Appends an event to the session's log (caller holds LOCK) and wakes the streams."""
    ev = {"type": type_, "event_id": new_id("evt_")}
    if not type_.startswith("agent.session.") or type_.split(".")[2] not in (
            "created", "in_progress", "idle", "failed", "requires_action"):
        ev["session_id"] = s["obj"]["id"]
    ev.update(fields)
    s["events"].append(ev)
    if type_ in ("agent.session.idle", "agent.session.failed"):
        s["last_rest"] = len(s["events"]) - 1
    s["obj"]["last_active_at"] = now()
    CV.notify_all()
    return ev


def set_status(s, status, error=None):
    s["obj"]["status"] = status
    if error is not None:
        s["obj"]["error"] = error
    emit(s, "agent.session." + status, session=session_view(s))


# --------------------------------------------------------------------------------------------
# the sandbox


def sandbox_argv(env, cmd, cwd=WORKSPACE):
    """bwrap argv for one command in an environment (None without bwrap: run unisolated)."""
    if not core.STATE.use_bwrap:
        return None
    access = env["network"]["access"]
    share_net = access == "enabled" or (access == "disabled" and REG.leave_network_open)
    extra = [a for p in ETC_BINDS for a in ("--ro-bind-try", p, p)]
    if access == "restricted" and env["proxy"] is not None:
        extra += ["--ro-bind", env["proxy"].dir, PROXY_MOUNT]
        argv = core.bwrap_argv(env["dir"], PROXY_WRAPPER, mount=WORKSPACE, cwd=cwd, extra=extra)
        return argv + ["fake-proxy", cmd]
    return core.bwrap_argv(env["dir"], cmd, mount=WORKSPACE, cwd=cwd, share_net=share_net,
                           extra=extra)


def sandbox_env(env):
    e = dict(core.SANDBOX_ENV, HOME=WORKSPACE)
    e.update(env["vars"])
    if env["network"]["access"] == "restricted":
        url = "http://127.0.0.1:%d" % PROXY_PORT
        for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
            e[k] = url
    return e


def run_in(env, cmd, timeout_ms, on_chunk=None, cancel=None, cwd=WORKSPACE):
    with core.STATE.lock:
        core.STATE.running_commands += 1
    try:
        return core.run_command(env["dir"], cmd, timeout_ms, core.STATE.use_bwrap, on_chunk,
                                cancel, argv=sandbox_argv(env, cmd, cwd), env=sandbox_env(env))
    finally:
        with core.STATE.lock:
            core.STATE.running_commands -= 1


def write_workspace_file(env, path, data):
    full = os.path.join(env["dir"], os.path.relpath(path, WORKSPACE))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    if os.path.islink(full) or os.path.isdir(full):
        raise OSError("a directory or link is in the way at %s" % path)
    with open(full, "wb") as fh:
        fh.write(data)


def wipe_workspace(env):
    shutil.rmtree(env["dir"], ignore_errors=True)
    os.makedirs(env["dir"], exist_ok=True)
    os.chmod(env["dir"], 0o777)


# ---- restricted network: a proxy on the host, reached through a Unix socket bound into the
# sandbox, where a forwarder listens on 127.0.0.1:3128 (the sandbox has no other route).

FORWARDER = r'''import os, socket, sys, threading
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", int(sys.argv[1]))); ls.listen(64)
open(sys.argv[3], "w").close()
def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d: break
            b.sendall(d)
    except OSError: pass
    finally:
        for s in (a, b):
            try: s.shutdown(socket.SHUT_RDWR)
            except OSError: pass
def serve(c):
    u = socket.socket(socket.AF_UNIX)
    try: u.connect(sys.argv[2])
    except OSError: c.close(); return
    threading.Thread(target=pipe, args=(c, u), daemon=True).start(); pipe(u, c)
while True:
    c, _ = ls.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
'''

# Runs "$1" with the forwarder up; the sandbox's own network namespace ends it.
PROXY_WRAPPER = (
    "python3 %(m)s/forward.py %(p)d %(m)s/proxy.sock /tmp/.fake-proxy-ready "
    "</dev/null >/dev/null 2>&1 & i=0; "
    "while [ ! -e /tmp/.fake-proxy-ready ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; "
    "/bin/sh -c \"$1\"" % {"m": PROXY_MOUNT, "p": PROXY_PORT})


class RestrictedProxy:
    """CONNECT host:port and absolute-form http:// requests; 403 for hosts not allowed. One per
    restricted environment; thread per connection. Decisions are kept for /_fake/state."""

    def __init__(self, root, allowed, blocked):
        self.dir = tempfile.mkdtemp(prefix="agents-proxy-", dir=root)
        os.chmod(self.dir, 0o755)
        with open(os.path.join(self.dir, "forward.py"), "w") as f:
            f.write(FORWARDER)
        self.allowed, self.blocked = set(allowed), set(blocked)
        self.decisions = []
        self.sock = socket.socket(socket.AF_UNIX)
        path = os.path.join(self.dir, "proxy.sock")
        self.sock.bind(path)
        os.chmod(path, 0o777)
        self.sock.listen(64)
        self.closed = False
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def close(self):
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def accept_loop(self):
        while not self.closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        c.settimeout(30)
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 8192:
                d = c.recv(4096)
                if not d:
                    return
                head += d
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = line.split(" ")
            if len(parts) != 3:
                return self.answer(c, 400, "bad-request")
            method, target, _ = parts
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                rest = head[head.index(b"\r\n\r\n") + 4:]
            elif target.startswith("http://"):
                hostport = target[len("http://"):].split("/", 1)[0]
                host, port = hostport.rsplit(":", 1) if ":" in hostport else (hostport, "80")
                path = "/" + target[len("http://"):].split("/", 1)[1] if "/" in target[7:] else "/"
                rest = head.replace(target.encode("latin-1"), path.encode("latin-1"), 1)
            else:
                return self.answer(c, 400, "bad-request")
            host = host.strip("[]").lower()
            ok = host in self.allowed and host not in self.blocked
            with LOCK:
                self.decisions.append({"host": host, "port": int(port or 0), "allowed": ok})
            if not ok:
                return self.answer(c, 403, "blocked-by-allowlist")
            try:
                up = socket.create_connection((host, int(port)), timeout=10)
            except (OSError, ValueError):
                return self.answer(c, 502, "connect-failed")
            if method == "CONNECT":
                c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                up.sendall(rest)
            c.settimeout(None)
            up.settimeout(None)
            t = threading.Thread(target=pump, args=(c, up), daemon=True)
            t.start()
            pump(up, c)
            t.join(timeout=30)
        except OSError:
            pass
        finally:
            c.close()

    @staticmethod
    def answer(c, status, reason):
        text = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
        c.sendall(("HTTP/1.1 %d %s\r\nX-Proxy-Error: %s\r\nContent-Length: 0\r\n"
                   "Connection: close\r\n\r\n" % (status, text, reason)).encode())


def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    finally:
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass


# --------------------------------------------------------------------------------------------
# the scripted agent

FENCE_RE = re.compile(r"^```[A-Za-z]*[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def script_of(text):
    """The commands an input asks for: each fenced block (```sh … ```) is one command, and so
    is each line starting with "$ " outside a block; in order of appearance."""
    cmds = []
    pos = 0
    for m in FENCE_RE.finditer(text):
        cmds += [ln[2:] for ln in text[pos:m.start()].splitlines() if ln.startswith("$ ")]
        body = m.group(1).rstrip("\n")
        if body.strip():
            cmds.append(body)
        pos = m.end()
    cmds += [ln[2:] for ln in text[pos:].splitlines() if ln.startswith("$ ")]
    return cmds


def plan_turn(s, text):
    """What the turn does: [("shell", cmds, timeout_ms) …] then ("message", text) or
    ("fail", {code, message}). The input's own commands win; else the loaded scenario plays on
    from where the session's last turn stopped (its shell turns until a message or fail)."""
    cmds = script_of(text)
    if cmds:
        return [("shell", cmds, AGENT_COMMAND_TIMEOUT_MS)], ("message", None)
    with core.STATE.lock:
        turns = list(core.STATE.turns)
    steps = []
    while s["scenario_at"] < len(turns):
        t = turns[s["scenario_at"]]
        s["scenario_at"] += 1
        if "shell" in t:
            steps.append(("shell", t["shell"], t.get("timeout_ms") or AGENT_COMMAND_TIMEOUT_MS))
            continue
        if "message" in t:
            return steps, ("message", t["message"])
        if "fail" in t:
            return steps, ("fail", t["fail"])
        steps.append(("skip", None, None))  # function/incomplete turns mean nothing here
    if steps:
        return steps, ("message", "Done.")
    return [], ("message", "[fake-openai agents: the input has no commands (lines starting "
                           "with '$ ' or ``` blocks) and the scenario has no turn %d]"
                % s["scenario_at"])


class TurnAborted(Exception):
    def __init__(self, kind, code=None, message=None):
        super().__init__(message or kind)
        self.kind, self.code, self.message = kind, code, message


def take_agent_fault(sid, commands_done):
    with LOCK:
        for f in REG.faults:
            if f["session_id"] not in (None, sid):
                continue
            if f["times"] > 0 and commands_done >= f["after_commands"]:
                f["times"] -= 1
                return dict(f)
    return None


def apply_agent_fault(s, env, turn, commands_done):
    f = take_agent_fault(s["obj"]["id"], commands_done)
    if f is None:
        return
    if f["kind"] == "environment_reset":
        with LOCK:
            env["reset_count"] += 1
            wipe_workspace(env)
            emit(s, "agent.session.environment.reset", environment_id=env["obj"]["id"],
                 reset_count=env["reset_count"], turn_id=turn["id"])
    elif f["kind"] == "environment_expired":
        with LOCK:
            expire_environment(env, turn["id"])
        raise TurnAborted("expired", "sandbox_error", "The environment expired.")
    elif f["kind"] == "turn_failed":
        raise TurnAborted("failed", f.get("code") or "server_error",
                          f.get("message") or "The turn failed.")


def expire_environment(env, turn_id=None):
    """The environment and its files are gone (caller holds LOCK); artifacts stay."""
    if env["obj"]["status"] == "expired":
        return
    env["obj"]["status"] = "expired"
    env["error"] = {"code": "environment_expired", "message": "The environment expired.",
                    "type": "invalid_request_error"}
    shutil.rmtree(env["dir"], ignore_errors=True)
    if env["proxy"] is not None:
        env["proxy"].close()
        env["proxy"] = None
    s = REG.sessions.get(env["session_id"])
    if s is not None:
        emit(s, "agent.session.environment.expired", environment=env_state(env), turn_id=turn_id)
        if s["obj"]["status"] != "in_progress":  # a running turn fails first, then the session
            set_status(s, "failed", "The environment expired.")


def add_item(s, turn, item):
    with LOCK:
        idx = len(turn["items"])
        register(item["id"])
        turn["items"].append(item)
        s["items"].append(item)
        emit(s, "agent.session.turn.item.added", item=copy.deepcopy(item), output_index=idx,
             turn_id=turn["id"])
    return idx


def done_item(s, turn, idx):
    with LOCK:
        emit(s, "agent.session.turn.item.done", item=copy.deepcopy(turn["items"][idx]),
             output_index=idx, turn_id=turn["id"])


def run_agent_command(s, env, turn, cmd, timeout_ms):
    item = {"type": "command_execution", "id": new_id("cmd_"), "command": cmd, "cwd": WORKSPACE,
            "duration_ms": None, "exit_code": None, "output": "", "status": "in_progress",
            "turn_id": turn["id"]}
    idx = add_item(s, turn, item)
    t0 = time.monotonic()

    def on_chunk(_name, text):
        with LOCK:
            item["output"] += text
            emit(s, "agent.output.command_execution_output.delta", item_id=item["id"],
                 delta=text, output_index=idx, turn_id=turn["id"])
    _, _, outcome = run_in(env, cmd, timeout_ms, on_chunk, turn["cancel"])
    with LOCK:
        item["duration_ms"] = int((time.monotonic() - t0) * 1000)
        if outcome["type"] == "exit":
            item["exit_code"] = outcome["exit_code"]
        item["status"] = "completed" if item["exit_code"] == 0 else "failed"
        turn["last_exit"] = item["exit_code"]
    done_item(s, turn, idx)
    turn["out_tokens"] += tokens(cmd) + 4


def say(s, turn, text):
    item = {"type": "message", "id": new_id("msg_"), "role": "assistant", "phase": "final_answer",
            "status": "in_progress", "content": [], "turn_id": turn["id"]}
    idx = add_item(s, turn, item)
    with LOCK:
        part = {"type": "output_text", "text": "", "annotations": []}
        emit(s, "agent.session.turn.content_part.added", item_id=item["id"], output_index=idx,
             content_index=0, part=part, turn_id=turn["id"])
        for piece in text_pieces(text):
            if piece:
                emit(s, "agent.session.turn.output_text.delta", item_id=item["id"],
                     output_index=idx, content_index=0, delta=piece, turn_id=turn["id"])
        emit(s, "agent.session.turn.output_text.done", item_id=item["id"], output_index=idx,
             content_index=0, text=text, turn_id=turn["id"])
        part = {"type": "output_text", "text": text, "annotations": []}
        item["content"].append(part)
        emit(s, "agent.session.turn.content_part.done", item_id=item["id"], output_index=idx,
             content_index=0, part=copy.deepcopy(part), turn_id=turn["id"])
        item["status"] = "completed"
    done_item(s, turn, idx)
    turn["out_tokens"] += tokens(text)


def play_turn(s, turn):
    env = REG.environments[s["env_id"]]
    with LOCK:
        if turn["cancel"].is_set():
            return finish_turn(s, turn, "cancelled")
        turn["obj"]["status"] = "in_progress"
        turn["obj"]["started_at"] = now()
        if s["obj"]["status"] != "in_progress":
            set_status(s, "in_progress")
        emit(s, "agent.session.turn.in_progress", turn=copy.deepcopy(turn["obj"]),
             turn_id=turn["id"])
        steps, final = plan_turn(s, turn["text"])
    done = 0
    try:
        if env["obj"]["status"] == "expired":
            raise TurnAborted("expired", "sandbox_error", "The environment expired.")
        for kind, cmds, timeout_ms in steps:
            for cmd in (cmds if kind == "shell" else []):
                apply_agent_fault(s, env, turn, done)
                if env["obj"]["status"] == "expired":
                    raise TurnAborted("expired", "sandbox_error", "The environment expired.")
                if turn["cancel"].is_set():
                    raise TurnAborted("cancelled")
                run_agent_command(s, env, turn, cmd, timeout_ms)
                done += 1
        apply_agent_fault(s, env, turn, done)
        if turn["cancel"].is_set():
            raise TurnAborted("cancelled")
        if final[0] == "fail":
            raise TurnAborted("failed", final[1].get("code", "server_error"),
                              final[1].get("message", "The model failed."))
        say(s, turn, final[1] if final[1] is not None else
            "Ran %d command(s); the last exited with %s." % (done, turn["last_exit"]))
    except TurnAborted as e:
        if e.kind == "cancelled":
            return finish_turn(s, turn, "cancelled")
        return finish_turn(s, turn, "failed", {"code": e.code, "message": e.message},
                           session_failed=(e.kind == "expired"))
    publish_outputs(s, env, turn)
    return finish_turn(s, turn, "completed")


def finish_turn(s, turn, status, error=None, session_failed=False):
    with LOCK:
        o = turn["obj"]
        o["status"], o["error"], o["completed_at"] = status, error, now()
        o["usage"] = usage_of(tokens(turn["text"]) + 8, turn["out_tokens"])
        u = s["obj"]["usage"] or usage_of(0, 0)
        s["obj"]["usage"] = usage_of(u["input_tokens"] + o["usage"]["input_tokens"],
                                     u["output_tokens"] + o["usage"]["output_tokens"])
        emit(s, "agent.session.turn." + status, turn=copy.deepcopy(o), turn_id=turn["id"],
             usage=copy.deepcopy(o["usage"]))
        env = REG.environments.get(s["env_id"])
        if session_failed or (env is not None and env["obj"]["status"] == "expired"):
            set_status(s, "failed", "The environment expired.")
        elif s["queue"].empty():
            set_status(s, "idle")


def publish_outputs(s, env, turn):
    """Regular files under /workspace/outputs (no symlinks followed) become artifacts: a path
    is published again only when its bytes changed since its last artifact."""
    base = os.path.join(env["dir"], "outputs")
    if not os.path.isdir(base) or os.path.islink(base):
        return
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames.sort()
        for fn in sorted(filenames):
            full = os.path.join(dirpath, fn)
            if os.path.islink(full) or not os.path.isfile(full):
                continue
            with open(full, "rb") as fh:
                data = fh.read()
            path = OUTPUTS + "/" + os.path.relpath(full, base).replace(os.sep, "/")
            with LOCK:
                if s["published"].get(path) == data:
                    continue
                s["published"][path] = data
                aid = new_id("art_")
                disk = os.path.join(s["artifact_dir"], aid)
                with open(disk, "wb") as fh:
                    fh.write(data)
                obj = {"id": aid, "object": "agent.session.artifact", "path": path,
                       "size_bytes": len(data), "created_at": now(),
                       "environment_id": env["obj"]["id"], "session_id": s["obj"]["id"],
                       "turn_id": turn["id"]}
                register(aid)
                s["artifacts"][aid] = {"obj": obj, "disk": disk}


def provision(s):
    """Files, then setup commands in order; a failing one fails the session (its output and the
    command itself are confidential: neither is echoed)."""
    env = REG.environments[s["env_id"]]
    with LOCK:
        emit(s, "agent.session.environment.pending", environment=env_state(env), turn_id=None)
    try:
        for f in env["files"]:
            write_workspace_file(env, f["path"], f["data"])
    except OSError as e:
        return fail_environment(s, env, "file_write_failed", "Cannot write a file: %s" % e)
    if env["network"]["access"] == "restricted":
        env["proxy"] = RestrictedProxy(core.STATE.root, env["network"]["allowed_domains"],
                                       env["network"]["blocked_domains"])
    for i, c in enumerate(env["setup"]):
        if s["deleted"]:
            return False
        _, _, outcome = run_in(env, c["command"], SETUP_COMMAND_TIMEOUT_MS, cancel=s["stop"],
                               cwd=c["cwd"])
        if outcome["type"] != "exit" or outcome["exit_code"] != 0:
            how = ("timed out" if outcome["type"] == "timeout"
                   else "exited with code %d" % outcome["exit_code"])
            return fail_environment(s, env, "setup_command_failed",
                                    "Setup command %d of %d %s." % (i + 1, len(env["setup"]), how))
    with LOCK:
        env["obj"]["status"] = "ready"
        emit(s, "agent.session.environment.ready", environment=env_state(env), turn_id=None)
    return True


def fail_environment(s, env, code, message):
    with LOCK:
        env["obj"]["status"] = "failed"
        env["error"] = {"code": code, "message": message, "type": "invalid_request_error"}
        emit(s, "agent.session.environment.failed", environment=env_state(env), turn_id=None)
        emit(s, "error", error={"code": code, "message": message, "param": None,
                                "type": "invalid_request_error"})
        for turn in s["turns"].values():
            if turn["obj"]["status"] == "queued":
                turn["obj"]["status"] = "failed"
                turn["obj"]["error"] = {"code": "sandbox_error", "message": message}
        set_status(s, "failed", message)
    return False


def worker(s):
    if not provision(s):
        return
    with LOCK:
        if s["queue"].empty() and s["obj"]["status"] != "failed":
            set_status(s, "idle")
    while True:
        turn = s["queue"].get()
        if turn is None:
            return
        if s["obj"]["status"] == "failed":
            with LOCK:
                turn["obj"]["status"] = "failed"
                turn["obj"]["error"] = {"code": "sandbox_error",
                                        "message": s["obj"]["error"] or "The session failed."}
                emit(s, "agent.session.turn.failed", turn=copy.deepcopy(turn["obj"]),
                     turn_id=turn["id"], usage=None)
            continue
        try:
            play_turn(s, turn)
        except Exception as e:  # noqa: BLE001 - a bug in the fake fails the turn, not the server
            import traceback
            traceback.print_exc()
            finish_turn(s, turn, "failed", {"code": "internal_error", "message": str(e)})


def new_turn(s, messages, text):
    """Queues a turn (caller holds LOCK)."""
    tid = new_id("turn_")
    obj = {"id": tid, "object": "agent.session.turn", "status": "queued", "created_at": now(),
           "started_at": None, "completed_at": None, "error": None, "usage": None,
           "agent_id": s["obj"]["agent"]["id"], "session_id": s["obj"]["id"], "subagent_id": None}
    turn = {"id": tid, "obj": obj, "text": text, "items": [], "cancel": threading.Event(),
            "out_tokens": 0, "last_exit": None}
    register(tid)
    s["turns"][tid] = turn
    for m in messages:
        s["items"].append({"type": "message", "id": new_id("msg_"), "role": "user",
                           "phase": None, "status": "completed", "turn_id": tid,
                           "content": copy.deepcopy(m.get("content"))})
        register(s["items"][-1]["id"])
    if s["obj"]["status"] == "idle":
        set_status(s, "in_progress")
    emit(s, "agent.session.turn.created", turn=copy.deepcopy(obj), turn_id=tid)
    s["queue"].put(turn)
    return turn


# --------------------------------------------------------------------------------------------
# streams


def stream_events(h, s, start, until_rest, obfuscate=True):
    """Writes the session's events from index `start`, then live ones as they come. Ends after
    the first idle/failed event when `until_rest` (the create stream), else when the session is
    deleted or has failed, or when the client hangs up; quiet streams get SSE comments. Each
    written event gets random `obfuscation` padding unless the client opted out (npm 7.59.0:
    `include_obfuscation`, default true), so clients are seen to ignore it."""
    drop = core.STATE.take_fault(h.command, h.path_only, ("drop",))
    if start is None:  # GET …/events: held, and from where, per POST /_fake/agents/stream
        start = subscribe(s)
    h.start_stream()
    sink = core.EventSink(h, drop_after=(drop.get("after_frames", 3) if drop else None))
    i = start
    while not sink.dead:
        with CV:
            if i >= len(s["events"]) and not s["deleted"]:
                CV.wait(timeout=HEARTBEAT_S)
            batch = s["events"][i:]
            i += len(batch)
            gone = s["deleted"]
        if not batch:
            if gone:
                break
            sink._write_frame(b": keep-alive\n\n")
            continue
        end = False
        for ev in batch:
            pad = secrets.token_urlsafe(1 + secrets.randbelow(12)) if obfuscate else None
            sink.replay(dict(ev, obfuscation=pad) if pad else ev)
            if take_cut(ev["type"]):
                with sink.lock:  # the event went out whole; the body never ends
                    if not sink.dead:
                        h.abort_connection()
                        sink.dead = True
                break
            if ev["type"] == "agent.session.failed" or (
                    until_rest and ev["type"] == "agent.session.idle"):
                end = True
                break
        if end:
            break
    if not sink.dead:
        h.end_stream()


# --------------------------------------------------------------------------------------------
# routes


def resting(s):
    return s["deleted"] or s["obj"]["status"] in ("idle", "failed")


def subscribe(s):
    """Where a GET …/events stream starts: the last rest (replay) or the live end. A held
    stream is answered only once its session rests (at most 120 s), so what the session did
    meanwhile falls in the client's gap."""
    with LOCK:
        hold = REG.stream["hold_next"] > 0
        if hold:
            REG.stream["hold_next"] -= 1
    if hold:
        deadline = time.monotonic() + 120
        with CV:
            while not resting(s) and time.monotonic() < deadline:
                CV.wait(timeout=1.0)
    with LOCK:
        return s["last_rest"] if REG.stream["replay"] else len(s["events"])


def take_cut(type_):
    with LOCK:
        st = REG.stream
        if st["cut_times"] > 0 and st["cut_after_type"] == type_:
            st["cut_times"] -= 1
            return True
    return False


def session_of(sid):
    s = REG.sessions.get(sid)
    if s is None or s["deleted"]:
        raise not_found("No session found with id '%s'." % sid, param="session_id")
    return s


@agents_route("POST", "/v1/agents/sessions")
def sessions_create(h):
    body = h.json_body()
    reject_unknown(body, SESSION_KEYS)
    if body.get("agent_id") is not None:
        raise invalid_value("agent_id", "the fake has no stored agents; pass 'agent'.")
    agent = body.get("agent")
    if not isinstance(agent, dict):
        raise missing("agent") if agent is None else invalid_type("agent", "an object")
    if not isinstance(agent.get("model"), str) or not agent["model"]:
        raise missing("agent.model")
    envp = validate_environment(body.get("environment"))
    stream = bool(body.get("stream"))
    messages, text = None, None
    if body.get("input") is not None:
        messages, text = input_messages(body["input"], "input")
    elif stream:
        raise missing("input")  # required for streaming creates on hosted environments
    md = body.get("metadata") or {}
    if not isinstance(md, dict) or len(md) > 16 or not all(
            isinstance(v, str) for v in md.values()):
        raise invalid_value("metadata", "at most 16 string pairs.")
    t = now()
    sid, eid = new_id("sess_"), new_id("env_")
    d = tempfile.mkdtemp(prefix="agents-" + eid + "-", dir=core.STATE.root)
    os.chmod(d, 0o777)
    files_echo = []
    for f in envp["files"]:
        e = {"type": f["type"], "id": new_id("envfile_"), "path": f["path"],
             "size_bytes": len(f["data"])}
        if f["type"] == "file_id":
            e["file_id"] = f["file_id"]
        files_echo.append(e)
    net = envp["network"]
    env_obj = {"id": eid, "object": "agent.environment", "type": "openai_hosted",
               "status": "pending", "files": files_echo, "plugins": [], "skills": [],
               "session_id": sid, "created_at": t}
    env = {"obj": env_obj, "dir": d, "files": envp["files"], "setup": envp["setup"],
           "vars": envp["env"], "network": net, "proxy": None, "error": None,
           "reset_count": 0, "session_id": sid}
    obj = {"id": sid, "object": "agent.session", "status": "idle", "created_at": t,
           "last_active_at": t, "error": None, "metadata": md, "required_actions": [],
           "usage": None, "vault_ids": list(body.get("vault_ids") or []),
           "agent": {"id": new_id("agent_"), "model": agent["model"],
                     "instructions": agent.get("instructions"), "name": agent.get("name"),
                     "tools": agent.get("tools") or [], "reasoning": agent.get("reasoning") or {},
                     "text": agent.get("text") or {}, "multi_agent": agent.get("multi_agent") or {},
                     "service_tier": agent.get("service_tier") or "auto"},
           "environment": {"type": "openai_hosted", "id": eid,
                           "container_size": envp["container_size"],
                           "network": {"access": net["access"],
                                       "allowed_domains": net["allowed_domains"]},
                           "packages": envp["packages"], "plugins": [], "skills": [],
                           "capability_directories": envp["capability_directories"],
                           "files": files_echo}}
    art_dir = tempfile.mkdtemp(prefix="agents-artifacts-" + sid + "-", dir=core.STATE.root)
    s = {"obj": obj, "env_id": eid, "events": [], "last_rest": 0, "turns": {}, "items": [],
         "artifacts": {}, "published": {}, "artifact_dir": art_dir, "queue": queue.Queue(),
         "deleted": False, "stop": threading.Event(), "scenario_at": 0, "idempotency": set(),
         "thread": None}
    with LOCK:
        register(sid)
        REG.sessions[sid] = s
        REG.environments[eid] = env
        emit(s, "agent.session.created", session=session_view(s))
        if messages is not None:
            new_turn(s, messages, text)
        snap = session_view(s)
        s["thread"] = threading.Thread(target=worker, args=(s,), daemon=True)
        s["thread"].start()
    if stream:
        return stream_events(h, s, 0, until_rest=True)
    h.send_json(200, snap)


@agents_route("GET", "/v1/agents/sessions")
def sessions_list(h):
    with LOCK:
        items = [session_view(s) for s in REG.sessions.values() if not s["deleted"]]
        page = core.STATE.paginate(items, h.query, 20, 100)
    h.send_json(200, page)


@agents_route("GET", "/v1/agents/sessions/([^/]+)")
def sessions_get(h, sid):
    with LOCK:
        snap = session_view(session_of(sid))
    h.send_json(200, snap)


@agents_route("POST", "/v1/agents/sessions/([^/]+)")
def sessions_update(h, sid):
    body = h.json_body()
    with LOCK:
        s = session_of(sid)
        reject_unknown(body, ("metadata",))
        md = body.get("metadata") or {}
        if not isinstance(md, dict) or len(md) > 16:
            raise invalid_value("metadata", "at most 16 string pairs.")
        s["obj"]["metadata"] = md
        snap = session_view(s)
    h.send_json(200, snap)


def delete_session(s):
    """Cancels the running turn, stops its worker, removes the environment and artifacts."""
    with LOCK:
        s["deleted"] = True
        s["stop"].set()
        for t in s["turns"].values():
            t["cancel"].set()
        s["queue"].put(None)
        CV.notify_all()
    th = s["thread"]
    if th is not None and th is not threading.current_thread():
        th.join(timeout=30)
    with LOCK:
        env = REG.environments.pop(s["env_id"], None)
        if env is not None:
            shutil.rmtree(env["dir"], ignore_errors=True)
            if env["proxy"] is not None:
                env["proxy"].close()
        shutil.rmtree(s["artifact_dir"], ignore_errors=True)
        REG.sessions.pop(s["obj"]["id"], None)


@agents_route("DELETE", "/v1/agents/sessions/([^/]+)")
def sessions_delete(h, sid):
    with LOCK:
        s = session_of(sid)
    delete_session(s)
    h.send_json(200, {"id": sid, "object": "agent.session.deleted", "deleted": True})


@agents_route("POST", "/v1/agents/sessions/([^/]+)/events")
def events_post(h, sid):
    body = h.json_body()
    evs = body.get("events")
    if not isinstance(evs, list) or not evs:
        raise missing("events") if evs is None else invalid_type("events", "a non-empty array")
    key = h.headers.get("Idempotency-Key")
    with LOCK:
        s = session_of(sid)
        if key and key in s["idempotency"]:
            return h.send_bytes(204, b"")
        parsed = []
        for i, ev in enumerate(evs):
            p = "events[%d]" % i
            t = ev.get("type") if isinstance(ev, dict) else None
            if t == "agent.session.input.message":
                parsed.append((t,) + input_messages(ev.get("input"), p + ".input"))
            elif t == "agent.session.input.cancel":
                parsed.append((t,))
            elif t in ("agent.session.input.tool_result",
                       "agent.session.input.computer_use_approval_request_result",
                       "agent.session.input.mcp_approval_request_result"):
                raise invalid_value(p + ".type", "no action is pending (the scripted agent calls "
                                                 "no tools).")
            else:
                raise invalid_value(p + ".type", "expected 'agent.session.input.message' or "
                                                 "'agent.session.input.cancel'.")
        if s["obj"]["status"] == "failed" and any(e[0].endswith("message") for e in parsed):
            raise bad("The session has failed: %s" % (s["obj"]["error"] or "no reason"),
                      param="events", code="session_failed")
        for e in parsed:
            if e[0] == "agent.session.input.cancel":
                for t in s["turns"].values():
                    if t["obj"]["status"] in ("queued", "in_progress"):
                        t["cancel"].set()
            else:
                new_turn(s, e[1], e[2])
        if key:
            s["idempotency"].add(key)
    h.send_bytes(204, b"")


@agents_route("GET", "/v1/agents/sessions/([^/]+)/events")
def events_stream(h, sid):
    with LOCK:
        s = session_of(sid)
    # No cursor is documented: by default a new stream starts at the session's last rest (its
    # last idle/failed event, or its creation), so a reconnect mid-turn replays that turn and
    # the client drops what it saw by event_id (the npm client's TurnState does); with
    # {"replay": false} it starts at the live end, as a server that keeps no backlog would.
    stream_events(h, s, None, until_rest=False,
                  obfuscate=h.query.get("include_obfuscation", "true") != "false")


@agents_route("GET", "/v1/agents/sessions/([^/]+)/items")
def items_list(h, sid):
    with LOCK:
        s = session_of(sid)
        items = [copy.deepcopy(i) for i in s["items"]]
    h.send_json(200, core.STATE.paginate(items, dict(h.query, order=h.query.get("order", "asc")),
                                         100, 1000))


@agents_route("GET", "/v1/agents/sessions/([^/]+)/turns")
def turns_list(h, sid):
    with LOCK:
        s = session_of(sid)
        page = core.STATE.paginate([copy.deepcopy(t["obj"]) for t in s["turns"].values()],
                                   h.query, 20, 100)
    h.send_json(200, page)


@agents_route("GET", "/v1/agents/sessions/([^/]+)/turns/([^/]+)")
def turns_get(h, sid, tid):
    with LOCK:
        t = session_of(sid)["turns"].get(tid)
        if t is None:
            raise not_found("No turn found with id '%s'." % tid, param="turn_id")
        snap = copy.deepcopy(t["obj"])
    h.send_json(200, snap)


def artifact_of(sid, aid):
    a = session_of(sid)["artifacts"].get(aid)
    if a is None:
        raise not_found("No artifact found with id '%s'." % aid, param="artifact_id")
    return a


@agents_route("GET", "/v1/agents/sessions/([^/]+)/artifacts")
def artifacts_list(h, sid):
    with LOCK:
        s = session_of(sid)
        objs = [copy.deepcopy(a["obj"]) for a in s["artifacts"].values()]
        if h.query.get("environment_id"):
            objs = [o for o in objs if o["environment_id"] == h.query["environment_id"]]
        page = core.STATE.paginate(objs, h.query, 20, 100)
    h.send_json(200, page)


@agents_route("GET", "/v1/agents/sessions/([^/]+)/artifacts/([^/]+)")
def artifacts_get(h, sid, aid):
    with LOCK:
        snap = copy.deepcopy(artifact_of(sid, aid)["obj"])
    h.send_json(200, snap)


@agents_route("GET", "/v1/agents/sessions/([^/]+)/artifacts/([^/]+)/content")
def artifacts_content(h, sid, aid):
    with LOCK:
        disk = artifact_of(sid, aid)["disk"]
        with open(disk, "rb") as fh:
            data = fh.read()
    h.send_bytes(200, data, content_type="application/octet-stream")


@agents_route("DELETE", "/v1/agents/sessions/([^/]+)/artifacts/([^/]+)")
def artifacts_delete(h, sid, aid):
    with LOCK:
        a = artifact_of(sid, aid)
        del session_of(sid)["artifacts"][aid]
        try:
            os.unlink(a["disk"])
        except OSError:
            pass
    h.send_json(200, {"id": aid, "object": "agent.session.artifact.deleted", "deleted": True})


@agents_route("GET", "/v1/agents/environments/([^/]+)")
def environments_get(h, eid):
    with LOCK:
        env = REG.environments.get(eid)
        if env is None:
            raise not_found("No environment found with id '%s'." % eid, param="environment_id")
        snap = copy.deepcopy(env["obj"])
        snap["error"] = copy.deepcopy(env["error"])
    h.send_json(200, snap)


# ---- control surface (no auth, no beta header)


@route("POST", "/_fake/agents/faults")
def admin_agent_faults(h):
    body = h.json_body()
    faults = body.get("faults", [body])
    clean = []
    for i, f in enumerate(faults if isinstance(faults, list) else [None]):
        if not isinstance(f, dict) or f.get("kind") not in (
                "environment_reset", "environment_expired", "turn_failed"):
            raise bad("faults[%d].kind: environment_reset|environment_expired|turn_failed" % i,
                      param="kind")
        clean.append({"kind": f["kind"], "after_commands": int(f.get("after_commands", 0)),
                      "times": int(f.get("times", 1)), "code": f.get("code"),
                      "message": f.get("message"), "session_id": f.get("session_id")})
    with LOCK:
        if body.get("replace"):
            REG.faults = []
        REG.faults.extend(clean)
    h.send_json(200, {"ok": True, "faults": len(clean)})


@route("DELETE", "/_fake/agents/faults")
def admin_agent_faults_clear(h):
    with LOCK:
        REG.faults = []
    h.send_json(200, {"ok": True})


@route("POST", "/_fake/agents/stream")
def admin_agent_stream(h):
    body = h.json_body()
    reject_unknown(body, ("replay", "hold_next", "cut_after_type", "cut_times"))
    if "replay" in body and not isinstance(body["replay"], bool):
        raise invalid_type("replay", "a boolean")
    for k in ("hold_next", "cut_times"):
        if k in body and (not isinstance(body[k], int) or body[k] < 0):
            raise invalid_type(k, "a whole number")
    if body.get("cut_after_type") is not None and not isinstance(body["cut_after_type"], str):
        raise invalid_type("cut_after_type", "an event type")
    with LOCK:
        st = REG.stream
        st.update({k: v for k, v in body.items()})
        if body.get("cut_after_type") and "cut_times" not in body:
            st["cut_times"] = 1
        snap = dict(st)
    h.send_json(200, dict(snap, ok=True))


@route("POST", "/_fake/agents/network")
def admin_agent_network(h):
    v = h.json_body().get("leave_open")
    if not isinstance(v, bool):
        raise invalid_type("leave_open", "a boolean")
    with LOCK:
        REG.leave_network_open = v
    h.send_json(200, {"ok": True, "leave_open": v})


@route("POST", "/_fake/agents/environments/([^/]+)/expire")
def admin_expire(h, eid):
    with LOCK:
        env = REG.environments.get(eid)
        if env is None:
            raise not_found("No environment found with id '%s'." % eid)
        expire_environment(env)
    h.send_json(200, {"ok": True})


def state_view():
    """For GET /_fake/state: what a leak check asserts is empty."""
    with LOCK:
        return {
            "sessions": [{"id": s["obj"]["id"], "status": s["obj"]["status"],
                          "environment_id": s["env_id"], "turns": len(s["turns"]),
                          "events": len(s["events"])} for s in REG.sessions.values()],
            "environments": [{"id": e["obj"]["id"], "status": e["obj"]["status"],
                              "session_id": e["session_id"],
                              "network": e["network"]["access"],
                              "workspace_exists": os.path.isdir(e["dir"]),
                              "proxy_decisions": list(e["proxy"].decisions) if e["proxy"] else []}
                             for e in REG.environments.values()],
            "artifacts": [aid for s in REG.sessions.values() for aid in s["artifacts"]],
            "faults_pending": sum(1 for f in REG.faults if f["times"] > 0),
            "leave_network_open": REG.leave_network_open,
            "stream": dict(REG.stream),
        }


def reset():
    """For POST /_fake/reset and shutdown: deletes every session (and so its environment)."""
    with LOCK:
        sessions = list(REG.sessions.values())
    for s in sessions:
        delete_session(s)
    with LOCK:
        REG.faults = []
        REG.leave_network_open = False
        REG.stream = default_stream()
