"""A run's handle: its record, its events (resumed across broken streams), its artifacts."""

from __future__ import annotations

import enum
import os
import time
from typing import TYPE_CHECKING, Iterator, List, Optional

import grpc

from . import _files
from ._connection import reconnect_window
from .errors import DeadlineExceeded, Unavailable, from_rpc_error
from .v1 import sandgate_pb2 as pb

if TYPE_CHECKING:
    from .client import Client

# Codes after which a follow is resumed: the connection broke, or (CANCELLED without the
# caller cancelling) the daemon shut the stream down while restarting.
_RESUMABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)


class RunStatus(enum.IntEnum):
    """Run.status as the proto's RunStatus numbers, with short names."""
    UNSPECIFIED = pb.RUN_STATUS_UNSPECIFIED
    QUEUED = pb.RUN_STATUS_QUEUED
    RUNNING = pb.RUN_STATUS_RUNNING
    SUCCEEDED = pb.RUN_STATUS_SUCCEEDED
    FAILED = pb.RUN_STATUS_FAILED
    CANCELLED = pb.RUN_STATUS_CANCELLED
    TIMED_OUT = pb.RUN_STATUS_TIMED_OUT

    @property
    def finished(self) -> bool:
        return self not in (RunStatus.UNSPECIFIED, RunStatus.QUEUED, RunStatus.RUNNING)


class Run:
    """A run of the daemon. `record` is the sandgate.v1.Run last fetched (refresh() fetches
    again); `id` never changes; `status` asks the daemon.

    Thread safe, except that each events() iterator belongs to one thread.
    """

    def __init__(self, client: "Client", record: pb.Run) -> None:
        self._client = client
        self.record = record
        # How many times an events() iterator of this handle resumed a broken stream.
        self.reconnects = 0

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def status(self) -> RunStatus:
        """The run's status now (one GetRun)."""
        return RunStatus(self.refresh().status)

    def __repr__(self) -> str:
        return f"<sandgate.Run {self.id} {RunStatus(self.record.status).name}>"

    def refresh(self) -> pb.Run:
        """Fetches the run's record again and returns it."""
        self.record = self._client.call("GetRun", pb.GetRunRequest(run_id=self.id))
        return self.record

    def events(self, after_seq: int = 0, *, follow: bool = True, heartbeats: bool = False,
               timeout: Optional[float] = None,
               reconnect_timeout: Optional[float] = None) -> Iterator[pb.Event]:
        """The run's events after `after_seq` (sandgate.v1.Event, seq dense from 1).

        With follow (the default) it keeps streaming until the terminal event run.finished,
        which it yields last (none when `after_seq` is at or past it: the iteration ends at
        once). When the stream breaks (the connection drops, the daemon
        restarts) it reconnects and resumes after the last seq it yielded, so no event is lost
        or yielded twice; it gives up with Unavailable when nothing (an event or a heartbeat)
        has come from the daemon for `reconnect_timeout` seconds (default
        $SANDGATE_RECONNECT_TIMEOUT, else 60), pausing 0.1 s doubling to 1 s between attempts
        (docs/client-contract.md). `timeout` bounds the whole iteration (DeadlineExceeded).
        Heartbeats (seq 0) are yielded only when asked for.
        """
        if reconnect_timeout is None:
            reconnect_timeout = reconnect_window()
        last = after_seq
        deadline = None if timeout is None else time.monotonic() + timeout
        down_since: Optional[float] = None
        attempt = 0
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise self._no_end_within(timeout)
            call = self._client.stream(
                "StreamEvents", pb.StreamEventsRequest(run_id=self.id, after_seq=last,
                                                       follow=follow),
                timeout=remaining)
            try:
                for event in call:
                    down_since, attempt = None, 0  # the daemon answers: a new window
                    if event.seq == 0:
                        if heartbeats:
                            yield event
                        continue
                    if event.seq <= last:
                        continue  # already yielded before the stream broke
                    last = event.seq
                    yield event
                    if event.type == "run.finished":
                        return
                # An OK end: the replay (without follow), or the log's end, which the daemon
                # reports at once when after_seq is at or past run.finished.
                return
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED and deadline is not None:
                    raise self._no_end_within(timeout) from None
                if e.code() not in _RESUMABLE:
                    raise from_rpc_error(e) from None
                broken = f"{e.code().name}: {e.details()}"
            finally:
                call.cancel()  # a no-op once it ended; frees the stream if the caller stopped
            now = time.monotonic()
            down_since = now if down_since is None else down_since
            if now - down_since > reconnect_timeout:
                raise Unavailable(grpc.StatusCode.UNAVAILABLE,
                                  f"run {self.id}: the event stream broke ({broken}) and did "
                                  f"not resume within {reconnect_timeout} s")
            attempt += 1
            self.reconnects += 1
            # The channel's own backoff paces the reconnects; the pause keeps a daemon that
            # answers but ends streams early from being asked in a tight loop.
            time.sleep(min(0.05 * 2 ** min(attempt, 5), 1.0))
            self._client.wait_until_ready(reconnect_timeout - (time.monotonic() - down_since))

    def _no_end_within(self, timeout: Optional[float]) -> DeadlineExceeded:
        return DeadlineExceeded(grpc.StatusCode.DEADLINE_EXCEEDED,
                                f"run {self.id}: no run.finished within {timeout} s")

    def wait(self, timeout: Optional[float] = None) -> pb.Run:
        """Blocks until the run finished and returns its final record (sandgate.v1.Run).

        Follows the events (resuming as events() does); DeadlineExceeded after `timeout`
        seconds.
        """
        record = self.refresh()
        if not RunStatus(record.status).finished:
            for _ in self.events(record.last_seq, timeout=timeout):
                pass
            record = self.refresh()
        return record

    def cancel(self, reason: str = "") -> pb.Run:
        """Cancels the run (idempotent: a finished run is returned unchanged)."""
        self.record = self._client.call("CancelRun",
                                        pb.CancelRunRequest(run_id=self.id, reason=reason))
        return self.record

    def download(self, directory: str) -> List[str]:
        """Downloads every artifact of the run into `directory` (created when missing).

        Each file is checked against the sha256 and size its stream ends with and the sha256
        of the run's record, and appears under its name only when all match (DataLoss naming
        the file and both hashes otherwise; nothing is left behind). A name that is not a
        plain file name is refused (DataLoss). Returns the paths written.
        """
        record = self.refresh()
        os.makedirs(directory, exist_ok=True)
        paths = []
        for artifact in record.artifacts:
            name = _files.safe_name(artifact.name, "an artifact")
            path = os.path.join(directory, name)
            call = self._client.stream(
                "DownloadArtifact", pb.DownloadArtifactRequest(run_id=self.id, name=name))
            try:
                _files.receive(call, path, artifact.sha256)
            except grpc.RpcError as e:
                raise from_rpc_error(e) from None
            finally:
                call.cancel()
            paths.append(path)
        return paths
