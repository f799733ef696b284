#!/usr/bin/env python3
"""A protocol-faithful fake of the OpenAI HTTP API for sandgate's tests.

Standard library only. Implements Files, Containers, Container files, Responses (hosted and
local `shell`, `function` tools, streaming) and Chat Completions (function tools, streaming)
with the shapes of docs/openai-api.md, driven by a scripted "model" that a test
loads through the admin API under /_fake/; the beta Agents API lives in fake_agents.py, which
mounts its routes here. See README.md next to this file.

Run: python3 fake_openai.py [--host 127.0.0.1] [--port 0] [--api-key KEY]
Prints exactly one line `listening on http://HOST:PORT` on stdout once ready.
"""

import argparse
import codecs
import copy
import json
import math
import os
import queue
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY_BYTES = 256 * 1024 * 1024  # uploads larger than this get 413
MAX_CAPTURE_CHARS = 8 * 1024 * 1024  # per stream and command, the rest is dropped
MAX_DELAY_MS = 120_000  # a delay fault never sleeps longer than this
DEFAULT_CONTAINER_MINUTES = 20
MEMORY_LIMITS = ("1g", "4g", "16g", "64g")
FILE_PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
SANDBOX_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/mnt/data", "LANG": "C.UTF-8"}


def log(msg):
    sys.stderr.write("fake-openai: %s\n" % msg)
    sys.stderr.flush()


def new_id(prefix, nbytes=12):
    return prefix + secrets.token_hex(nbytes)


def tokens(text):
    """Deterministic token count: one token per 4 characters, rounded up."""
    return int(math.ceil(len(text) / 4.0)) if text else 0


class ApiError(Exception):
    def __init__(self, status, message, type_="invalid_request_error", param=None, code=None,
                 headers=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self):
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


def bad(message, param=None, code=None):
    return ApiError(400, message, param=param, code=code)


def not_found(message, param=None):
    return ApiError(404, message, param=param)


def missing(param):
    return bad("Missing required parameter: '%s'." % param, param=param,
               code="missing_required_parameter")


def invalid_type(param, expected):
    return bad("Invalid type for '%s': expected %s." % (param, expected), param=param,
               code="invalid_type")


def invalid_value(param, detail):
    return bad("Invalid value for '%s': %s" % (param, detail), param=param, code="invalid_value")


def reject_unknown(body, known, prefix=""):
    """400 unknown_parameter for a key outside `known` (catches client typos; the real API is
    believed to do the same)."""
    for k in body:
        if k not in known:
            raise bad("Unrecognized request argument supplied: %s%s" % (prefix, k),
                      param=prefix + k, code="unknown_parameter")


# --------------------------------------------------------------------------------------------
# multipart/form-data


def parse_header_params(value):
    """'form-data; name="file"; filename="a b.csv"' -> ('form-data', {name:..., filename:...})."""
    parts = []
    cur, quoted, i = "", False, 0
    while i < len(value):
        ch = value[i]
        if quoted:
            if ch == "\\" and i + 1 < len(value):
                cur += value[i + 1]
                i += 2
                continue
            if ch == '"':
                quoted = False
            else:
                cur += ch
        elif ch == '"':
            quoted = True
        elif ch == ";":
            parts.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    parts.append(cur)
    main = parts[0].strip().lower()
    params = {}
    for p in parts[1:]:
        if "=" not in p:
            continue
        k, v = p.split("=", 1)
        k = k.strip().lower()
        v = v.strip()
        if k.endswith("*"):  # RFC 5987: utf-8''percent-encoded
            k = k[:-1]
            if "''" in v:
                charset, v = v.split("''", 1)
                v = urllib.parse.unquote(v, encoding=charset or "utf-8", errors="replace")
            params[k] = v
        elif k not in params:
            params[k] = v
    return main, params


def parse_multipart(body, content_type):
    """Returns {name: [{"filename": str|None, "content_type": str|None, "data": bytes}]}."""
    _, params = parse_header_params(content_type)
    boundary = params.get("boundary")
    if not boundary:
        raise bad("Invalid multipart/form-data body: no boundary in Content-Type.")
    delim = b"--" + boundary.encode("latin-1")
    data = b"\r\n" + body
    pieces = data.split(b"\r\n" + delim)
    if len(pieces) < 2:
        raise bad("Invalid multipart/form-data body: boundary not found.")
    fields = {}
    closed = False
    for piece in pieces[1:]:
        if piece.startswith(b"--"):
            closed = True
            break
        # transport padding after the boundary, then CRLF
        nl = piece.find(b"\r\n")
        if nl < 0:
            raise bad("Invalid multipart/form-data body: malformed part.")
        piece = piece[nl + 2:]
        head_end = piece.find(b"\r\n\r\n")
        if head_end < 0:
            if piece.startswith(b"\r\n"):
                head, content = b"", piece[2:]
            else:
                raise bad("Invalid multipart/form-data body: part without header end.")
        else:
            head, content = piece[:head_end], piece[head_end + 4:]
        headers = {}
        for line in head.split(b"\r\n"):
            if b":" in line:
                k, v = line.split(b":", 1)
                headers[k.strip().lower().decode("latin-1")] = v.strip().decode("utf-8", "replace")
        disp = headers.get("content-disposition")
        if not disp:
            raise bad("Invalid multipart/form-data body: part without Content-Disposition.")
        _, dparams = parse_header_params(disp)
        name = dparams.get("name")
        if name is None:
            raise bad("Invalid multipart/form-data body: part without a name.")
        fields.setdefault(name, []).append({
            "filename": dparams.get("filename"),
            "content_type": headers.get("content-type"),
            "data": content,
        })
    if not closed:
        raise bad("Invalid multipart/form-data body: missing closing boundary.")
    return fields


def form_text(fields, name):
    if name not in fields:
        return None
    return fields[name][0]["data"].decode("utf-8", "replace")


def safe_filename(name):
    name = (name or "").replace("\\", "/").split("/")[-1].replace("\x00", "")
    if name in ("", ".", ".."):
        name = "upload"
    return name


# --------------------------------------------------------------------------------------------
# command execution (hosted shell)


BWRAP_PREFIX = ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
                "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev",
                "--tmpfs", "/tmp"]


def bwrap_argv(workspace, cmd, mount="/mnt/data", cwd=None, share_net=False, extra=()):
    """The sandbox of a hosted command: `workspace` bound at `mount` (the Agents API's
    environments use /workspace), cwd `cwd` (default `mount`), no network unless `share_net`,
    `extra` bwrap arguments (binds, --setenv) before the command."""
    return (BWRAP_PREFIX + (["--share-net"] if share_net else []) +
            ["--bind", workspace, mount, "--chdir", cwd or mount] + list(extra) +
            ["/bin/sh", "-c", cmd])


def probe_bwrap(root):
    if not shutil.which("bwrap"):
        return "bwrap not found on PATH"
    try:
        p = subprocess.run(bwrap_argv(root, "test -d /mnt/data"), env=SANDBOX_ENV,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=20)
    except Exception as e:  # noqa: BLE001
        return "bwrap probe failed: %s" % e
    if p.returncode != 0:
        return "bwrap probe exited %d: %s" % (p.returncode, p.stderr.decode("utf-8", "replace").strip())
    return None


RUNNING = set()  # Popen objects of hosted commands still running
RUNNING_LOCK = threading.Lock()


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_command(workspace, cmd, timeout_ms, use_bwrap, on_chunk=None, cancel=None, argv=None,
                env=None):
    """Runs one command; returns (stdout, stderr, outcome). Every wait is bounded by timeout_ms.
    `argv` replaces the default /mnt/data sandbox (the Agents API builds its own), `env` the
    default environment."""
    if argv is None:
        argv = bwrap_argv(workspace, cmd) if use_bwrap else ["/bin/sh", "-c", cmd]
    deadline = time.monotonic() + timeout_ms / 1000.0
    try:
        proc = subprocess.Popen(argv, cwd=workspace, env=env or SANDBOX_ENV,
                                stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except OSError as e:
        return "", "fake-openai: cannot start command: %s\n" % e, {"type": "exit", "exit_code": 127}
    with RUNNING_LOCK:
        RUNNING.add(proc)
    try:
        return _collect(proc, deadline, on_chunk, cancel)
    finally:
        with RUNNING_LOCK:
            RUNNING.discard(proc)


def _collect(proc, deadline, on_chunk, cancel):
    q = queue.Queue()

    def reader(name, f):
        try:
            while True:
                b = os.read(f.fileno(), 65536)
                if not b:
                    break
                q.put((name, b))
        except OSError:
            pass
        finally:
            q.put((name, None))

    threads = [threading.Thread(target=reader, args=("stdout", proc.stdout), daemon=True),
               threading.Thread(target=reader, args=("stderr", proc.stderr), daemon=True)]
    for t in threads:
        t.start()
    out = {"stdout": [], "stderr": []}
    size = {"stdout": 0, "stderr": 0}
    dec = {n: codecs.getincrementaldecoder("utf-8")("replace") for n in out}
    open_streams = 2
    timed_out = False
    exit_grace = None
    while open_streams:
        now = time.monotonic()
        if cancel is not None and cancel.is_set():
            kill_group(proc)
            timed_out = True
            break
        if now >= deadline:
            kill_group(proc)
            timed_out = True
            break
        if exit_grace is None and proc.poll() is not None:
            exit_grace = now + 1.0  # a backgrounded child may keep the pipes open
        if exit_grace is not None and now >= exit_grace:
            kill_group(proc)
            break
        try:
            name, b = q.get(timeout=0.05)
        except queue.Empty:
            continue
        if b is None:
            open_streams -= 1
            continue
        text = dec[name].decode(b)
        if size[name] < MAX_CAPTURE_CHARS:
            out[name].append(text)
            size[name] += len(text)
        if on_chunk and text:
            on_chunk(name, text)
    for n in out:
        tail = dec[n].decode(b"", final=True)
        if tail:
            out[n].append(tail)
    try:
        rc = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        rc = proc.wait(timeout=5)
    for f in (proc.stdout, proc.stderr):
        try:
            f.close()
        except OSError:
            pass
    outcome = {"type": "timeout"} if timed_out else {
        "type": "exit", "exit_code": rc if rc >= 0 else 128 - rc}
    return "".join(out["stdout"]), "".join(out["stderr"]), outcome


def head_tail(text, budget):
    if len(text) <= budget:
        return text
    head = budget // 2
    return text[:head] + text[len(text) - (budget - head):] if budget - head else text[:head]


def cap_output(stdout, stderr, max_len):
    """Caps combined stdout+stderr to max_len characters, keeping head and tail of each."""
    if max_len is None or len(stdout) + len(stderr) <= max_len:
        return stdout, stderr
    err_budget = min(len(stderr), max_len // 2)
    out_budget = min(len(stdout), max_len - err_budget)
    err_budget = min(len(stderr), max_len - out_budget)
    return head_tail(stdout, out_budget), head_tail(stderr, err_budget)


# --------------------------------------------------------------------------------------------
# state


class State:
    def __init__(self, root, use_bwrap, default_timeout_ms):
        self.lock = threading.RLock()
        self.root = root
        self.use_bwrap = use_bwrap
        self.default_timeout_ms = default_timeout_ms
        self.seq = 0
        self.order = {}  # id -> creation sequence, kept after deletion for cursors
        self.clear()

    def clear(self):
        self.files = {}  # id -> {"obj", "data"}
        self.containers = {}  # id -> {"obj", "dir", "files": {cfile_id: obj}}
        self.responses = {}  # id -> record
        self.turns = []
        self.faults = []
        self.clock_offset = 0.0
        self.frozen_at = None  # wall time at which POST /_fake/clock {"freeze": true} stopped it
        self.requests = []
        self.running_commands = 0
        self.activity = "any"

    def now(self):
        base = self.frozen_at if self.frozen_at is not None else time.time()
        return int(base + self.clock_offset)

    def register(self, oid):
        self.seq += 1
        self.order[oid] = self.seq

    # ---- lists

    def paginate(self, items, query, default_limit, max_limit):
        order = query.get("order", "desc")
        if order not in ("asc", "desc"):
            raise invalid_value("order", "expected 'asc' or 'desc'.")
        try:
            limit = int(query.get("limit", default_limit))
        except ValueError:
            raise invalid_type("limit", "an integer")
        if limit < 1 or limit > max_limit:
            raise bad("Invalid 'limit': expected a value between 1 and %d." % max_limit,
                      param="limit", code="integer_out_of_range")
        items = sorted(items, key=lambda o: self.order[o["id"]], reverse=(order == "desc"))
        after = query.get("after")
        if after:
            if after not in self.order:
                raise invalid_value("after", "no object with id '%s'." % after)
            pos = self.order[after]
            items = [o for o in items
                     if (self.order[o["id"]] > pos if order == "asc" else self.order[o["id"]] < pos)]
        page = items[:limit]
        return {"object": "list", "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(items) > limit}

    # ---- files

    def prune_files(self):
        for fid in list(self.files):
            try:
                self.live_file(fid)
            except ApiError:
                pass

    def live_file(self, fid):
        f = self.files.get(fid)
        if f and f["obj"]["expires_at"] is not None and self.now() >= f["obj"]["expires_at"]:
            del self.files[fid]
            f = None
        if not f:
            raise not_found("No such File object: %s" % fid, param="id")
        return f

    # ---- containers

    def container(self, cid):
        c = self.containers.get(cid)
        if not c:
            raise not_found("No container found with id '%s'." % cid)
        self.refresh_status(c)
        return c

    def refresh_status(self, c):
        o = c["obj"]
        if o["status"] == "running":
            limit = o["last_active_at"] + 60 * o["expires_after"]["minutes"]
            if self.now() >= limit:
                o["status"] = "expired"

    def usable_container(self, cid):
        c = self.container(cid)
        if c["obj"]["status"] != "running":
            raise bad("Container is expired.")
        return c

    def touch(self, c, by="command"):
        """Activity on a container: `by` is "command" (tool use, which certainly counts, spec
        §3) or "files" (container-file calls, unconfirmed); POST /_fake/activity chooses which
        count."""
        if by in ACTIVITY_COUNTS[self.activity]:
            c["obj"]["last_active_at"] = self.now()

    def add_container_file(self, c, filename, data, source):
        name = safe_filename(filename)
        path = os.path.join(c["dir"], name)
        # an upload of an existing name replaces it (a guess: spec §10.4)
        for fid, fo in list(c["files"].items()):
            if fo["path"] == "/mnt/data/" + name:
                del c["files"][fid]
        if os.path.islink(path) or os.path.isdir(path):
            raise bad("Cannot write '/mnt/data/%s': a directory or link is in the way." % name)
        with open(path, "wb") as fh:
            fh.write(data)
        fo = {"id": new_id("cfile_"), "object": "container.file", "created_at": self.now(),
              "bytes": len(data), "container_id": c["obj"]["id"], "path": "/mnt/data/" + name,
              "source": source}
        self.register(fo["id"])
        c["files"][fo["id"]] = fo
        return fo

    def sync_container_files(self, c):
        """Lists regular files under the workspace; new ones are the assistant's."""
        known = {fo["path"]: fid for fid, fo in c["files"].items()}
        seen = set()
        base = c["dir"]
        if os.path.isdir(base):
            for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
                dirnames.sort()
                for fn in sorted(filenames):
                    full = os.path.join(dirpath, fn)
                    try:
                        st = os.lstat(full)
                    except OSError:
                        continue
                    if not os.path.isfile(full) or os.path.islink(full):
                        continue
                    rel = os.path.relpath(full, base).replace(os.sep, "/")
                    path = "/mnt/data/" + rel
                    seen.add(path)
                    if path in known:
                        c["files"][known[path]]["bytes"] = st.st_size
                    else:
                        fo = {"id": new_id("cfile_"), "object": "container.file",
                              "created_at": self.now(), "bytes": st.st_size,
                              "container_id": c["obj"]["id"], "path": path,
                              "source": "assistant"}
                        self.register(fo["id"])
                        c["files"][fo["id"]] = fo
        for path, fid in known.items():
            if path not in seen:
                del c["files"][fid]

    def container_file_disk_path(self, c, fo):
        rel = fo["path"][len("/mnt/data/"):]
        full = os.path.realpath(os.path.join(c["dir"], rel))
        base = os.path.realpath(c["dir"])
        if not full.startswith(base + os.sep):
            raise not_found("No such container file: %s" % fo["id"])
        return full

    def delete_container(self, cid):
        c = self.containers.pop(cid)
        shutil.rmtree(c["dir"], ignore_errors=True)

    # ---- faults

    def take_fault(self, method, path, kinds):
        with self.lock:
            for f in self.faults:
                if f["times"] <= 0:
                    continue
                if not path.startswith(f.get("path_prefix") or "/v1/"):
                    continue
                if f.get("method") and f["method"].upper() != method:
                    continue
                kind = "drop" if f.get("drop_mid_stream") else (
                    "close" if f.get("drop_connection") else (
                        "truncate" if f.get("truncate_body") else "status_or_delay"))
                if kind not in kinds:
                    continue
                f["times"] -= 1
                return dict(f)
            return None


STATE = None

# What refreshes a container's last_active_at, per POST /_fake/activity {"counts": …}.
ACTIVITY_COUNTS = {"any": ("command", "files"), "commands": ("command",), "none": ()}


# --------------------------------------------------------------------------------------------
# scenario


def validate_scenario(body):
    if not isinstance(body, dict) or not isinstance(body.get("turns"), list):
        raise bad("scenario: expected {\"turns\": [...]}", param="turns")
    for i, t in enumerate(body["turns"]):
        p = "turns[%d]" % i
        if not isinstance(t, dict):
            raise bad("%s: expected an object" % p, param=p)
        kinds = [k for k in ("shell", "function", "message", "fail", "incomplete") if k in t]
        if len(kinds) != 1:
            raise bad("%s: exactly one of shell|function|message|fail|incomplete" % p, param=p)
        k = kinds[0]
        if k == "shell":
            if not isinstance(t["shell"], list) or not t["shell"] or \
                    not all(isinstance(c, str) for c in t["shell"]):
                raise bad("%s.shell: a non-empty list of strings" % p, param=p + ".shell")
            for opt in ("timeout_ms", "max_output_length"):
                if t.get(opt) is not None and (not isinstance(t[opt], int) or t[opt] < 0):
                    raise bad("%s.%s: a non-negative integer or null" % (p, opt), param=p + "." + opt)
        elif k == "function":
            f = t["function"]
            if not isinstance(f, dict) or not isinstance(f.get("name"), str) or \
                    not isinstance(f.get("arguments", ""), str):
                raise bad("%s.function: {name: str, arguments: str}" % p, param=p + ".function")
        elif k == "message":
            if not isinstance(t["message"], str):
                raise bad("%s.message: a string" % p, param=p + ".message")
        elif k == "fail":
            f = t["fail"]
            if not isinstance(f, dict):
                raise bad("%s.fail: {code, message}" % p, param=p + ".fail")
        elif k == "incomplete":
            if t["incomplete"] not in ("max_output_tokens", "content_filter"):
                raise bad("%s.incomplete: max_output_tokens|content_filter" % p, param=p)
    return body["turns"]


# --------------------------------------------------------------------------------------------
# SSE output


class StreamDropped(Exception):
    pass


class EventSink:
    """Numbers events; writes them as SSE frames when streaming; honours drop faults."""

    def __init__(self, handler=None, drop_after=None, chat=False, on_event=None):
        self.handler = handler
        self.seq = 0
        self.drop_after = drop_after
        self.frames = 0
        self.dead = handler is None
        self.chat = chat
        self.lock = threading.Lock()
        self.on_event = on_event  # a background response keeps its events for GET ?stream=true

    def _write_frame(self, raw):
        with self.lock:
            if self.dead:
                return
            self.frames += 1
            try:
                if self.drop_after is not None and self.frames > self.drop_after:
                    half = raw[:max(1, len(raw) // 2)]
                    self.handler.write_chunk(half)
                    self.handler.abort_connection()
                    self.dead = True
                    return
                self.handler.write_chunk(raw)
            except (OSError, ValueError):
                self.dead = True

    def emit(self, type_, **fields):
        ev = {"type": type_, "sequence_number": self.seq}
        self.seq += 1
        ev.update(fields)
        if self.on_event is not None:
            self.on_event(ev)
        self.replay(ev)
        return ev

    def replay(self, ev):
        """Writes an event as it was numbered (also one kept from an earlier stream)."""
        if self.handler is not None:
            data = json.dumps(ev, separators=(",", ":"))
            self._write_frame(("event: %s\ndata: %s\n\n" % (ev["type"], data)).encode("utf-8"))

    def data(self, obj):
        raw = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
        self._write_frame(("data: %s\n\n" % raw).encode("utf-8"))


def text_pieces(s, n=24):
    return [s[i:i + n] for i in range(0, len(s), n)] or [""]


# --------------------------------------------------------------------------------------------
# Responses


TURN_ITEM_TYPES = ("shell_call", "function_call", "local_shell_call", "custom_tool_call")


def count_model_turns(items):
    n = 0
    for it in items:
        if not isinstance(it, dict):
            continue
        if it.get("type") in TURN_ITEM_TYPES:
            n += 1
        elif (it.get("type") in (None, "message")) and it.get("role") == "assistant":
            n += 1
    return n


def analyse_tools(body):
    tools = body.get("tools")
    if tools is None:
        tools = []
    if not isinstance(tools, list):
        raise invalid_type("tools", "an array")
    info = {"shell": None, "functions": []}
    for i, t in enumerate(tools):
        p = "tools[%d]" % i
        if not isinstance(t, dict) or not isinstance(t.get("type"), str):
            raise missing(p + ".type")
        if t["type"] == "shell":
            env = t.get("environment")
            if env is None:
                info["shell"] = {"kind": "local", "env": None}
                continue
            if not isinstance(env, dict):
                raise invalid_type(p + ".environment", "an object")
            et = env.get("type")
            if et == "local":
                info["shell"] = {"kind": "local", "env": env}
            elif et == "container_reference":
                if not isinstance(env.get("container_id"), str):
                    raise missing(p + ".environment.container_id")
                info["shell"] = {"kind": "hosted", "container_id": env["container_id"],
                                 "param": p + ".environment.container_id"}
            elif et == "container_auto":
                info["shell"] = {"kind": "auto", "env": env}
            else:
                raise invalid_value(p + ".environment.type",
                                    "expected 'container_auto', 'container_reference' or 'local'.")
        elif t["type"] == "function":
            if not isinstance(t.get("name"), str) or not t["name"]:
                raise missing(p + ".name")
            info["functions"].append(t["name"])
    return tools, info


def validate_tool_choice(tc):
    if tc is None or tc in ("none", "auto", "required"):
        return
    if isinstance(tc, dict) and isinstance(tc.get("type"), str):
        return
    raise invalid_value("tool_choice", "expected 'none', 'auto', 'required' or an object.")


def validate_shell_output_item(it, p):
    out = it.get("output")
    if not isinstance(out, list):
        raise invalid_type(p + ".output", "an array of {stdout, stderr, outcome}")
    for j, o in enumerate(out):
        q = "%s.output[%d]" % (p, j)
        if not isinstance(o, dict):
            raise invalid_type(q, "an object")
        for k in ("stdout", "stderr"):
            if not isinstance(o.get(k), str):
                raise missing(q + "." + k) if k not in o else invalid_type(q + "." + k, "a string")
        oc = o.get("outcome")
        if not isinstance(oc, dict) or oc.get("type") not in ("exit", "timeout"):
            raise invalid_value(q + ".outcome", "expected {type: 'exit', exit_code} or {type: 'timeout'}.")
        if oc["type"] == "exit" and not isinstance(oc.get("exit_code"), int):
            raise missing(q + ".outcome.exit_code")
    mol = it.get("max_output_length")
    if mol is not None and not isinstance(mol, int):
        raise invalid_type(p + ".max_output_length", "an integer or null")


class ResponsesRun:
    """Plays scripted turns into one response object, emitting stream events as it goes."""

    def __init__(self, state, record, info, sink, cancel):
        self.state = state
        self.rec = record
        self.resp = record["obj"]
        self.info = info
        self.sink = sink
        self.cancel = cancel
        self.tool_calls = 0
        self.created_files = []  # (container_id, file obj) made during this response

    def add_item(self, item):
        idx = len(self.resp["output"])
        self.resp["output"].append(item)
        self.sink.emit("response.output_item.added", output_index=idx, item=copy.deepcopy(item))
        return idx

    def done_item(self, idx):
        self.sink.emit("response.output_item.done", output_index=idx,
                       item=copy.deepcopy(self.resp["output"][idx]))

    def shell_call_item(self, turn, environment):
        cmds = turn["shell"]
        item = {"type": "shell_call", "id": new_id("sh_"), "call_id": new_id("call_"),
                "status": "in_progress",
                "action": {"commands": [], "timeout_ms": turn.get("timeout_ms"),
                           "max_output_length": turn.get("max_output_length")},
                "environment": environment, "caller": {"type": "direct"}}
        idx = self.add_item(item)
        for ci, cmd in enumerate(cmds):
            self.sink.emit("response.shell_call_command.added", output_index=idx,
                           command_index=ci, command="")
            for piece in text_pieces(cmd, 64):
                self.sink.emit("response.shell_call_command.delta", output_index=idx,
                               command_index=ci, delta=piece)
            item["action"]["commands"].append(cmd)
            self.sink.emit("response.shell_call_command.done", output_index=idx,
                           command_index=ci, command=cmd)
        item["status"] = "completed"
        self.done_item(idx)
        return item

    def run_hosted(self, turn, cid):
        st = self.state
        with st.lock:
            c = st.usable_container(cid)
            st.touch(c)
            workdir = c["dir"]
            before = set(c["files"])
        call = self.shell_call_item(turn, {"type": "container_reference", "container_id": cid})
        mol = turn.get("max_output_length")
        out_item = {"type": "shell_call_output", "id": new_id("sho_"), "call_id": call["call_id"],
                    "status": "in_progress", "max_output_length": mol, "output": [],
                    "caller": {"type": "direct"}}
        idx = self.add_item(out_item)
        timeout_ms = turn.get("timeout_ms") or st.default_timeout_ms
        for ci, cmd in enumerate(turn["shell"]):
            sent = [0]

            def on_chunk(name, text, ci=ci):
                if mol is not None:
                    room = mol - sent[0]
                    if room <= 0:
                        return
                    text = text[:room]
                sent[0] += len(text)
                self.sink.emit("response.shell_call_output_content.delta", item_id=out_item["id"],
                               output_index=idx, command_index=ci, delta={name: text})

            with st.lock:
                st.running_commands += 1
            try:
                if self.cancel.is_set():
                    stdout, stderr, outcome = "", "", {"type": "timeout"}
                else:
                    stdout, stderr, outcome = run_command(workdir, cmd, timeout_ms, st.use_bwrap,
                                                          on_chunk, self.cancel)
            finally:
                with st.lock:
                    st.running_commands -= 1
            stdout, stderr = cap_output(stdout, stderr, mol)
            entry = {"stdout": stdout, "stderr": stderr, "outcome": outcome}
            out_item["output"].append(entry)
            self.sink.emit("response.shell_call_output_content.done", item_id=out_item["id"],
                           output_index=idx, command_index=ci, output=[copy.deepcopy(entry)])
        out_item["status"] = "completed"
        self.done_item(idx)
        with st.lock:
            c = st.containers.get(cid)
            if c:
                st.touch(c)
                st.sync_container_files(c)
                for fid, fo in c["files"].items():
                    if fid not in before and fo["source"] == "assistant":
                        self.created_files.append((cid, fo))

    def function_call(self, name, arguments):
        item = {"type": "function_call", "id": new_id("fc_"), "call_id": new_id("call_"),
                "name": name, "arguments": "", "status": "in_progress"}
        idx = self.add_item(item)
        for piece in text_pieces(arguments, 32):
            if piece:
                self.sink.emit("response.function_call_arguments.delta", item_id=item["id"],
                               output_index=idx, delta=piece)
        item["arguments"] = arguments
        self.sink.emit("response.function_call_arguments.done", item_id=item["id"],
                       output_index=idx, name=name, arguments=arguments)
        item["status"] = "completed"
        self.done_item(idx)
        return item

    def message(self, text, status="completed"):
        item = {"type": "message", "id": new_id("msg_"), "role": "assistant",
                "status": "in_progress", "phase": "final_answer", "content": []}
        idx = self.add_item(item)
        annotations = []
        seen = set()
        for cid, fo in self.created_files:
            if fo["id"] in seen:
                continue
            seen.add(fo["id"])
            annotations.append({"type": "container_file_citation", "container_id": cid,
                                "file_id": fo["id"], "filename": fo["path"].rsplit("/", 1)[-1],
                                "start_index": len(text), "end_index": len(text)})
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        self.sink.emit("response.content_part.added", item_id=item["id"], output_index=idx,
                       content_index=0, part=copy.deepcopy(part))
        for piece in text_pieces(text):
            if piece:
                self.sink.emit("response.output_text.delta", item_id=item["id"], output_index=idx,
                               content_index=0, delta=piece, logprobs=[])
        self.sink.emit("response.output_text.done", item_id=item["id"], output_index=idx,
                       content_index=0, text=text, logprobs=[])
        part = {"type": "output_text", "text": text, "annotations": annotations, "logprobs": []}
        item["content"].append(part)
        self.sink.emit("response.content_part.done", item_id=item["id"], output_index=idx,
                       content_index=0, part=copy.deepcopy(part))
        item["status"] = status
        self.done_item(idx)

    def play(self):
        st = self.state
        resp = self.resp
        info = self.info
        turn_idx = self.rec["start_turn"]
        with st.lock:
            turns = list(st.turns)
        if self.rec.get("literal"):
            turns, turn_idx = self.rec["literal"], 0
        shell = info["shell"]
        max_tool_calls = resp.get("max_tool_calls")
        max_out = resp.get("max_output_tokens")
        result = {"status": "completed"}
        while True:
            if self.cancel.is_set():
                result = {"status": "cancelled"}
                break
            if turn_idx >= len(turns):
                self.message("[fake-openai: the scenario has no turn %d]" % turn_idx)
                break
            turn = turns[turn_idx]
            turn_idx += 1
            if "shell" in turn:
                if max_tool_calls is not None and self.tool_calls >= max_tool_calls:
                    continue  # extra built-in tool calls are ignored
                self.tool_calls += 1
                if shell is None:
                    if info["functions"]:
                        args = {"commands": turn["shell"]}
                        for k in ("timeout_ms", "max_output_length"):
                            if turn.get(k) is not None:
                                args[k] = turn[k]
                        name = "shell" if "shell" in info["functions"] else info["functions"][0]
                        self.rec["pending"].append(("function_call", self.function_call(
                            name, json.dumps(args))["call_id"]))
                        break
                    result = {"status": "failed", "error": {
                        "code": "server_error",
                        "message": "fake-openai: scripted shell turn %d but the request has no "
                                   "shell or function tool" % (turn_idx - 1)}}
                    break
                if shell["kind"] == "local":
                    call = self.shell_call_item(turn, {"type": "local"})
                    self.rec["pending"].append(("shell_call", call["call_id"]))
                    break
                try:
                    self.run_hosted(turn, shell["container_id"])
                except ApiError as e:  # the container expired or vanished mid-response
                    result = {"status": "failed", "error": {"code": "server_error",
                                                            "message": e.message}}
                    break
                continue
            if "function" in turn:
                f = turn["function"]
                self.tool_calls += 1
                call = self.function_call(f["name"], f.get("arguments", ""))
                self.rec["pending"].append(("function_call", call["call_id"]))
                break
            if "message" in turn:
                text = turn["message"]
                if max_out is not None and tokens(text) > max_out:
                    self.message(text[:max_out * 4], status="incomplete")
                    result = {"status": "incomplete",
                              "incomplete_details": {"reason": "max_output_tokens"}}
                else:
                    self.message(text)
                break
            if "fail" in turn:
                f = turn["fail"]
                result = {"status": "failed", "error": {
                    "code": f.get("code", "server_error"),
                    "message": f.get("message", "The model failed to generate a response.")}}
                break
            if "incomplete" in turn:
                result = {"status": "incomplete",
                          "incomplete_details": {"reason": turn["incomplete"]}}
                break
        tc = resp.get("tool_choice")
        made_call = any(it["type"] in ("shell_call", "function_call") for it in resp["output"])
        if result["status"] == "completed":
            forced = tc == "required" or (isinstance(tc, dict) and tc.get("type") in ("shell", "function"))
            if forced and not made_call:
                result = {"status": "failed", "error": {
                    "code": "server_error",
                    "message": "fake-openai: tool_choice forces a tool call but the scripted turn "
                               "is a message"}}
            elif tc == "none" and made_call:
                result = {"status": "failed", "error": {
                    "code": "server_error",
                    "message": "fake-openai: tool_choice is 'none' but the scripted turn calls a tool"}}
        self.rec["next_turn"] = turn_idx
        return result


def response_usage(body, resp):
    inp = json.dumps(body.get("input", ""), sort_keys=True) + (body.get("instructions") or "")
    out = 0
    for it in resp["output"]:
        if it["type"] == "message":
            out += sum(tokens(p.get("text", "")) for p in it["content"])
        elif it["type"] == "shell_call":
            out += tokens("\n".join(it["action"]["commands"])) + 4
        elif it["type"] == "function_call":
            out += tokens(it["arguments"]) + tokens(it["name"])
    i = tokens(inp) + 8
    return {"input_tokens": i, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": i + out}


# --------------------------------------------------------------------------------------------
# Chat Completions


def validate_chat_messages(messages):
    if not isinstance(messages, list) or not messages:
        raise bad("Invalid 'messages': empty array. Expected an array with minimum length 1.",
                  param="messages", code="empty_array")
    open_calls = None  # ids of the last assistant tool_calls still unanswered
    open_at = None
    for i, m in enumerate(messages):
        p = "messages.[%d]" % i
        if not isinstance(m, dict) or m.get("role") not in ("system", "developer", "user",
                                                             "assistant", "tool", "function"):
            raise invalid_value(p + ".role", "expected system, developer, user, assistant or tool.")
        role = m["role"]
        if role == "tool":
            tcid = m.get("tool_call_id")
            if not isinstance(tcid, str):
                raise missing(p + ".tool_call_id")
            if open_calls is None or tcid not in open_calls:
                raise bad("Invalid parameter: messages with role 'tool' must be a response to a "
                          "preceeding message with 'tool_calls'.", param=p + ".role")
            open_calls.discard(tcid)
            continue
        if open_calls:
            raise bad("An assistant message with 'tool_calls' must be followed by tool messages "
                      "responding to each 'tool_call_id'. The following tool_call_ids did not "
                      "have response messages: %s" % ", ".join(sorted(open_calls)),
                      param="messages.[%d].role" % open_at)
        open_calls = None
        if role == "assistant" and m.get("tool_calls"):
            if not isinstance(m["tool_calls"], list):
                raise invalid_type(p + ".tool_calls", "an array")
            ids = set()
            for j, tc in enumerate(m["tool_calls"]):
                if not isinstance(tc, dict) or not isinstance(tc.get("id"), str):
                    raise missing("%s.tool_calls[%d].id" % (p, j))
                fn = tc.get("function")
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or \
                        not isinstance(fn.get("arguments"), str):
                    raise missing("%s.tool_calls[%d].function" % (p, j))
                ids.add(tc["id"])
            open_calls, open_at = ids, i
    if open_calls:
        raise bad("An assistant message with 'tool_calls' must be followed by tool messages "
                  "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                  "response messages: %s" % ", ".join(sorted(open_calls)),
                  param="messages.[%d].role" % open_at)


def chat_function_names(body):
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise invalid_type("tools", "an array")
    names = []
    for i, t in enumerate(tools):
        if not isinstance(t, dict) or t.get("type") != "function" or \
                not isinstance(t.get("function"), dict) or not isinstance(t["function"].get("name"), str):
            raise bad("Invalid 'tools[%d]': expected {type: 'function', function: {name, ...}}." % i,
                      param="tools[%d]" % i)
        names.append(t["function"]["name"])
    return names


# --------------------------------------------------------------------------------------------
# HTTP


ROUTES = []


def route(method, pattern):
    rx = re.compile("^" + pattern + "$")

    def deco(fn):
        ROUTES.append((method, rx, fn))
        return fn
    return deco


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-openai/1.0"
    timeout = 300  # an idle keep-alive connection does not hold a thread forever
    api_key = "test-key"

    def log_message(self, fmt, *args):  # requests are logged in finish_request_log
        pass

    # ---- plumbing

    def setup(self):
        super().setup()
        self.request_id = None

    def read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            chunks, total = [], 0
            while True:
                line = self.rfile.readline(1024)
                if not line:
                    raise ApiError(400, "Truncated chunked body.")
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers
                        t = self.rfile.readline(8192)
                        if t in (b"\r\n", b"\n", b""):
                            break
                    break
                total += size
                if total > MAX_BODY_BYTES:
                    self.close_connection = True
                    raise ApiError(413, "Request body too large.")
                chunks.append(self.rfile.read(size))
                self.rfile.readline(8)
            return b"".join(chunks)
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY_BYTES:
            self.close_connection = True
            raise ApiError(413, "Request body too large.")
        return self.rfile.read(n) if n else b""

    def common_headers(self):
        self.send_header("x-request-id", self.request_id)
        self.send_header("openai-processing-ms", str(int((time.monotonic() - self.t0) * 1000)))
        self.send_header("openai-version", "2020-10-01")
        self.send_header("x-ratelimit-limit-requests", "10000")
        self.send_header("x-ratelimit-remaining-requests", "9999")
        self.send_header("x-ratelimit-reset-requests", "6ms")
        self.send_header("x-ratelimit-limit-tokens", "10000000")
        self.send_header("x-ratelimit-remaining-tokens", "9999000")
        self.send_header("x-ratelimit-reset-tokens", "6ms")

    def record(self, status):
        self.status = status
        if self.is_api:
            with STATE.lock:
                STATE.requests.append({"method": self.command, "path": self.path_only,
                                       "status": status})
        log("%s %s -> %d (%s)" % (self.command, self.path_only, status, self.request_id))

    def send_bytes(self, status, data, content_type="application/json", headers=None):
        late = getattr(self, "late_fault", None)
        if late is not None:
            self.late_fault = None
            try:
                self.raise_fault(late)
            except ApiError as e:
                self.send_error_obj(e)
                return
        self.record(status)
        self.send_response(status)
        self.common_headers()
        for k, v in (headers or {}).items():
            if v is not None:
                self.send_header(k, v)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    def send_json(self, status, obj, headers=None):
        self.send_bytes(status, (json.dumps(obj) + "\n").encode("utf-8"), headers=headers)

    def send_error_obj(self, e):
        self.send_json(e.status, e.body(), headers=e.headers)

    def start_stream(self, content_type="text/event-stream; charset=utf-8"):
        self.record(200)
        self.send_response(200)
        self.common_headers()
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        self.streaming = True

    def write_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_stream(self):
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def abort_connection(self):
        """Closes the socket without ending the chunked body: the client sees a broken stream."""
        self.close_connection = True
        try:
            self.wfile.flush()
        except OSError:
            pass
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        except OSError:
            pass
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def json_body(self):
        if not self.body.strip():
            return {}
        try:
            obj = json.loads(self.body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise bad("We could not parse the JSON body of your request. (HINT: This likely means "
                      "you aren't using your HTTP library correctly. The OpenAI API expects a JSON "
                      "payload, but what was sent was not valid JSON.)")
        if not isinstance(obj, dict):
            raise bad("Invalid request body: expected a JSON object.")
        return obj

    def content_type(self):
        return (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()

    # ---- dispatch

    def handle_any(self):
        self.t0 = time.monotonic()
        self.request_id = "req_" + secrets.token_hex(16)
        self.streaming = False
        self.late_fault = None
        parsed = urllib.parse.urlsplit(self.path)
        self.path_only = parsed.path
        self.query = {k: v[-1] for k, v in urllib.parse.parse_qs(parsed.query).items()}
        self.is_api = not self.path_only.startswith("/_fake/")
        try:
            try:
                self.body = self.read_body()
            except ValueError:
                self.close_connection = True
                raise bad("Malformed request body framing.")
            if self.is_api:
                self.check_auth()
                self.apply_faults()
            for method, rx, fn in ROUTES:
                m = rx.match(self.path_only)
                if m and method == self.command:
                    fn(self, *m.groups())
                    return
            raise not_found("Invalid URL (%s %s)" % (self.command, self.path_only))
        except ApiError as e:
            if self.streaming:
                log("error after stream start: %s" % e.message)
                self.close_connection = True
                return
            self.send_error_obj(e)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:  # noqa: BLE001 - the fake must answer, not die
            import traceback
            traceback.print_exc(file=sys.stderr)
            if not self.streaming:
                try:
                    self.send_error_obj(ApiError(500, "fake-openai internal error: %s" % e,
                                                 type_="server_error"))
                except OSError:
                    pass
            self.close_connection = True

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = handle_any

    def check_auth(self):
        auth = self.headers.get("Authorization")
        if not auth:
            raise ApiError(401, "You didn't provide an API key. You need to provide your API key "
                           "in an Authorization header using Bearer auth (i.e. Authorization: "
                           "Bearer YOUR_KEY).", param=None, code=None)
        if not auth.startswith("Bearer ") or \
                not secrets.compare_digest(auth[len("Bearer "):].strip().encode(),
                                           self.api_key.encode()):
            raise ApiError(401, "Incorrect API key provided.", code="invalid_api_key")

    def apply_faults(self):
        f = STATE.take_fault(self.command, self.path_only, ("status_or_delay", "close"))
        if not f:
            return
        log("fault on %s %s: %s" % (self.command, self.path_only,
                                    {k: v for k, v in f.items() if k != "times"}))
        if f.get("after_handling"):
            # The request is carried out; only its answer is lost (send_bytes applies it).
            self.late_fault = dict(f, after_handling=False)
            return
        self.raise_fault(f)

    def raise_fault(self, f):
        if f.get("drop_connection"):
            self.record(0)
            self.abort_connection()
            raise ConnectionResetError()
        if f.get("delay_ms"):
            time.sleep(min(int(f["delay_ms"]), MAX_DELAY_MS) / 1000.0)
        status = f.get("status")
        if not status:
            return
        status = int(status)
        headers = {}
        if f.get("retry_after") is not None:
            headers["Retry-After"] = str(f["retry_after"])
        if f.get("retry_after_ms") is not None:
            headers["retry-after-ms"] = str(f["retry_after_ms"])
        if f.get("x_should_retry") is not None:
            headers["x-should-retry"] = "true" if f["x_should_retry"] else "false"
        if status == 429:
            type_, code = "requests", f.get("code") or "rate_limit_exceeded"
            msg = f.get("message") or "Rate limit reached for requests. Please try again later."
            headers["x-ratelimit-remaining-requests"] = "0"
        elif status >= 500:
            type_, code = "server_error", f.get("code")
            msg = f.get("message") or "The server had an error while processing your request. Sorry about that!"
        else:
            type_, code = "invalid_request_error", f.get("code")
            msg = f.get("message") or "Injected fault."
        raise ApiError(status, msg, type_=type_, code=code, headers=headers)


# ---- Files


@route("POST", "/v1/files")
def files_create(h):
    if h.content_type() != "multipart/form-data":
        raise bad("Invalid Content-Type header (%s), expected multipart/form-data."
                  % (h.content_type() or "none"))
    fields = parse_multipart(h.body, h.headers.get("Content-Type"))
    if "file" not in fields:
        raise missing("file")
    purpose = form_text(fields, "purpose")
    if purpose is None:
        raise missing("purpose")
    if purpose not in FILE_PURPOSES:
        raise invalid_value("purpose", "expected one of %s." % ", ".join(FILE_PURPOSES))
    anchor = form_text(fields, "expires_after[anchor]")
    seconds = form_text(fields, "expires_after[seconds]")
    now = STATE.now()
    expires_at = None
    if anchor is not None or seconds is not None:
        if anchor != "created_at":
            raise invalid_value("expires_after.anchor", "expected 'created_at'.")
        try:
            secs = int(seconds)
        except (TypeError, ValueError):
            raise invalid_type("expires_after.seconds", "an integer")
        if not 3600 <= secs <= 2592000:
            raise bad("Invalid 'expires_after.seconds': expected a value between 3600 and 2592000.",
                      param="expires_after.seconds", code="integer_out_of_range")
        expires_at = now + secs
    part = fields["file"][0]
    obj = {"id": new_id("file-"), "object": "file", "bytes": len(part["data"]), "created_at": now,
           "filename": safe_filename(part["filename"] or "file"), "purpose": purpose,
           "status": "processed", "expires_at": expires_at, "status_details": None}
    with STATE.lock:
        STATE.register(obj["id"])
        STATE.files[obj["id"]] = {"obj": obj, "data": part["data"]}
    h.send_json(200, obj)


@route("GET", "/v1/files")
def files_list(h):
    with STATE.lock:
        STATE.prune_files()
        items = [copy.deepcopy(f["obj"]) for f in STATE.files.values()]
        if h.query.get("purpose"):
            items = [o for o in items if o["purpose"] == h.query["purpose"]]
        page = STATE.paginate(items, h.query, 10000, 10000)
    h.send_json(200, page)


@route("GET", "/v1/files/([^/]+)")
def files_get(h, fid):
    with STATE.lock:
        obj = copy.deepcopy(STATE.live_file(fid)["obj"])
    h.send_json(200, obj)


@route("GET", "/v1/files/([^/]+)/content")
def files_content(h, fid):
    with STATE.lock:
        data = STATE.live_file(fid)["data"]
    h.send_bytes(200, data, "application/octet-stream")


@route("DELETE", "/v1/files/([^/]+)")
def files_delete(h, fid):
    with STATE.lock:
        STATE.live_file(fid)
        del STATE.files[fid]
    h.send_json(200, {"id": fid, "object": "file", "deleted": True})


# ---- Containers

CONTAINER_KEYS = ("name", "file_ids", "memory_limit", "expires_after", "network_policy", "skills")


def validate_network_policy(np, p):
    if not isinstance(np, dict):
        raise invalid_type(p, "an object")
    t = np.get("type")
    if t == "disabled":
        return {"type": "disabled"}
    if t != "allowlist":
        raise invalid_value(p + ".type", "expected 'disabled' or 'allowlist'.")
    doms = np.get("allowed_domains")
    if doms is None:
        raise missing(p + ".allowed_domains")
    if not isinstance(doms, list) or not doms or \
            not all(isinstance(d, str) and d.strip() for d in doms):
        raise invalid_value(p + ".allowed_domains", "expected a non-empty array of domain names.")
    secrets_ = np.get("domain_secrets")
    if secrets_ is not None:
        if not isinstance(secrets_, list):
            raise invalid_type(p + ".domain_secrets", "an array")
        for i, s in enumerate(secrets_):
            q = "%s.domain_secrets[%d]" % (p, i)
            if not isinstance(s, dict):
                raise invalid_type(q, "an object")
            for k in ("domain", "name", "value"):
                if k not in s:
                    raise missing(q + "." + k)
                if not isinstance(s[k], str) or not s[k]:
                    raise invalid_type(q + "." + k, "a non-empty string")
            if len(s["value"]) > 10485760:
                raise bad("Invalid '%s.value': string too long." % q, param=q + ".value",
                          code="string_above_max_length")
    return {"type": "allowlist", "allowed_domains": list(doms)}  # secrets are not echoed


def create_container(body, param_prefix=""):
    """Validates a create body, makes the container; returns the record (caller holds no lock)."""
    pp = param_prefix
    name = body.get("name")
    if name is None:
        raise missing(pp + "name")
    if not isinstance(name, str):
        raise invalid_type(pp + "name", "a string")
    file_ids = body.get("file_ids") or []
    if not isinstance(file_ids, list) or not all(isinstance(x, str) for x in file_ids):
        raise invalid_type(pp + "file_ids", "an array of strings")
    ml = body.get("memory_limit")
    if ml is None:
        ml = "1g"
    if ml not in MEMORY_LIMITS:
        raise invalid_value(pp + "memory_limit", "expected one of %s." % ", ".join(MEMORY_LIMITS))
    ea = body.get("expires_after")
    if ea is None:
        ea = {"anchor": "last_active_at", "minutes": DEFAULT_CONTAINER_MINUTES}
    else:
        if not isinstance(ea, dict):
            raise invalid_type(pp + "expires_after", "an object")
        if "anchor" not in ea:
            raise missing(pp + "expires_after.anchor")
        if ea["anchor"] != "last_active_at":
            raise invalid_value(pp + "expires_after.anchor", "expected 'last_active_at'.")
        if "minutes" not in ea:
            raise missing(pp + "expires_after.minutes")
        if not isinstance(ea["minutes"], int) or isinstance(ea["minutes"], bool) or ea["minutes"] < 1:
            raise invalid_value(pp + "expires_after.minutes", "expected a positive integer.")
        ea = {"anchor": "last_active_at", "minutes": ea["minutes"]}
    np = body.get("network_policy")
    np_echo = validate_network_policy(np, pp + "network_policy") if np is not None else None
    if body.get("skills") is not None and not isinstance(body["skills"], list):
        raise invalid_type(pp + "skills", "an array")
    with STATE.lock:
        for i, fid in enumerate(file_ids):
            try:
                STATE.live_file(fid)
            except ApiError:
                raise ApiError(404, "No such File object: %s" % fid, param="%sfile_ids[%d]" % (pp, i))
        now = STATE.now()
        cid = new_id("cntr_", 16)
        d = tempfile.mkdtemp(prefix=cid + "-", dir=STATE.root)
        os.chmod(d, 0o777)
        obj = {"id": cid, "object": "container", "name": name, "created_at": now,
               "status": "running", "last_active_at": now, "expires_after": ea,
               "memory_limit": ml}
        if np_echo is not None:
            obj["network_policy"] = np_echo
        c = {"obj": obj, "dir": d, "files": {}}
        STATE.register(cid)
        STATE.containers[cid] = c
        for fid in file_ids:
            f = STATE.files[fid]
            STATE.add_container_file(c, f["obj"]["filename"], f["data"], "user")
    return c


@route("POST", "/v1/containers")
def containers_create(h):
    body = h.json_body()
    reject_unknown(body, CONTAINER_KEYS)
    c = create_container(body)
    with STATE.lock:
        obj = copy.deepcopy(c["obj"])
    h.send_json(200, obj)


@route("GET", "/v1/containers")
def containers_list(h):
    with STATE.lock:
        items = []
        for c in STATE.containers.values():
            STATE.refresh_status(c)
            items.append(copy.deepcopy(c["obj"]))
        if h.query.get("name"):
            items = [o for o in items if o["name"] == h.query["name"]]
        page = STATE.paginate(items, h.query, 20, 100)
    h.send_json(200, page)


@route("GET", "/v1/containers/([^/]+)")
def containers_get(h, cid):
    with STATE.lock:
        obj = copy.deepcopy(STATE.container(cid)["obj"])
    h.send_json(200, obj)


@route("DELETE", "/v1/containers/([^/]+)")
def containers_delete(h, cid):
    with STATE.lock:
        STATE.container(cid)
        STATE.delete_container(cid)
    h.send_json(200, {"id": cid, "object": "container.deleted", "deleted": True})


# ---- Container files


@route("POST", "/v1/containers/([^/]+)/files")
def cfiles_create(h, cid):
    ct = h.content_type()
    if ct == "multipart/form-data":
        fields = parse_multipart(h.body, h.headers.get("Content-Type"))
        if "file_id" in fields and "file" not in fields:
            file_id, upload = form_text(fields, "file_id"), None
        elif "file" in fields:
            file_id, upload = None, fields["file"][0]
        else:
            raise missing("file")
    else:
        body = h.json_body()
        file_id, upload = body.get("file_id"), None
        if not isinstance(file_id, str):
            raise missing("file_id") if file_id is None else invalid_type("file_id", "a string")
    with STATE.lock:
        c = STATE.usable_container(cid)
        if upload is not None:
            name, data = upload["filename"] or "upload", upload["data"]
        else:
            try:
                f = STATE.live_file(file_id)
            except ApiError:
                raise ApiError(404, "No such File object: %s" % file_id, param="file_id")
            name, data = f["obj"]["filename"], f["data"]
        STATE.touch(c, by="files")
        fo = copy.deepcopy(STATE.add_container_file(c, name, data, "user"))
    h.send_json(200, fo)


@route("GET", "/v1/containers/([^/]+)/files")
def cfiles_list(h, cid):
    with STATE.lock:
        c = STATE.usable_container(cid)
        STATE.touch(c, by="files")
        STATE.sync_container_files(c)
        page = STATE.paginate([copy.deepcopy(f) for f in c["files"].values()], h.query, 20, 100)
    h.send_json(200, page)


def container_file(cid, fid):
    c = STATE.usable_container(cid)
    STATE.touch(c, by="files")
    STATE.sync_container_files(c)
    fo = c["files"].get(fid)
    if not fo:
        raise not_found("No such container file: %s" % fid)
    return c, fo


@route("GET", "/v1/containers/([^/]+)/files/([^/]+)")
def cfiles_get(h, cid, fid):
    with STATE.lock:
        _, fo = container_file(cid, fid)
        fo = copy.deepcopy(fo)
    h.send_json(200, fo)


@route("GET", "/v1/containers/([^/]+)/files/([^/]+)/content")
def cfiles_content(h, cid, fid):
    with STATE.lock:
        c, fo = container_file(cid, fid)
        path = STATE.container_file_disk_path(c, fo)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as fh:
                data = fh.read()
        except OSError:
            raise not_found("No such container file: %s" % fid)
    if STATE.take_fault(h.command, h.path_only, ("truncate",)):
        # The full Content-Length, half the bytes, then the connection is cut.
        h.record(200)
        h.send_response(200)
        h.common_headers()
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data[:len(data) // 2])
        h.wfile.flush()
        h.close_connection = True
        h.connection.shutdown(socket.SHUT_WR)  # a clean FIN: what was sent arrives, then EOF
        return
    h.send_bytes(200, data, "application/octet-stream")


@route("DELETE", "/v1/containers/([^/]+)/files/([^/]+)")
def cfiles_delete(h, cid, fid):
    with STATE.lock:
        c, fo = container_file(cid, fid)
        path = STATE.container_file_disk_path(c, fo)
        try:
            os.unlink(path)
        except OSError:
            pass
        del c["files"][fid]
    h.send_json(200, {"id": fid, "object": "container.file.deleted", "deleted": True})


# ---- Responses

RESPONSE_TERMINAL = ("completed", "failed", "incomplete", "cancelled")


@route("POST", "/v1/responses")
def responses_create(h):
    body = h.json_body()
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise missing("model")
    inp = body.get("input")
    if inp is not None and not isinstance(inp, (str, list)):
        raise invalid_type("input", "a string or an array")
    items = inp if isinstance(inp, list) else []
    tools, info = analyse_tools(body)
    validate_tool_choice(body.get("tool_choice"))
    mot = body.get("max_output_tokens")
    if mot is not None and (not isinstance(mot, int) or isinstance(mot, bool) or mot < 16):
        raise bad("Invalid 'max_output_tokens': integer below minimum value. Expected a value "
                  ">= 16, but got %r instead." % (mot,), param="max_output_tokens",
                  code="integer_below_min_value")
    mtc = body.get("max_tool_calls")
    if mtc is not None and (not isinstance(mtc, int) or mtc < 1):
        raise invalid_value("max_tool_calls", "expected a positive integer.")
    prev_id = body.get("previous_response_id")
    stream = bool(body.get("stream"))
    background = bool(body.get("background"))
    with STATE.lock:
        # validate the outputs against the pending calls of the previous response
        if prev_id is not None:
            prev = STATE.responses.get(prev_id)
            if prev is None or not prev["obj"]["store"]:
                raise bad("Previous response with id '%s' not found." % prev_id,
                          param="previous_response_id", code="previous_response_not_found")
            if prev["obj"]["status"] in ("queued", "in_progress"):
                raise bad("Previous response with id '%s' is still in progress." % prev_id,
                          param="previous_response_id")
            for cid in prev["containers"]:
                c = STATE.containers.get(cid)
                if c is not None:
                    STATE.refresh_status(c)
                if c is None or c["obj"]["status"] != "running":
                    raise bad("Container is expired.")
            pending = {call_id: kind for kind, call_id in prev["pending"]}
            start_turn = prev["next_turn"]
        else:
            pending = {}
            start_turn = count_model_turns(items)
        answered = set()
        own_calls = {it.get("call_id") for it in items
                     if isinstance(it, dict) and it.get("type") in TURN_ITEM_TYPES}
        for i, it in enumerate(items):
            if not isinstance(it, dict):
                raise invalid_type("input[%d]" % i, "an object")
            t = it.get("type")
            if t in ("shell_call_output", "function_call_output", "local_shell_call_output"):
                key = "id" if t == "local_shell_call_output" else "call_id"
                call_id = it.get(key)
                if not isinstance(call_id, str):
                    raise missing("input[%d].%s" % (i, key))
                kind = "shell_call" if t == "shell_call_output" else "function_call"
                if t == "shell_call_output":
                    validate_shell_output_item(it, "input[%d]" % i)
                elif t == "function_call_output" and "output" not in it:
                    raise missing("input[%d].output" % i)
                if pending.get(call_id) == kind or call_id in own_calls:
                    answered.add(call_id)
                else:
                    raise bad("No tool call found for %s output with call_id %s."
                              % (kind.replace("_", " "), call_id), param="input")
        for call_id, kind in pending.items():
            if call_id not in answered:
                raise bad("No tool output found for %s %s." % (kind.replace("_", " "), call_id),
                          param="input")
        containers = []
        shell = info["shell"]
        if shell and shell["kind"] == "hosted":
            c = STATE.containers.get(shell["container_id"])
            if c is None:
                raise ApiError(404, "Container with id '%s' not found." % shell["container_id"],
                               param=shell["param"])
            STATE.usable_container(shell["container_id"])
            containers.append(shell["container_id"])
    if shell and shell["kind"] == "auto":
        env = shell["env"]
        c = create_container({"name": "auto", "file_ids": env.get("file_ids"),
                              "memory_limit": env.get("memory_limit"),
                              "network_policy": env.get("network_policy")},
                             param_prefix="tools.environment.")
        shell.update({"kind": "hosted", "container_id": c["obj"]["id"]})
        containers.append(c["obj"]["id"])
    elif prev_id is not None:
        with STATE.lock:
            for cid in STATE.responses[prev_id]["containers"]:
                if cid not in containers:
                    containers.append(cid)
    now = STATE.now()
    resp = {"id": new_id("resp_", 24), "object": "response", "created_at": now,
            "status": "queued" if background else "in_progress", "background": background,
            "completed_at": None, "error": None, "incomplete_details": None,
            "instructions": body.get("instructions"), "max_output_tokens": mot,
            "max_tool_calls": mtc, "model": body["model"], "output": [],
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": prev_id, "reasoning": {"effort": None, "summary": None},
            "store": body.get("store", True), "temperature": body.get("temperature", 1.0),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"), "tools": tools,
            "top_p": body.get("top_p", 1.0), "truncation": body.get("truncation", "disabled"),
            "usage": None, "user": None, "metadata": body.get("metadata") or {}}
    # The scripted model obeys one plain instruction besides its scenario, as a real one would:
    # "Run exactly this shell command, nothing else: `CMD`" runs CMD, then says "done".
    literal = LITERAL_COMMAND.match(inp) if isinstance(inp, str) else None
    rec = {"obj": resp, "start_turn": start_turn, "next_turn": start_turn, "pending": [],
           "literal": [{"shell": [literal.group(1)]}, {"message": "done"}] if literal else None,
           "containers": containers, "cancel": threading.Event(), "done": threading.Event(),
           # A background response's events, kept so that GET /responses/{id}?stream=true can
           # stream them again (from starting_after) and follow it to its end.
           "events": [], "ended": False, "events_cv": threading.Condition()}

    def keep_event(ev):
        if not background:
            return
        with rec["events_cv"]:
            rec["events"].append(copy.deepcopy(ev))
            if ev["type"] in TERMINAL_EVENTS:
                rec["ended"] = True
            rec["events_cv"].notify_all()
    with STATE.lock:
        STATE.responses[resp["id"]] = rec

    def finish(result):
        with STATE.lock:
            if rec["cancel"].is_set() and result["status"] != "cancelled":
                result = {"status": "cancelled"}
            resp["status"] = result["status"]
            resp["error"] = result.get("error")
            resp["incomplete_details"] = result.get("incomplete_details")
            resp["usage"] = response_usage(body, resp)
            if resp["status"] == "completed":
                resp["completed_at"] = STATE.now()
            snapshot = copy.deepcopy(resp)
        rec["done"].set()
        return snapshot

    def run(sink):
        with STATE.lock:
            if resp["status"] == "queued":
                resp["status"] = "in_progress"
        try:
            result = ResponsesRun(STATE, rec, info, sink, rec["cancel"]).play()
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc(file=sys.stderr)
            result = {"status": "failed", "error": {"code": "server_error", "message": str(e)}}
        return finish(result)

    def play_all(sink):
        with STATE.lock:
            snap = copy.deepcopy(resp)
        sink.emit("response.created", response=snap)
        if background:
            sink.emit("response.queued", response=snap)
        snap["status"] = "in_progress"
        sink.emit("response.in_progress", response=snap)
        final = run(sink)
        sink.emit(TERMINAL_EVENT_OF[final["status"]], response=final)
        return final

    if stream:
        drop = STATE.take_fault(h.command, h.path_only, ("drop",))
        h.start_stream()
        # The response plays on in this thread when the stream drops: a background response
        # (and, as far as the client can tell, any other) is not stopped by a lost connection.
        sink = EventSink(h, drop_after=(drop.get("after_frames", 3) if drop else None),
                         on_event=keep_event)
        play_all(sink)
        if not sink.dead:
            h.end_stream()
        return
    if background:
        with STATE.lock:
            snap = copy.deepcopy(resp)
        threading.Thread(target=play_all, args=(EventSink(on_event=keep_event),),
                         daemon=True).start()
        h.send_json(200, snap)
        return
    h.send_json(200, run(EventSink()))


LITERAL_COMMAND = re.compile(r"^Run exactly this shell command, nothing else: `([^`]+)`")

TERMINAL_EVENT_OF = {"completed": "response.completed", "failed": "response.failed",
                     "incomplete": "response.incomplete", "cancelled": "response.failed"}
TERMINAL_EVENTS = set(TERMINAL_EVENT_OF.values())


def responses_stream_again(h, rec):
    """GET /responses/{id}?stream=true[&starting_after=N] (openai-python
    ResponseRetrieveParamsStreaming): the events of a background response numbered above N,
    then the rest live until its terminal event. Only background responses keep their events
    (the message of the 400 for others is a guess)."""
    if not rec["obj"]["background"]:
        raise bad("Streaming a response again is only supported for responses created with "
                  "background=true.", param="stream")
    after = h.query.get("starting_after")
    try:
        after = -1 if after is None else int(after)
    except ValueError:
        raise invalid_type("starting_after", "an integer")
    drop = STATE.take_fault(h.command, h.path_only, ("drop",))
    h.start_stream()
    sink = EventSink(h, drop_after=(drop.get("after_frames", 3) if drop else None))
    sent = 0
    while not sink.dead:
        with rec["events_cv"]:
            while sent >= len(rec["events"]) and not rec["ended"]:
                rec["events_cv"].wait(1.0)
            batch = rec["events"][sent:]
            sent = len(rec["events"])
            ended = rec["ended"]
        for ev in batch:
            if ev["sequence_number"] > after:
                sink.replay(ev)
        if ended:
            break
    if not sink.dead:
        h.end_stream()


@route("GET", "/v1/responses/([^/]+)")
def responses_get(h, rid):
    with STATE.lock:
        rec = STATE.responses.get(rid)
        if not rec or not rec["obj"]["store"]:
            raise not_found("Response with id '%s' not found." % rid)
        obj = copy.deepcopy(rec["obj"])
    if h.query.get("stream") == "true":
        responses_stream_again(h, rec)
        return
    h.send_json(200, obj)


@route("DELETE", "/v1/responses/([^/]+)")
def responses_delete(h, rid):
    with STATE.lock:
        if rid not in STATE.responses:
            raise not_found("Response with id '%s' not found." % rid)
        del STATE.responses[rid]
    h.send_json(200, {"id": rid, "object": "response.deleted", "deleted": True})


@route("POST", "/v1/responses/([^/]+)/cancel")
def responses_cancel(h, rid):
    with STATE.lock:
        rec = STATE.responses.get(rid)
        if not rec:
            raise not_found("Response with id '%s' not found." % rid)
        if not rec["obj"]["background"]:
            raise bad("Only responses created with background=true can be cancelled.")
        rec["cancel"].set()
    rec["done"].wait(timeout=30)  # bounded: a running command is killed at once
    with STATE.lock:
        if rec["obj"]["status"] in ("queued", "in_progress"):
            rec["obj"]["status"] = "cancelled"
        obj = copy.deepcopy(rec["obj"])
    h.send_json(200, obj)


# ---- Chat Completions


@route("POST", "/v1/chat/completions")
def chat_create(h):
    body = h.json_body()
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise missing("model")
    messages = body.get("messages")
    if messages is None:
        raise missing("messages")
    validate_chat_messages(messages)
    names = chat_function_names(body)
    tc = body.get("tool_choice")
    if tc is not None and tc not in ("none", "auto", "required") and not (
            isinstance(tc, dict) and tc.get("type") == "function" and
            isinstance(tc.get("function"), dict) and isinstance(tc["function"].get("name"), str)):
        raise invalid_value("tool_choice", "expected 'none', 'auto', 'required' or "
                                           "{type: 'function', function: {name}}.")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise invalid_value("max_completion_tokens", "expected a positive integer.")
    turn_idx = sum(1 for m in messages if m.get("role") == "assistant")
    with STATE.lock:
        turns = list(STATE.turns)
    turn = turns[turn_idx] if turn_idx < len(turns) else {
        "message": "[fake-openai: the scenario has no turn %d]" % turn_idx}
    content, tool_calls, finish = None, None, "stop"
    if "fail" in turn:
        f = turn["fail"]
        raise ApiError(500, f.get("message", "The server had an error while processing your request."),
                       type_="server_error", code=f.get("code", "server_error"))
    if "incomplete" in turn:
        content, finish = "", ("length" if turn["incomplete"] == "max_output_tokens" else "content_filter")
    elif "message" in turn:
        content = turn["message"]
        if max_tokens is not None and tokens(content) > max_tokens:
            content, finish = content[:max_tokens * 4], "length"
    else:
        if "function" in turn:
            name, args = turn["function"]["name"], turn["function"].get("arguments", "")
        else:
            a = {"commands": turn["shell"]}
            for k in ("timeout_ms", "max_output_length"):
                if turn.get(k) is not None:
                    a[k] = turn[k]
            name = "shell" if ("shell" in names or not names) else names[0]
            args = json.dumps(a)
        tool_calls = [{"id": new_id("call_"), "type": "function",
                       "function": {"name": name, "arguments": args}}]
        finish = "tool_calls"
    prompt = tokens(json.dumps(messages, sort_keys=True)) + 8
    out = tokens(content or "") + sum(tokens(t["function"]["arguments"]) + 4 for t in tool_calls or [])
    usage = {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out,
             "prompt_tokens_details": {"cached_tokens": 0},
             "completion_tokens_details": {"reasoning_tokens": 0}}
    cid = new_id("chatcmpl-", 16)
    created = STATE.now()
    base = {"id": cid, "created": created, "model": body["model"], "system_fingerprint": "fp_fake",
            "service_tier": "default"}
    if not body.get("stream"):
        msg = {"role": "assistant", "content": content, "refusal": None, "annotations": []}
        if tool_calls:
            msg["tool_calls"] = tool_calls
        h.send_json(200, dict(base, object="chat.completion", usage=usage, choices=[
            {"index": 0, "message": msg, "finish_reason": finish, "logprobs": None}]))
        return
    drop = STATE.take_fault(h.command, h.path_only, ("drop",))
    h.start_stream()
    sink = EventSink(h, drop_after=(drop.get("after_frames", 3) if drop else None), chat=True)
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

    def chunk(delta, finish_reason=None):
        c = dict(base, object="chat.completion.chunk",
                 choices=[{"index": 0, "delta": delta, "finish_reason": finish_reason,
                           "logprobs": None}])
        if include_usage:
            c["usage"] = None
        sink.data(c)

    chunk({"role": "assistant", "content": "" if tool_calls is None else None, "refusal": None})
    if content:
        for piece in text_pieces(content):
            chunk({"content": piece})
    for i, t in enumerate(tool_calls or []):
        chunk({"tool_calls": [{"index": i, "id": t["id"], "type": "function",
                               "function": {"name": t["function"]["name"], "arguments": ""}}]})
        for piece in text_pieces(t["function"]["arguments"], 16):
            if piece:
                chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    chunk({}, finish)
    if include_usage:
        sink.data(dict(base, object="chat.completion.chunk", choices=[], usage=usage))
    sink.data("[DONE]")
    if not sink.dead:
        h.end_stream()


# ---- admin


@route("POST", "/_fake/scenario")
def admin_scenario(h):
    turns = validate_scenario(h.json_body())
    with STATE.lock:
        STATE.turns = copy.deepcopy(turns)
    h.send_json(200, {"ok": True, "turns": len(turns)})


@route("GET", "/_fake/state")
def admin_state(h):
    agents = fake_agents.state_view()  # before STATE.lock: its lock comes first
    with STATE.lock:
        cs = []
        for c in STATE.containers.values():
            STATE.refresh_status(c)
            cs.append({"id": c["obj"]["id"], "name": c["obj"]["name"],
                       "status": c["obj"]["status"],
                       "last_active_at": c["obj"]["last_active_at"]})
        STATE.prune_files()
        out = {"containers": cs, "files": list(STATE.files),
               "responses": [{"id": r["obj"]["id"], "status": r["obj"]["status"]}
                             for r in STATE.responses.values()],
               "requests": list(STATE.requests), "running_commands": STATE.running_commands,
               "now": STATE.now(), "isolation": "bwrap" if STATE.use_bwrap else "none",
               "faults_pending": sum(1 for f in STATE.faults if f["times"] > 0),
               "agents": agents}
    h.send_json(200, out)


@route("POST", "/_fake/faults")
def admin_faults(h):
    body = h.json_body()
    faults = body.get("faults", [body]) if isinstance(body, dict) else None
    if not isinstance(faults, list):
        raise bad("faults: expected a fault object or {\"faults\": [...]}")
    clean = []
    for i, f in enumerate(faults):
        if not isinstance(f, dict):
            raise bad("faults[%d]: expected an object" % i)
        if not any(f.get(k) for k in ("status", "delay_ms", "drop_mid_stream", "drop_connection",
                                      "truncate_body")):
            raise bad("faults[%d]: needs status, delay_ms, drop_mid_stream, drop_connection or "
                      "truncate_body" % i)
        f = dict(f)
        f["times"] = int(f.get("times", 1))
        clean.append(f)
    with STATE.lock:
        if body.get("replace"):
            STATE.faults = []
        STATE.faults.extend(clean)
    h.send_json(200, {"ok": True, "faults": len(clean)})


@route("DELETE", "/_fake/faults")
def admin_faults_clear(h):
    with STATE.lock:
        STATE.faults = []
    h.send_json(200, {"ok": True})


@route("POST", "/_fake/clock")
def admin_clock(h):
    body = h.json_body()
    try:
        secs = float(body.get("advance_seconds", 0))
    except (TypeError, ValueError):
        raise invalid_type("advance_seconds", "a number")
    freeze = body.get("freeze")
    if freeze is not None and not isinstance(freeze, bool):
        raise invalid_type("freeze", "a boolean")
    with STATE.lock:
        if freeze is True and STATE.frozen_at is None:
            STATE.frozen_at = time.time()
        elif freeze is False and STATE.frozen_at is not None:
            STATE.clock_offset -= time.time() - STATE.frozen_at  # resumes from where it stood
            STATE.frozen_at = None
        STATE.clock_offset += secs
        now = STATE.now()
    h.send_json(200, {"ok": True, "now": now})


@route("POST", "/_fake/activity")
def admin_activity(h):
    counts = h.json_body().get("counts")
    if counts not in ACTIVITY_COUNTS:
        raise bad("counts: one of %s" % "|".join(sorted(ACTIVITY_COUNTS)), param="counts")
    with STATE.lock:
        STATE.activity = counts
    h.send_json(200, {"ok": True, "counts": counts})


@route("POST", "/_fake/reset")
def admin_reset(h):
    fake_agents.reset()
    with STATE.lock:
        for rec in STATE.responses.values():
            rec["cancel"].set()
        for cid in list(STATE.containers):
            STATE.delete_container(cid)
        STATE.clear()
    h.send_json(200, {"ok": True})


# --------------------------------------------------------------------------------------------


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


def main(argv=None):
    global STATE
    ap = argparse.ArgumentParser(description="Fake OpenAI API server for sandgate tests")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--api-key", default=os.environ.get("FAKE_OPENAI_API_KEY", "test-key"))
    ap.add_argument("--workdir", default=None,
                    help="where container workspaces live (default: a fresh temp dir, removed at exit)")
    ap.add_argument("--default-timeout-ms", type=int, default=10000,
                    help="hosted command timeout when the scripted turn gives none")
    ap.add_argument("--no-bwrap", action="store_true", help="run hosted commands unisolated")
    args = ap.parse_args(argv)

    own_root = args.workdir is None
    root = tempfile.mkdtemp(prefix="fake-openai-") if own_root else os.path.abspath(args.workdir)
    os.makedirs(root, exist_ok=True)
    use_bwrap = False
    if args.no_bwrap:
        log("NOTE: --no-bwrap: hosted commands run UNISOLATED with cwd=<workspace>")
    else:
        problem = probe_bwrap(root)
        if problem:
            log("NOTE: bwrap is unusable (%s); hosted commands run UNISOLATED with "
                "cwd=<workspace>; /mnt/data paths will not resolve" % problem)
        else:
            use_bwrap = True
    STATE = State(root, use_bwrap, args.default_timeout_ms)
    Handler.api_key = args.api_key
    httpd = Server((args.host, args.port), Handler)

    def on_signal(signum, frame):
        # Not an exception raised wherever the main thread is: landing inside a lock's acquire
        # or release (CI printed "release unlocked lock" from one) it could leave a lock held,
        # and the cleanup below would then wait on it for ever. serve_forever ends at its next
        # poll; shutdown() waits for that, so it runs on a thread of its own. Once.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        threading.Thread(target=httpd.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    host, port = httpd.server_address[:2]
    # Once "listening" is out a test may stop the server at any moment: the workdir line is
    # written before it, and serve_forever returns into the try (cleanup runs).
    try:
        log("serving on http://%s:%d (isolation: %s, workdir %s)"
            % (host, port, "bwrap" if use_bwrap else "none", root))
        sys.stdout.write("listening on http://%s:%d\n" % (host, port))
        sys.stdout.flush()
        httpd.serve_forever(poll_interval=0.2)
    except (SystemExit, KeyboardInterrupt):
        pass
    finally:
        httpd.server_close()
        fake_agents.reset()
        with STATE.lock:
            for rec in STATE.responses.values():
                rec["cancel"].set()
            for cid in list(STATE.containers):
                STATE.delete_container(cid)
        with RUNNING_LOCK:
            for proc in list(RUNNING):
                kill_group(proc)
        if own_root:
            shutil.rmtree(root, ignore_errors=True)
        log("stopped")
    return 0


# The Agents API lives in its own module and mounts its routes on this one's (it imports this
# module by name: run as a script, the file is imported again as `fake_openai` so that both
# share one set of globals).
import fake_agents  # noqa: E402

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import fake_openai as _module  # noqa: E402
    sys.exit(_module.main())
