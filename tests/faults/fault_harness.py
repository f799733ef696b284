#!/usr/bin/python3
"""The fault harness of docs/replicas.md ("The fault harness"): N real sandgated replicas on one
real PostgreSQL, a workload through the public API, a nemesis, and a checker over the whole
store afterwards.

  - PostgreSQL: deploy/postgres.sh (the server deploy/cluster.sh runs), so pg_ctl can stop and
    restart it under load.
  - Replicas: the build's sandgated, `local` provider, `reference` agent, loopback TCP, tenants
    `alpha` (concurrent_runs 2) and `beta` (concurrent_runs 4, live_sessions 4). Each runs under
    libfaketime (Debian's `faketime`) reading its offset from a file of its own, so the nemesis
    can step one replica's wall clock as an NTP step would (CLOCK_MONOTONIC is left alone), and
    futex_shim.c, which keeps abseil's absolute waits on the kernel's clock.
  - Workload (the Python client, clients/python): runs, a share of them with a setup
    `sleep N` long enough for a fault to catch them RUNNING or QUEUED, each followed to its
    end from a random replica; kept sessions with commands, closed at the end.
  - Nemesis, in turn: kill -9 of a replica with three long runs of `alpha` on it (2 RUNNING,
    1 QUEUED: issue 21's repro); SIGSTOP of one past its lease, then SIGCONT; pg_ctl restart;
    PostgreSQL stopped for less than a lease, then for more; a replica's clock stepped ahead,
    then another's behind, by twice the lease.
  - Checker: see CHECKS below; any anomaly makes the exit status 1.

  tests/faults/fault_harness.py --build build                 # small (CTest faults.small)
  tests/faults/fault_harness.py --build build --size full     # BENCHMARKS.md

Runs as root (sandgated gives each sandbox a host uid). Prints the counts of every check,
the anomalies by the faults they overlapped, and the timings of the takeovers.
"""

from __future__ import annotations

import argparse
import calendar
import collections
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SAMPLE_CSV = os.path.join(SOURCE_DIR, "examples", "northstar_cloud_financial_statements.csv")
POSTGRES_SH = os.path.join(SOURCE_DIR, "deploy", "postgres.sh")
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
FUTEX_SHIM_C = os.path.join(os.path.dirname(os.path.abspath(__file__)), "futex_shim.c")

TOKENS = {"alpha": "faults-alpha-token", "beta": "faults-beta-token"}
# Replica i's sandboxes run as UID_BASE + 100 i and the UID_COUNT after it: a range no other
# test uses (tests/integration/CMakeLists.txt), so the harness may run beside them.
UID_BASE = 440000
UID_COUNT = 32

# What the checker reports, in this order; every one is an anomaly when its count is not 0.
CHECKS = {
    "run_not_final": "a run still QUEUED or RUNNING once the cluster is quiet (stranded)",
    "run_finished_not_once": "a run whose log has no run.finished, or more than one",
    "run_finished_not_last": "a run whose run.finished is not its log's last event",
    "record_differs_from_last_event": "a run's record (status, reason, last_seq) is not its "
                                      "log's run.finished",
    "log_not_dense": "a log whose seqs are not exactly 1..N",
    "follower_saw_other_end": "a follower ended on another run.finished than the store's last",
    "follower_stuck": "a follower that saw no run.finished before its deadline",
    "sandbox_created_twice": "a run whose sandbox was started more than once (sandbox.started "
                             "in the replicas' logs, or run.started in its log)",
    "session_not_closed": "a kept session still ACTIVE once the cluster is quiet",
    "session_closed_not_once": "a session whose log has no session.closed, or more than one",
    "quota_slot_leaked": "a claimed or waiting queue row of a finished run, a tenant's "
                         "`running` count above its claimed rows, or a session slot of a "
                         "closed session",
    "quota_probe_failed": "alpha (concurrent_runs 2) could not run two runs at once at the end",
    "resources_left": "journal entries or sandbox processes left after every replica drained",
    "takeover_late": "a takeover later than lease + one renewal after the last renewal seen",
    "settle_late": "a dead replica's runs settled later than lease + one renewal + 2 s after "
                   "its last renewal",
    "live_replica_taken_over": "a takeover of a replica that was neither killed nor frozen "
                               "(a short outage, a skewed clock)",
    "clock_step_not_seen": "a clock step no log line of the daemon showed: the harness did not "
                           "exercise it",
    "not_exercised": "the run proved too little to pass: a fault of the nemesis that did not "
                     "run to its end, a kill or freeze with no takeover, too few runs "
                     "finished or kept sessions closed",
}


# Exit status when PostgreSQL's server binaries are missing: CTest reports the test skipped
# (SKIP_RETURN_CODE), saying why, as for a missing sandbox runtime.
SKIP = 77


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- sizes -------------------------------------------------------------------------------------

@dataclass
class Size:
    replicas: int
    lease: float
    renew: float
    rounds: int  # of the whole fault sequence
    clients: int
    session_clients: int
    skew: float  # seconds a clock is stepped
    # The least a run must have done to count (not_exercised): runs SUCCEEDED, kept sessions
    # closed by their client.
    min_succeeded: int = 20
    min_sessions_closed: int = 3


SIZES = {
    # About two minutes: a short lease keeps every fault's wait short.
    "small": Size(replicas=3, lease=4, renew=1, rounds=1, clients=3, session_clients=1, skew=8),
    # The daemon's defaults (15 s lease renewed every 5 s) and the 30 s clock steps.
    "full": Size(replicas=4, lease=15, renew=5, rounds=2, clients=6, session_clients=2, skew=30),
}


# -- PostgreSQL --------------------------------------------------------------------------------

class Postgres:
    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.dsn = self._sh("init").strip().splitlines()[-1]

    def _sh(self, *args: str) -> str:
        return subprocess.run([POSTGRES_SH, args[0], self.dir, *args[1:]], check=True,
                              capture_output=True, text=True).stdout

    def stop(self) -> None:
        self._sh("stop", "fast")

    def start(self) -> None:
        self._sh("start")

    def restart(self) -> None:
        self._sh("restart")

    def running(self) -> bool:
        return subprocess.run([POSTGRES_SH, "status", self.dir]).returncode == 0

    def query(self, sql: str, timeout: float = 10) -> List[List[str]]:
        """Rows of `sql` (psql -At, fields split on \\x1f); raises on error."""
        out = subprocess.run(
            ["psql", "-h", self.dir, "-U", "sandgate", "-d", "sandgate", "-AtX", "-v",
             "ON_ERROR_STOP=1", "-F", "\x1f", "-c", sql],
            check=True, capture_output=True, text=True, timeout=timeout).stdout
        return [line.split("\x1f") for line in out.splitlines() if line]


# -- replicas ----------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica:
    def __init__(self, index: int, directory: str, sandgated: str, dsn: str, size: Size,
                 preload: str) -> None:
        self.index = index
        self.id = f"replica-{chr(ord('a') + index)}"
        self.sandgated = sandgated
        self.preload = preload
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        base = os.path.join(directory, self.id)
        self.config_path, self.log_path, self.out_path = (
            base + ".json", base + ".log", base + ".out")
        self.clock_file = base + ".faketime"
        self.set_clock(0)
        tenants = [
            {"name": "alpha", "token_sha256": hashlib.sha256(TOKENS["alpha"].encode()).hexdigest(),
             "quotas": {"concurrent_runs": 2}},
            {"name": "beta", "token_sha256": hashlib.sha256(TOKENS["beta"].encode()).hexdigest(),
             "quotas": {"concurrent_runs": 4, "live_sessions": 4}},
        ]
        config = {
            "listen": f"tcp:{self.address}",
            "allow_plaintext_tokens": True,  # loopback only
            "state_dir": base,
            "store": {"type": "postgres", "dsn": dsn},
            "replica": {"id": self.id, "advertise_address": self.address,
                        "lease_seconds": size.lease, "renew_seconds": size.renew},
            "tenants": tenants,
            "local": {"uid_base": UID_BASE + 100 * index, "uid_count": UID_COUNT},
        }
        with open(self.config_path, "w") as f:
            json.dump(config, f, indent=2)
        self.process: Optional[subprocess.Popen] = None
        self.frozen = False

    def set_clock(self, offset: float) -> None:
        """Steps this replica's wall clock to real time + offset (libfaketime reads the file
        at most once a second)."""
        with open(self.clock_file + ".tmp", "w") as f:
            f.write(f"{offset:+.0f}\n")
        os.replace(self.clock_file + ".tmp", self.clock_file)

    def start(self, timeout: float) -> None:
        env = dict(os.environ, LD_PRELOAD=self.preload, FAKETIME_TIMESTAMP_FILE=self.clock_file,
                   FAKETIME_CACHE_DURATION="1", DONT_FAKE_MONOTONIC="1")
        open(self.out_path, "w").close()
        with open(self.log_path, "ab") as err, open(self.out_path, "ab") as out:
            self.process = subprocess.Popen(
                [self.sandgated, "--config", self.config_path, "--log-level", "debug"],
                stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.out_path) as f:
                if f.read().startswith("sandgated listening on"):
                    return
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.id} exited during start; see {self.log_path}")
            time.sleep(0.1)
        raise RuntimeError(f"{self.id} did not listen in {timeout:.0f} s; see {self.log_path}")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            self.process.send_signal(sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait()

    def drain(self, grace: float) -> None:
        if not self.alive():
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            log(f"{self.id} did not drain in {grace:.0f} s: SIGKILL")
            self.kill()

    def log_lines(self) -> List[dict]:
        lines = []
        with open(self.log_path, errors="replace") as f:
            for line in f:
                try:
                    lines.append(json.loads(line))
                except ValueError:
                    pass
        return lines


# -- what happened, on the harness's clock -------------------------------------------------------

@dataclass
class Fault:
    kind: str
    victim: str  # a replica id, or "postgres"
    start: float
    end: float = 0.0
    note: str = ""


@dataclass
class RunSeen:
    id: str
    tenant: str
    submitted: float
    ended: float = 0.0
    via: str = ""
    follower_end: Optional[Tuple[int, int]] = None  # (seq, status) of the run.finished seen
    follower_error: str = ""
    long_setup: bool = False
    last_seen: float = 0.0  # when its follower last saw an event

    def window(self) -> Tuple[float, float]:
        """When an anomaly of this run arose: its life; for a run that never ended, from the
        last event its follower saw (it stopped moving then)."""
        if self.ended:
            return self.submitted, self.ended
        return (self.last_seen or self.submitted), (self.last_seen or self.submitted) + 1


@dataclass
class Book:
    """Everything the workload and the nemesis saw, for the checker."""
    mu: threading.Lock = field(default_factory=threading.Lock)
    runs: Dict[str, RunSeen] = field(default_factory=dict)
    sessions: Dict[str, float] = field(default_factory=dict)  # id: when created
    faults: List[Fault] = field(default_factory=list)
    rpc_errors: collections.Counter = field(default_factory=collections.Counter)
    samples: List[Tuple[float, dict]] = field(default_factory=list)  # the monitor's
    skew_verified: Dict[str, str] = field(default_factory=dict)


# -- the workload ----------------------------------------------------------------------------

TRANSIENT = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "ABORTED", "INTERNAL", "UNKNOWN",
             "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION")


class Workload:
    def __init__(self, replicas: List[Replica], size: Size, book: Book, seed: int) -> None:
        import sandgate  # the build's package (build/clients/python on sys.path)
        from sandgate.v1 import sandgate_pb2 as pb
        self.sandgate, self.pb = sandgate, pb
        self.replicas, self.size, self.book = replicas, size, book
        self.rng = random.Random(seed)
        self.clients = {(r.id, t): sandgate.Client(addr=f"tcp:{r.address}", token=tok)
                        for r in replicas for t, tok in TOKENS.items()}
        with open(SAMPLE_CSV, "rb") as f:
            self.csv = f.read()
        self.stop = threading.Event()
        self.give_up = threading.Event()
        self.threads: List[threading.Thread] = []
        self.followers: List[threading.Thread] = []
        self.keys = 0

    def _error_code(self, e: Exception) -> str:
        code = getattr(e, "code", None)
        code = code() if callable(code) else code
        return getattr(code, "name", type(e).__name__)

    def submit(self, tenant: str, setup_sleep: float, to: Optional[Replica] = None,
               follow_here: bool = False) -> None:
        """Starts a run (retried with its idempotency key on another replica while refused)
        and follows it: in this thread (follow_here), else in a thread of its own."""
        with self.book.mu:
            self.keys += 1
            key = f"faults-{self.keys}"
        request_replicas = [to] if to else []
        deadline = time.monotonic() + 60
        run = None
        while run is None and time.monotonic() < deadline:
            target = request_replicas.pop() if request_replicas else self.rng.choice(self.replicas)
            sandbox = None
            if setup_sleep > 0:
                sandbox = self.pb.SandboxSpec(setup_commands=[f"sleep {setup_sleep:.1f}"])
            try:
                run = self.clients[(target.id, tenant)].run_analysis(
                    {"statements.csv": self.csv}, idempotency_key=key, sandbox=sandbox)
            except Exception as e:  # noqa: BLE001 - counted; retried on another replica
                code = self._error_code(e)
                self.book.rpc_errors[f"RunAnalysis {code}"] += 1
                if code not in TRANSIENT:
                    return
                time.sleep(0.3)
        if run is None:
            return
        seen = RunSeen(run.id, tenant, time.time(), via=target.id, long_setup=setup_sleep > 0)
        with self.book.mu:
            self.book.runs[run.id] = seen
        if follow_here:
            self._follow(run.id, tenant, seen)
            return
        t = threading.Thread(target=self._follow, args=(run.id, tenant, seen), daemon=True)
        t.start()
        with self.book.mu:
            self.followers.append(t)

    def _follow(self, run_id: str, tenant: str, seen: RunSeen) -> None:
        """Follows the run from a random replica to its run.finished, in slices of 10 s until
        the harness gives up (give_up); a broken or refused stream moves to another replica and
        resumes after the last seq seen (the client resumes within one replica by itself)."""
        after = 0
        while not self.give_up.is_set():
            r = self.rng.choice(self.replicas)
            try:
                handle = self.clients[(r.id, tenant)].get_run(run_id)
                for event in handle.events(after_seq=after, timeout=10, reconnect_timeout=5):
                    after = event.seq
                    seen.last_seen = time.time()
                    if event.type == "run.finished":
                        seen.follower_end = (event.seq, event.run_finished.status)
                        seen.ended = time.time()
                        return
                return
            except Exception as e:  # noqa: BLE001 - the next replica
                code = self._error_code(e)
                if code != "DEADLINE_EXCEEDED":  # a slice ended
                    self.book.rpc_errors[f"StreamEvents {code}"] += 1
                    seen.follower_error = code
                    time.sleep(0.5)
        seen.follower_error = f"no run.finished (last seq seen {after}) when the harness gave up"

    def _run_client(self) -> None:
        while not self.stop.is_set():
            tenant = self.rng.choice(["alpha", "beta"])
            long_setup = self.rng.random() < 0.5
            sleep = self.rng.uniform(self.size.lease, 2 * self.size.lease) if long_setup else 0
            self.submit(tenant, sleep, follow_here=True)
            self.stop.wait(self.rng.uniform(0.2, 1.0))

    def _session_client(self) -> None:
        while not self.stop.is_set():
            r = self.rng.choice(self.replicas)
            try:
                s = self.clients[(r.id, "beta")].session(keepalive_interval=1)
            except Exception as e:  # noqa: BLE001
                self.book.rpc_errors[f"CreateSession {self._error_code(e)}"] += 1
                self.stop.wait(1)
                continue
            with self.book.mu:
                self.book.sessions[s.id] = time.time()
            try:
                for _ in range(self.rng.randint(2, 5)):
                    s.run("echo kept")
                    self.stop.wait(self.rng.uniform(0.5, 2))
            except Exception as e:  # noqa: BLE001 - a session ended by a takeover
                self.book.rpc_errors[f"Exec {self._error_code(e)}"] += 1
            try:
                s.close("the workload is done with it")
            except Exception as e:  # noqa: BLE001
                self.book.rpc_errors[f"CloseSession {self._error_code(e)}"] += 1

    def start(self) -> None:
        for _ in range(self.size.clients):
            self.threads.append(threading.Thread(target=self._run_client, daemon=True))
        for _ in range(self.size.session_clients):
            self.threads.append(threading.Thread(target=self._session_client, daemon=True))
        for t in self.threads:
            t.start()

    def finish(self, timeout: float) -> None:
        """Stops new work and waits for every follower to see its run.finished, at most
        `timeout` seconds: the followers still waiting then give up (follower_stuck)."""
        self.stop.set()
        deadline = time.monotonic() + timeout
        with self.book.mu:
            followers = list(self.followers)
        for t in self.threads + followers:
            t.join(max(0.0, deadline - time.monotonic()))
        self.give_up.set()
        for t in self.threads + followers:
            t.join()


# -- the monitor: the lease table and each replica's unfinished runs, 4 times a second ----------

MONITOR_SQL = (
    "SELECT json_build_object("
    "'leases', (SELECT coalesce(json_agg(row_to_json(l)), '[]') FROM replica_leases l), "
    "'unfinished', (SELECT coalesce(json_object_agg(replica, n), '{}') FROM "
    "(SELECT replica, count(*) n FROM runs WHERE status IN (1, 2) GROUP BY replica) x), "
    "'db_now', extract(epoch FROM clock_timestamp()))")
MONITOR_PERIOD = 0.25


def monitor(pg: Postgres, book: Book, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            rows = pg.query(MONITOR_SQL, timeout=2)
            book.samples.append((time.time(), json.loads(rows[0][0])))
        except Exception:  # noqa: BLE001 - PostgreSQL is down: nothing to see
            pass
        stop.wait(MONITOR_PERIOD)


# -- the nemesis -------------------------------------------------------------------------------

class Nemesis:
    def __init__(self, pg: Postgres, replicas: List[Replica], workload: Workload, size: Size,
                 book: Book, seed: int) -> None:
        self.pg, self.replicas, self.workload, self.size, self.book = (
            pg, replicas, workload, size, book)
        self.rng = random.Random(seed + 1)
        self.last_victim: Optional[Replica] = None

    def _busiest(self) -> Replica:
        """The replica with the most unfinished runs (never the last victim, so faults spread)."""
        latest = self.book.samples[-1][1]["unfinished"] if self.book.samples else {}
        candidates = [r for r in self.replicas if r is not self.last_victim]
        self.rng.shuffle(candidates)
        victim = max(candidates, key=lambda r: latest.get(r.id, 0))
        self.last_victim = victim
        return victim

    def _begin(self, kind: str, victim: str, note: str = "") -> Fault:
        f = Fault(kind, victim, time.time(), note=note)
        self.book.faults.append(f)
        log(f"nemesis: {kind} {victim} {note}".rstrip())
        return f

    def _end(self, f: Fault) -> None:
        f.end = time.time()
        self.settle()

    def settle(self) -> None:
        time.sleep(self.size.lease + 2 * self.size.renew)

    def kill(self) -> None:
        victim = self._busiest()
        # Issue 21's repro: three long runs of the concurrent_runs-2 tenant on the victim, so
        # the kill finds two RUNNING and one QUEUED.
        long_sleep = 3 * self.size.lease + 5
        for _ in range(3):
            self.workload.submit("alpha", long_sleep, to=victim)
        time.sleep(min(2.0, self.size.renew * 2))
        f = self._begin("kill -9", victim.id)
        victim.kill()
        # Past the lease and a renewal, so the takeover happens while it is down.
        time.sleep(self.size.lease + 2 * self.size.renew + 1)
        victim.start(timeout=2 * self.size.lease + 30)
        self._end(f)

    def freeze(self) -> None:
        victim = self._busiest()
        f = self._begin("freeze past the lease", victim.id)
        victim.signal(signal.SIGSTOP)
        victim.frozen = True
        time.sleep(self.size.lease + 2 * self.size.renew + 1)
        victim.signal(signal.SIGCONT)
        victim.frozen = False
        self._end(f)

    def pg_restart(self) -> None:
        f = self._begin("pg_ctl restart", "postgres")
        self.pg.restart()
        self._end(f)

    def pg_stop(self, seconds: float, kind: str) -> None:
        f = self._begin(kind, "postgres", f"({seconds:.1f} s)")
        self.pg.stop()
        time.sleep(seconds)
        self.pg.start()
        self._end(f)

    def skew(self, sign: int) -> None:
        victim = self._busiest()
        offset = sign * self.size.skew
        f = self._begin("clock " + ("ahead" if sign > 0 else "behind"), victim.id,
                        f"({offset:+.0f} s)")
        victim.set_clock(offset)
        seen = self._verify_skew(victim, offset, f.start + 2 * self.size.lease)
        key = f"{victim.id} {offset:+.0f}s"
        # A second round may step the same replica the same way: each step is checked.
        while key in self.book.skew_verified:
            key += "'"
        self.book.skew_verified[key] = seen
        time.sleep(max(0.0, f.start + 2 * self.size.lease - time.time()))
        victim.set_clock(0)
        self._end(f)

    def _verify_skew(self, victim: Replica, offset: float, until: float) -> str:
        """How the step was seen to reach the daemon's own clock: the time stamp (absl::Now) of
        a log line it writes, against when the line appeared in its log (watched until
        `until`); and the lease end it writes, while lease ends are in the replica's clock."""
        seen = []
        with open(victim.log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            pos, before = f.tell(), time.time()
            poked = before
            while time.time() < until and not seen:
                time.sleep(0.25)
                if time.time() - poked > 2:
                    # A run sent to it makes it write a line (run.queued) now.
                    threading.Thread(target=self.workload.submit, args=("beta", 0, victim),
                                     daemon=True).start()
                    poked = time.time()
                now = time.time()
                f.seek(pos)
                chunk = f.read()
                complete = chunk[:chunk.rfind(b"\n") + 1]
                pos += len(complete)
                for line in complete.splitlines():
                    stamp = fake_time(line)
                    # Written between `before` and `now` on the real clock; libfaketime reads
                    # the file at most once a second, so a line may still carry the old clock.
                    if stamp is not None and stamp - now - 0.1 <= offset <= stamp - before + 0.1:
                        seen = [f"log ts {stamp - now:+.1f} s"]
                        break
                before = now
        try:
            rows = self.pg.query(
                "SELECT expires_at::text, extract(epoch FROM clock_timestamp()) "
                f"FROM replica_leases WHERE id = '{victim.id}'")
            expires = float(rows[0][0])
            if expires > 1e15:  # unix nanoseconds, the replica's own clock
                ahead = expires / 1e9 - float(rows[0][1]) - self.size.lease
                seen.append(f"lease end {ahead:+.1f} s")
        except Exception:  # noqa: BLE001 - another schema: the log says it
            pass
        return ", ".join(seen) or "NOT SEEN"

    KINDS = ["kill -9", "freeze past the lease", "pg_ctl restart", "postgres stopped < lease",
             "postgres stopped > lease", "clock ahead", "clock behind"]

    def run(self) -> None:
        steps = [
            self.kill,
            self.freeze,
            self.pg_restart,
            lambda: self.pg_stop(0.6 * self.size.lease, "postgres stopped < lease"),
            lambda: self.pg_stop(1.6 * self.size.lease, "postgres stopped > lease"),
            lambda: self.skew(+1),
            lambda: self.skew(-1),
        ]
        for _ in range(self.size.rounds):
            for step in steps:
                step()


def fake_time(line: bytes) -> Optional[float]:
    """The unix time of a sandgated log line's "ts" (its own clock), or None."""
    try:
        ts = json.loads(line)["ts"]  # 2026-12-02T11:19:02.691Z
        return calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")) + float(ts[19:-1] or 0)
    except (ValueError, KeyError, TypeError):
        return None


# -- the checker -------------------------------------------------------------------------------

RUN_FINAL = {3, 4, 5, 6}
# Counted in the replicas' logs for the report (sweep.unknown_provider: issue 21 item 6).
LOG_EVENTS_OF_NOTE = ("replica.takeover", "replica.takeover_failed", "replica.lease_lost",
                      "replica.rejoined", "admission.release_failed", "run.interrupted",
                      "sweep.unknown_provider")


class Checker:
    def __init__(self, pg: Postgres, replicas: List[Replica], size: Size, book: Book) -> None:
        from sandgate.v1 import sandgate_pb2 as pb
        self.pb, self.pg, self.replicas, self.size, self.book = pb, pg, replicas, size, book
        self.counts: Dict[str, int] = {k: 0 for k in CHECKS}
        self.examples: Dict[str, List[str]] = collections.defaultdict(list)
        self.by_fault: Dict[int, collections.Counter] = collections.defaultdict(
            collections.Counter)  # by the fault's index in book.faults
        self.figures: Dict[str, object] = {}
        self.stranded: set = set()
        self.first_error: Dict[str, float] = {}  # run id: its first error in a replica's log

    def note_stranded(self) -> None:
        """The runs not final once the cluster should be quiet, before the drain (which would
        settle them: a drain fails or cancels what its replica still holds). Each is put at
        the first error a replica logged about it (a refused or failed write), else at the
        last event its follower saw."""
        first_error = self.first_error
        for r in self.replicas:
            for line in r.log_lines():
                run_id = line.get("run")
                if line.get("level") == "error" and run_id:
                    t = fake_time(json.dumps(line).encode())
                    if t is not None and t < first_error.get(run_id, float("inf")):
                        first_error[run_id] = t
        for run_id, status, replica in self.pg.query(
                "SELECT id, status, replica FROM runs WHERE status IN (1, 2)"):
            self.stranded.add(run_id)
            when = self._run_when(run_id)
            self.anomaly("run_not_final", f"run {run_id} {self.pb.RunStatus.Name(int(status))} "
                         f"on {replica} (before the drain)", when)

    def anomaly(self, check: str, what: str, when: Optional[Tuple[float, float]] = None) -> None:
        self.counts[check] += 1
        if len(self.examples[check]) < 5:
            self.examples[check].append(what)
        for f in self._faults_during(when):
            self.by_fault[self.book.faults.index(f)][check] += 1

    def _faults_during(self, when: Optional[Tuple[float, float]]) -> List[Fault]:
        """The faults whose window (to a lease after its end) overlaps [when]; none: the last
        fault before it."""
        if when is None:
            return []
        lo, hi = when
        hits = [f for f in self.book.faults
                if f.start <= hi and (f.end or hi) + self.size.lease >= lo]
        if hits:
            return hits
        before = [f for f in self.book.faults if f.start <= hi]
        return before[-1:]

    def _protos(self, sql: str, message) -> List:
        out = []
        for row in self.pg.query(sql, timeout=120):
            m = message()
            m.ParseFromString(bytes.fromhex(row[-1]))
            out.append((row[:-1], m))
        return out

    def check_runs(self) -> None:
        runs = {m.id: m for _, m in self._protos("SELECT encode(proto, 'hex') FROM runs",
                                                 self.pb.Run)}
        events: Dict[str, List] = collections.defaultdict(list)
        for (run_id, seq), e in self._protos(
                "SELECT run_id, seq, encode(proto, 'hex') FROM events ORDER BY run_id, seq",
                self.pb.Event):
            events[run_id].append((int(seq), e))
        sessions = {m.id: m for _, m in self._protos("SELECT encode(proto, 'hex') FROM sessions",
                                                     self.pb.Session)}
        self.figures["runs in the store"] = len(runs)
        self.figures["runs by status"] = dict(collections.Counter(
            self.pb.RunStatus.Name(r.status) for r in runs.values()))
        self.figures["kept sessions in the store"] = len(sessions)
        sandboxes = self._sandboxes_started()
        for run_id, r in runs.items():
            seen = self.book.runs.get(run_id)
            when = self._run_when(run_id)
            log_ = events.get(run_id, [])
            seqs = [s for s, _ in log_]
            if seqs != list(range(1, len(seqs) + 1)):
                self.anomaly("log_not_dense", f"run {run_id}: seqs {seqs[:20]}", when)
            if r.status not in RUN_FINAL and run_id not in self.stranded:
                self.anomaly("run_not_final",
                             f"run {run_id} {self.pb.RunStatus.Name(r.status)} on {r.replica}",
                             when)
            finished = [(s, e) for s, e in log_ if e.type == "run.finished"]
            if len(finished) != 1:
                self.anomaly("run_finished_not_once", f"run {run_id}: run.finished at seqs "
                             f"{[s for s, _ in finished]}", when)
            if finished and log_[-1][1].type != "run.finished":
                self.anomaly("run_finished_not_last", f"run {run_id}: run.finished at "
                             f"{finished[0][0]}, log ends at {seqs[-1]} ({log_[-1][1].type})",
                             when)
            if finished and r.status in RUN_FINAL:
                last_seq, last = finished[-1]
                rf = last.run_finished
                # last_seq is filled in when a record is read, not stored (0 in the row).
                if (rf.status != r.status or rf.reason != r.status_reason
                        or r.last_seq not in (0, seqs[-1])):
                    self.anomaly("record_differs_from_last_event",
                                 f"run {run_id}: record {self.pb.RunStatus.Name(r.status)} "
                                 f"last_seq {r.last_seq}; log's run.finished "
                                 f"{self.pb.RunStatus.Name(rf.status)} at {last_seq} of "
                                 f"{seqs[-1]}", when)
            started = sum(1 for _, e in log_ if e.type == "run.started")
            if started > 1 or sandboxes.get(run_id, 0) > 1:
                self.anomaly("sandbox_created_twice",
                             f"run {run_id}: run.started x{started}, sandbox.started "
                             f"x{sandboxes.get(run_id, 0)}", when)
            if seen is not None:
                if seen.follower_end is None:
                    self.anomaly("follower_stuck", f"run {run_id}: follower ended with "
                                 f"{seen.follower_error or 'no run.finished'}", when)
                elif finished and seen.follower_end != (seqs[-1], r.status):
                    self.anomaly("follower_saw_other_end",
                                 f"run {run_id}: follower ended at seq {seen.follower_end[0]} "
                                 f"{self.pb.RunStatus.Name(seen.follower_end[1])}; store: "
                                 f"{self.pb.RunStatus.Name(r.status)} at {seqs[-1]}", when)
        missing = [i for i in self.book.runs if i not in runs]
        self.figures["runs submitted"] = len(self.book.runs)
        self.figures["runs submitted but not in the store"] = len(missing)
        for sid, s in sessions.items():
            log_ = events.get(sid, [])
            created = self.book.sessions.get(sid)
            when = (created, created + 10) if created else None  # a session lives seconds
            if s.status == self.pb.SESSION_STATUS_ACTIVE:
                self.anomaly("session_not_closed", f"session {sid} ACTIVE on {s.replica}", when)
                continue
            closed = sum(1 for _, e in log_ if e.type == "session.closed")
            if closed != 1:
                self.anomaly("session_closed_not_once", f"session {sid}: session.closed x{closed}",
                             when)

    def _sandboxes_started(self) -> Dict[str, int]:
        """sandbox.started lines per run, from every replica's log (all its lives): run-<hex>'s
        own sandbox is s<hex>."""
        counts: collections.Counter = collections.Counter()
        for r in self.replicas:
            for line in r.log_lines():
                if line.get("event") == "sandbox.started":
                    counts["run-" + str(line.get("session", ""))[1:]] += 1
        return counts

    def check_quotas(self) -> None:
        leaked = self.pg.query(
            "SELECT q.run_id, q.tenant, q.claimed_by, r.status FROM admission_queue q "
            "JOIN runs r ON r.id = q.run_id WHERE r.status IN (3, 4, 5, 6)")
        for run_id, tenant, claimed_by, status in leaked:
            self.anomaly("quota_slot_leaked", f"queue row of finished run {run_id} ({tenant}, "
                         f"claimed by '{claimed_by}', status {status})", self._run_when(run_id))
        counts = self.pg.query(
            "SELECT t.tenant, t.running, (SELECT count(*) FROM admission_queue q WHERE "
            "q.tenant = t.tenant AND q.claimed_by <> '') FROM admission_tenants t")
        for tenant, running, claimed in counts:
            if int(running) > int(claimed):
                for _ in range(int(running) - int(claimed)):
                    self.anomaly("quota_slot_leaked", f"tenant {tenant}: running {running}, "
                                 f"claimed rows {claimed}")
        sessions = self.pg.query(
            "SELECT a.session_id FROM admission_sessions a JOIN sessions s ON s.id = "
            "a.session_id WHERE s.status <> 1")
        for (sid,) in sessions:
            self.anomaly("quota_slot_leaked", f"session slot of closed session {sid}")
        self.figures["tenants' running counts at the end"] = {t: int(n) for t, n, _ in counts}

    def _run_when(self, run_id: str) -> Optional[Tuple[float, float]]:
        seen = self.book.runs.get(run_id)
        if seen is not None and not seen.ended and run_id in self.first_error:
            return self.first_error[run_id], self.first_error[run_id]
        return seen.window() if seen else None

    def check_resources(self) -> None:
        journal = self.pg.query("SELECT id, provider, details FROM journal")
        for entry_id, provider, details in journal:
            self.anomaly("resources_left", f"journal entry {entry_id} ({provider}) {details[:120]}")
        procs = 0
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/status") as f:
                    status = f.read()
            except OSError:
                continue
            uid = int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))
            zombie = re.search(r"^State:\s+Z", status, re.M)
            if UID_BASE <= uid < UID_BASE + 100 * len(self.replicas) and not zombie:
                procs += 1
        for _ in range(procs):
            self.anomaly("resources_left", "a sandbox process still running")
        events = collections.Counter(line.get("event") for r in self.replicas
                                     for line in r.log_lines())
        self.figures["log lines of note"] = {e: events[e] for e in LOG_EVENTS_OF_NOTE}

    def check_exercised(self, expected_faults: List[str]) -> None:
        """That the run cannot pass vacuously: every fault of the nemesis ran to its end,
        each kill and freeze was followed by a takeover of its victim, and enough work
        finished on the way."""
        kinds = [f.kind for f in self.book.faults if f.end]
        for kind in expected_faults:
            if kind not in kinds:
                self.anomaly("not_exercised", f"fault {kind!r} did not run to its end")
        took = set()
        for _, s in self.book.samples:
            for row in s.get("leases", []):
                if row.get("taken_over_by"):
                    took.add(row.get("id"))
        for f in self.book.faults:
            if f.kind in ("kill -9", "freeze past the lease") and f.victim not in took:
                self.anomaly("not_exercised", f"{f.kind} of {f.victim}: no takeover seen",
                             (f.start, f.end or f.start))
        succeeded = int(self.pg.query("SELECT count(*) FROM runs WHERE status = 3")[0][0])
        closed = int(self.pg.query(
            "SELECT count(*) FROM sessions WHERE status = 2")[0][0])  # CLOSED by the client
        self.figures["runs SUCCEEDED"] = succeeded
        self.figures["kept sessions CLOSED by their client"] = closed
        if succeeded < self.size.min_succeeded:
            self.anomaly("not_exercised", f"{succeeded} runs SUCCEEDED, fewer than "
                         f"{self.size.min_succeeded}")
        if closed < self.size.min_sessions_closed:
            self.anomaly("not_exercised", f"{closed} kept sessions CLOSED, fewer than "
                         f"{self.size.min_sessions_closed}")

    def check_clock_steps(self) -> None:
        for step, seen in self.book.skew_verified.items():
            if "log ts" not in seen:
                fault = next(f for f in self.book.faults if step.startswith(f.victim + " ")
                             and f.kind.startswith("clock"))
                self.anomaly("clock_step_not_seen", f"{step}: {seen}", (fault.start, fault.start))

    def check_takeovers(self) -> None:
        """From the monitor's samples of the lease table: each takeover (taken_over_by set, or
        a new claim) against the last renewal seen before it (expires_at last changed), and
        when the dead replica was settled: its unfinished runs at 0, or its lease row marked
        cleaned."""
        lease, renew = self.size.lease, self.size.renew
        tolerance = 2 * MONITOR_PERIOD + 0.5
        last_change: Dict[str, float] = {}
        last_expires: Dict[str, object] = {}
        last_claim: Dict[str, Tuple] = {}
        delays, settles = [], []
        pending: List[Tuple[str, float, float]] = []  # (dead, takeover time, last renewal)
        for t, s in self.book.samples:
            for row in s.get("leases", []):
                rid = row.get("id")
                exp = row.get("expires_at")
                if last_expires.get(rid) != exp:
                    last_expires[rid] = exp
                    last_change[rid] = t
                claim = (row.get("taken_over_by"), row.get("claimed_at"), row.get("epoch"))
                by = row.get("taken_over_by") or ""
                if by and last_claim.get(rid) != claim:
                    renewed = last_change.get(rid, t)
                    delay = t - renewed
                    delays.append(delay)
                    window = (renewed, t)
                    if delay > lease + renew + tolerance:
                        self.anomaly("takeover_late", f"{rid} taken over by {by} {delay:.1f} s "
                                     f"after its last renewal seen", window)
                    if not self._expected_dead(rid, renewed, t):
                        self.anomaly("live_replica_taken_over",
                                     f"{rid} taken over by {by} at +{t - self._t0():.1f} s",
                                     window)
                    pending.append((rid, t, renewed))
                last_claim[rid] = claim
            still = []
            # Settled: its unfinished runs are gone, or the claimer marked the cleanup done (a
            # replica back by then has new runs of its own, which are not the dead one's).
            cleaned = {row.get("id") for row in s.get("leases", [])
                       if row.get("cleaned") in (1, True)}
            for rid, took, renewed in pending:
                if s.get("unfinished", {}).get(rid, 0) == 0 or rid in cleaned:
                    settles.append(t - renewed)
                    if t - renewed > lease + renew + 2 + tolerance:
                        self.anomaly("settle_late", f"{rid}: its runs settled {t - renewed:.1f} s "
                                     f"after its last renewal seen", (renewed, t))
                else:
                    still.append((rid, took, renewed))
            pending = still
        for rid, took, renewed in pending:
            self.anomaly("settle_late", f"{rid}: its runs never settled after its takeover",
                         (renewed, took))
        self.figures["takeovers seen"] = len(delays)
        if delays:
            self.figures["takeover after last renewal, max s"] = round(max(delays), 2)
        if settles:
            self.figures["dead replica's runs settled after last renewal, max s"] = round(
                max(settles), 2)

    def _t0(self) -> float:
        return self.book.samples[0][0] if self.book.samples else 0.0

    def _expected_dead(self, rid: str, renewed: float, took: float) -> bool:
        """Whether `rid` was killed or frozen by the nemesis around its last renewal."""
        for f in self.book.faults:
            if f.victim == rid and f.kind in ("kill -9", "freeze past the lease"):
                if f.start - self.size.renew - 1 <= renewed <= (f.end or took) + 1:
                    return True
        return False

    def report(self) -> int:
        print("\n== checks (count: what it means) ==")
        for k, what in CHECKS.items():
            print(f"  {k:32s} {self.counts[k]:4d}   {what}")
            for ex in self.examples.get(k, []):
                print(f"      e.g. {ex}")
        print("\n== anomalies by the faults they overlapped ==")
        for i, f in enumerate(self.book.faults):
            c = self.by_fault.get(i)
            desc = ", ".join(f"{k} {n}" for k, n in sorted(c.items())) if c else "none"
            print(f"  {i + 1:2d}. {f.kind + ' ' + f.victim:40s} {f.note:10s} {desc}")
        print("\n== figures ==")
        for k, v in self.figures.items():
            print(f"  {k}: {v}")
        print(f"  clock steps seen by the daemon: {self.book.skew_verified}")
        print(f"  RPC errors the workload met: {dict(self.book.rpc_errors)}")
        total = sum(self.counts.values())
        print(f"\nanomalies: {total}")
        return 1 if total else 0


# -- main --------------------------------------------------------------------------------------

def quota_probe(workload: Workload, pg: Postgres, size: Size, checker: Checker) -> None:
    """Two alpha runs at once (its quota is 2): both must be RUNNING together."""
    before = set(workload.book.runs)
    deadline = time.monotonic() + 3 * size.lease + 20
    # A submission refused (a replica still rejoining answers UNAVAILABLE, as a client
    # would be told to retry) is sent again, to another replica at random.
    probe: list = []
    while len(probe) < 2 and time.monotonic() < deadline:
        workload.submit("alpha", 4 * size.renew + 4)
        probe = [i for i in workload.book.runs if i not in before]
    if len(probe) < 2:
        checker.anomaly("quota_probe_failed", f"only {len(probe)} of 2 probe runs were accepted")
        return
    ids = ",".join(f"'{i}'" for i in probe[:2])
    while time.monotonic() < deadline:
        rows = pg.query(f"SELECT count(*) FROM runs WHERE id IN ({ids}) AND status = 2")
        if len(probe) == 2 and int(rows[0][0]) == 2:
            return
        time.sleep(0.2)
    checker.anomaly("quota_probe_failed", f"runs {probe} were never RUNNING together")


def wait_quiet(pg: Postgres, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if int(pg.query("SELECT count(*) FROM runs WHERE status IN (1, 2)")[0][0]) == 0:
            return
        time.sleep(0.5)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(SOURCE_DIR, "build"),
                   help="the build directory (bin/sandgated, clients/python)")
    p.add_argument("--size", choices=SIZES, default="small")
    p.add_argument("--replicas", type=int, help="override the size's replica count")
    p.add_argument("--seed", type=int, default=21)
    p.add_argument("--keep", action="store_true", help="keep the directory (logs, database)")
    args = p.parse_args()
    size = SIZES[args.size]
    if args.replicas:
        size.replicas = args.replicas
    sys.path.insert(0, os.path.join(args.build, "clients", "python"))
    sandgated = os.path.join(args.build, "bin", "sandgated")
    for need, what in ((sandgated, "sandgated"), (FAKETIME_LIB, "libfaketime (apt-get install "
                                                                "faketime)")):
        if not os.path.exists(need):
            print(f"fault harness: no {what} at {need}", file=sys.stderr)
            return 2
    initdb = os.path.join(os.environ.get("SANDGATE_PG_BINDIR", "/usr/lib/postgresql/15/bin"),
                          "initdb")
    if not os.path.exists(initdb):
        print(f"fault harness: SKIPPED, no PostgreSQL server binaries ({initdb}): install "
              "Debian's postgresql (deploy/setup.sh does)", file=sys.stderr)
        return SKIP
    if os.geteuid() != 0:
        print("fault harness: run as root (sandgated gives each sandbox a host uid)",
              file=sys.stderr)
        return 2

    try:  # the workload is the build's Python client, on Debian's gRPC
        import grpc  # noqa: F401
    except ImportError:
        print(f"fault harness: {sys.executable} has no grpc module: run it with Debian's "
              "/usr/bin/python3 (python3-grpcio and python3-protobuf, which deploy/setup.sh "
              "--tests installs)", file=sys.stderr)
        return 2

    directory = tempfile.mkdtemp(prefix="sg-faults-", dir="/tmp")
    os.chmod(directory, 0o755)
    log(f"fault harness ({args.size}): {size}; directory {directory}")
    started = time.monotonic()
    pg = Postgres(os.path.join(directory, "pg"))
    # libfaketime shifts the clock the daemon reads; the shim keeps abseil's absolute futex
    # waits on the kernel's clock (futex_shim.c says why).
    shim = os.path.join(directory, "futex_shim.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", shim, FUTEX_SHIM_C, "-ldl"],
                   check=True)
    replicas = [Replica(i, directory, sandgated, pg.dsn, size, f"{shim} {FAKETIME_LIB}")
                for i in range(size.replicas)]
    book = Book()
    stop_monitor = threading.Event()
    status = 1
    try:
        for r in replicas:
            r.start(timeout=30)
        mon = threading.Thread(target=monitor, args=(pg, book, stop_monitor), daemon=True)
        mon.start()
        workload = Workload(replicas, size, book, args.seed)
        workload.start()
        time.sleep(size.lease)  # work in flight before the first fault
        Nemesis(pg, replicas, workload, size, book, args.seed).run()
        log("nemesis done; the workload ends and every follower finishes")
        # Every run still going then has had a live owner for its whole setup: a run that has
        # not ended by then is stranded.
        settle = 3 * size.lease + 40
        workload.finish(settle)
        checker = Checker(pg, replicas, size, book)
        workload.stop.clear()
        workload.give_up.clear()
        quota_probe(workload, pg, size, checker)
        workload.finish(settle)
        wait_quiet(pg, 10)
        checker.note_stranded()
        stop_monitor.set()
        mon.join()
        log("draining every replica")
        for r in replicas:
            r.drain(grace=3 * size.lease + 30)
        checker.check_runs()
        checker.check_quotas()
        checker.check_resources()
        checker.check_takeovers()
        checker.check_clock_steps()
        checker.check_exercised(Nemesis.KINDS)
        checker.figures["wall time, s"] = round(time.monotonic() - started)
        status = checker.report()
    finally:
        stop_monitor.set()
        for r in replicas:
            r.kill()
        if pg.running():
            pg.stop()
        if args.keep:
            print(f"kept {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
