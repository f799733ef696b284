#!/usr/bin/env python3
"""sandbox-probe: the environment checks a team runs before trusting a sandbox.

Usage: python3 sandbox_probe.py probe.json

probe.json (written by the daemon) says what the caller asked for:
  {"inputs": [{"name": "data.csv", "sha256": "..."}], "env": {"NAME": "value", ...},
   "network": "disabled", "allowed_domains": [], "probe_url": "https://example.com/",
   "setup_commands": ["..."]}

Writes sandbox-report.md (for people) and checks.json (for the daemon's verifier) in the
current directory. A blocked network is a finding, not a failure: curl's exit code and
message are recorded. Exits 0 unless the probe itself cannot run (bad config: exit 2).
Standard library only.
"""

import ctypes
import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time

REPORT = "sandbox-report.md"
CHECKS = "checks.json"


def run(argv, timeout=15):
    """(exit code, stdout, stderr) of a command; exit code None when it cannot start."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout.strip(), p.stderr.strip()
    except FileNotFoundError:
        return None, "", "%s: not installed" % argv[0]
    except subprocess.TimeoutExpired:
        return None, "", "%s: timed out after %ss" % (argv[0], timeout)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


def probe_inputs(inputs):
    results = []
    for item in inputs:
        name = item["name"]
        entry = {"name": name, "readable": False, "sha256": None, "bytes": None,
                 "matches": False}
        try:
            entry["sha256"] = sha256_of(name)
            entry["bytes"] = os.path.getsize(name)
            entry["readable"] = True
            entry["matches"] = entry["sha256"] == item.get("sha256")
        except OSError as e:
            entry["error"] = "%s: %s" % (name, e.strerror)
        results.append(entry)
    return results


def probe_env(expected):
    """Names only, and whether each value is the one requested: values may be secrets."""
    return {name: ("matches" if os.environ.get(name) == value else
                   "differs" if name in os.environ else "missing")
            for name, value in sorted(expected.items())}


def probe_network(url):
    result = {"url": url, "tool": None, "exit_code": None, "message": "", "reached": False}
    if shutil.which("curl"):
        code, out, err = run(["curl", "-sS", "-o", "/dev/null", "-m", "5",
                              "-w", "%{http_code}", url], timeout=10)
        result.update(tool="curl", exit_code=code, message=err or ("HTTP %s" % out),
                      reached=code == 0)
        return result
    host = url.split("://", 1)[-1].split("/", 1)[0].split(":")[0]
    try:
        socket.create_connection((host, 443), timeout=5).close()
        result.update(tool="python-socket", exit_code=0, message="connected", reached=True)
    except OSError as e:
        result.update(tool="python-socket", exit_code=e.errno or 1, message=str(e))
    return result


def probe_isolation():
    """(level, evidence) as seen from inside: gVisor's kernel says so in its log; a namespaces
    sandbox is the host's kernel behind a seccomp filter, which refuses the log."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        buf = ctypes.create_string_buffer(1 << 16)
        n = libc.klogctl(3, buf, len(buf))  # SYSLOG_ACTION_READ_ALL
        if n > 0 and b"gVisor" in buf.raw[:n]:
            return "gvisor", "the kernel log says: Starting gVisor..."
    except (OSError, AttributeError):
        pass
    status = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                status[k] = v.strip()
    except OSError:
        pass
    if status.get("Seccomp") == "2":
        return "namespaces", "the host's kernel behind a seccomp filter (Seccomp: 2, NoNewPrivs: %s)" % (
            status.get("NoNewPrivs", "?"))
    return "none", "no seccomp filter and no gVisor kernel log (Seccomp: %s)" % (
        status.get("Seccomp", "?"))


def workspace_listing(skip):
    files = []
    for root, dirs, names in os.walk("."):
        dirs.sort()
        for n in sorted(names):
            path = os.path.relpath(os.path.join(root, n), ".")
            if path in skip:
                continue
            try:
                st = os.lstat(path)
                files.append({"path": path, "bytes": st.st_size})
            except OSError:
                pass
    return files


def check(checks, name, ok, detail):
    checks.append({"name": name, "ok": bool(ok), "detail": detail})


def main(argv):
    if len(argv) != 2:
        print("usage: sandbox_probe.py probe.json", file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        print("fatal: cannot read %s: %s" % (argv[1], e), file=sys.stderr)
        return 2
    started = time.time()
    uname = platform.uname()
    os_release = {}
    try:
        with open("/etc/os-release") as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                os_release[k] = v.strip('"')
    except OSError:
        pass
    node_code, node_out, node_err = run(["node", "--version"])
    isolation, isolation_evidence = probe_isolation()
    facts = {
        "os": os_release.get("PRETTY_NAME") or uname.system,
        "kernel": uname.release,
        "hostname": uname.node,
        "cwd": os.getcwd(),
        "uid": os.getuid(),
        "gid": os.getgid(),
        "python": platform.python_version(),
        "node": node_out if node_code == 0 else None,
        "node_error": None if node_code == 0 else node_err,
        "pid": os.getpid(),
        "isolation": isolation,
        "isolation_evidence": isolation_evidence,
    }
    print("probing: %s, kernel %s, isolation %s, python %s, cwd %s" % (
        facts["os"], facts["kernel"], facts["isolation"], facts["python"], facts["cwd"]),
          flush=True)
    inputs = probe_inputs(config.get("inputs", []))
    env = probe_env(config.get("env", {}))
    network = probe_network(config.get("probe_url", "https://example.com/"))
    print("network probe: %s exit %s: %s" % (network["tool"], network["exit_code"],
                                             network["message"]), flush=True)
    skip = {argv[1], os.path.basename(__file__), REPORT, CHECKS}
    skip.update(i["name"] for i in config.get("inputs", []))
    workspace = workspace_listing(skip)

    checks = []
    check(checks, "python", True, "python %s" % facts["python"])
    check(checks, "node", True, facts["node"] or "node not available: %s" % facts["node_error"])
    check(checks, "inputs_readable", inputs and all(i["readable"] and i["matches"] for i in inputs),
          ", ".join("%s %s" % (i["name"], "ok" if i["matches"] else i.get("error", "differs"))
                    for i in inputs) or "no inputs")
    check(checks, "env_visible", all(v == "matches" for v in env.values()),
          ", ".join("%s %s" % kv for kv in env.items()) or "no variables requested")
    # The daemon runs the setup commands before this program and ends the run at the first
    # one that fails, so every command listed here ran and exited 0. A setup need not leave a
    # file (`echo setup-ran` leaves none); the files found are recorded, not required.
    setup = config.get("setup_commands", [])
    setup_record = {
        "commands": setup,
        "ran": True,
        "exit_codes": [0] * len(setup),
        "how_known": "the daemon runs each setup command (sh -c) before the probe and ends the "
                     "run at the first nonzero exit; their output is in the run's setup events",
        "files_in_workspace": [f["path"] for f in workspace],
    }
    check(checks, "setup_output", True,
          "%d setup command(s) ran before the probe, each exited 0; files in the workspace: %s"
          % (len(setup), ", ".join(f["path"] for f in workspace) or "none"))
    check(checks, "network", True,
          "%s: %s exit %s (%s)" % (config.get("network", "disabled"), network["tool"],
                                   network["exit_code"], network["message"]))

    document = {"facts": facts, "inputs": inputs, "env": env, "network": network,
                "expected_network": config.get("network", "disabled"),
                "workspace": workspace, "setup": setup_record, "checks": checks,
                "outputs": [REPORT, CHECKS], "duration_seconds": round(time.time() - started, 3)}
    with open(CHECKS, "w") as f:
        json.dump(document, f, indent=2, sort_keys=True)
        f.write("\n")

    lines = ["# Sandbox probe report", "",
             "## Environment", "",
             "| fact | value |", "| --- | --- |"]
    for k in ("os", "kernel", "isolation", "isolation_evidence", "hostname", "cwd", "uid",
              "python", "node"):
        lines.append("| %s | %s |" % (k, facts[k] if facts[k] is not None else "not available"))
    lines += ["", "## Inputs", ""]
    lines += ["- %s: %s, %s bytes, sha256 %s" % (i["name"], "readable" if i["readable"] else
                                                  i.get("error"), i["bytes"], i["sha256"])
              for i in inputs] or ["- none"]
    lines += ["", "## Environment variables", ""]
    lines += ["- %s: %s" % kv for kv in env.items()] or ["- none requested"]
    lines += ["", "## Setup", ""]
    lines += ["- `%s`: ran, exit 0" % c for c in setup] or ["- no setup commands"]
    lines += ["- files in the workspace besides inputs and probe: %s" % (
        ", ".join(f["path"] for f in workspace) or "none")]
    lines += ["", "## Network", "",
              "- policy: %s" % config.get("network", "disabled"),
              "- probe: %s %s -> exit %s, %s" % (network["tool"], network["url"],
                                                 network["exit_code"], network["message"]),
              "- reached: %s" % ("yes" if network["reached"] else "no"),
              "", "## Checks", ""]
    lines += ["- [%s] %s: %s" % ("x" if c["ok"] else " ", c["name"], c["detail"])
              for c in checks]
    lines += ["", "## Outputs", "", "- %s" % REPORT, "- %s" % CHECKS, ""]
    with open(REPORT, "w") as f:
        f.write("\n".join(lines))
    print("wrote %s and %s: %d/%d checks ok" % (REPORT, CHECKS, sum(c["ok"] for c in checks),
                                               len(checks)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
