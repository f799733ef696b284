"""A session's handle: commands with streamed output, file transfers, a background keep-alive."""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import (TYPE_CHECKING, Iterator, List, Mapping, NamedTuple, Optional, Sequence,
                    Tuple, Union)

import grpc

from . import _files
from ._durations import Seconds, duration
from .errors import DataLoss, Error, NotFound, from_rpc_error
from . import snapshots as _snapshots
from .v1 import sandgate_pb2 as pb

if TYPE_CHECKING:
    from .client import Client
    from .processes import Process

# Uploads go in pieces well under gRPC's default 4 MiB message limit.
_UPLOAD_CHUNK_BYTES = 256 << 10


class Output(NamedTuple):
    """A piece of a command's output as it was produced: stream is "stdout" or "stderr"."""
    stream: str
    data: bytes


@dataclass
class ExecResult:
    """How a command ended, with all its output. Unpacks as (exit_code, stdout, stderr)."""
    exit_code: int  # -1 when ended by a signal
    stdout: Union[str, bytes]
    stderr: Union[str, bytes]
    finished: pb.CommandFinished = field(repr=False)

    @property
    def timed_out(self) -> bool:
        return self.finished.timed_out

    def __iter__(self):
        return iter((self.exit_code, self.stdout, self.stderr))


class Execution:
    """A command running in a session. Iterate it for its Output pieces as they arrive; when
    the iteration ends, `finished` (sandgate.v1.CommandFinished) and `exit_code` say how it
    ended. wait() reads the rest and returns an ExecResult. cancel() kills the command.

    One thread reads an Execution.
    """

    def __init__(self, call) -> None:
        self._call = call
        self._consumed = False
        self.finished: Optional[pb.CommandFinished] = None
        # The session will soon be reaped (max_lifetime): sandgate.v1.SessionExpiring.
        self.expiring: Optional[pb.SessionExpiring] = None

    @property
    def exit_code(self) -> Optional[int]:
        return None if self.finished is None else self.finished.exit_code

    def __iter__(self) -> Iterator[Output]:
        if self._consumed:
            raise RuntimeError("an Execution's output can be read once")
        self._consumed = True
        try:
            for response in self._call:
                kind = response.WhichOneof("payload")
                if kind == "output":
                    stream = "stderr" if response.output.stream == pb.CommandOutput.STREAM_STDERR \
                        else "stdout"
                    yield Output(stream, response.output.data)
                elif kind == "finished":
                    self.finished = response.finished
                elif kind == "expiring":
                    self.expiring = response.expiring
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        finally:
            self._call.cancel()
        if self.finished is None:
            raise Error(grpc.StatusCode.UNKNOWN,
                        "the command's stream ended without saying how it finished")

    def wait(self, text: bool = True) -> ExecResult:
        """Reads the rest of the output; stdout and stderr are str (UTF-8, undecodable bytes
        replaced) unless text=False."""
        out, err = bytearray(), bytearray()
        for piece in self:
            (err if piece.stream == "stderr" else out).extend(piece.data)
        assert self.finished is not None
        decode = (lambda b: b.decode("utf-8", "replace")) if text else bytes
        return ExecResult(self.finished.exit_code, decode(out), decode(err), self.finished)

    def cancel(self) -> None:
        self._call.cancel()


class FileList(list):
    """ls()'s answer: sandgate.v1.FileInfo entries; `truncated` when a cap stopped the listing."""
    truncated: bool = False


def _keep_alive(ref: "weakref.ReferenceType[Session]", closed: threading.Event,
                interval: float) -> None:
    """Sends KeepAlive every `interval` seconds until `closed` is set, the handle is gone,
    the session is no longer active, or the daemon no longer knows it."""
    while not closed.wait(interval):
        session = ref()
        if session is None:
            return
        try:
            record = session._client.call("KeepAlive", pb.KeepAliveRequest(session_id=session.id),
                                          timeout=max(interval, 5.0))
            session.record = record
            if record.status != pb.SESSION_STATUS_ACTIVE:
                return
        except Error as e:
            session.keepalive_error = e
            if e.code == grpc.StatusCode.NOT_FOUND:
                return
        del session  # not held while waiting


class Session:
    """A kept sandbox. `record` is the sandgate.v1.Session last seen; `id` never changes.

    While open it sends KeepAlive in the background, so an idle `with` block does not lose
    it; close() (or leaving the `with` block) stops that and closes the session. Thread
    safe; each Execution belongs to one thread.
    """

    def __init__(self, client: "Client", record: pb.Session,
                 keepalive_interval: Optional[float] = None) -> None:
        self._client = client
        self.record = record
        idle = record.idle_timeout.ToTimedelta().total_seconds()
        self.keepalive_interval = keepalive_interval or (max(idle / 3, 1.0) if idle else 60.0)
        # The last KeepAlive that failed, if any (the keep-alive stops at NOT_FOUND or when
        # the session is no longer active).
        self.keepalive_error: Optional[Error] = None
        self._closed = threading.Event()
        if record.status != pb.SESSION_STATUS_ACTIVE:
            self._closed.set()  # nothing to keep alive (a closed or expired session reattached)
        # The thread holds the handle weakly: a handle dropped without close() stops keeping
        # its session alive, and the daemon reaps it after its idle timeout.
        self._keepalive = threading.Thread(
            target=_keep_alive, args=(weakref.ref(self), self._closed, self.keepalive_interval),
            daemon=True, name=f"sandgate-keepalive-{record.id}")
        self._keepalive.start()

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def status(self) -> int:
        """The status as last seen (sandgate.v1.SessionStatus; refresh() fetches it anew)."""
        return self.record.status

    def __repr__(self) -> str:
        return f"<sandgate.Session {self.id}>"

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def refresh(self) -> pb.Session:
        self.record = self._client.call("GetSession", pb.GetSessionRequest(session_id=self.id))
        return self.record

    def close(self, reason: str = "") -> pb.Session:
        """Stops the keep-alive and closes the session (idempotent)."""
        self._closed.set()
        if self._keepalive is not threading.current_thread():
            self._keepalive.join()
        self.record = self._client.call("CloseSession",
                                        pb.CloseSessionRequest(session_id=self.id, reason=reason))
        return self.record

    def snapshot(self, labels: Optional[Mapping[str, str]] = None) -> pb.Snapshot:
        """Saves the workspace (files, directories, links, modes) in the daemon's store;
        Client.resume(snapshot.id) restores it into a new session, on any replica."""
        return _snapshots.take(self._client, self.id, labels=labels)

    def pause(self) -> pb.Snapshot:
        """snapshot(), then the session is closed (its keep-alive stopped): resume it later
        with Client.resume(snapshot.id)."""
        self._closed.set()
        if self._keepalive is not threading.current_thread():
            self._keepalive.join()
        snapshot = _snapshots.take(self._client, self.id, close=True)
        self.refresh()
        return snapshot

    def exec(self, cmd: Union[str, Sequence[str]], *, env: Optional[Mapping[str, str]] = None,
             cwd: str = "", timeout: Optional[Seconds] = None,
             output_cap_bytes: int = 0) -> Execution:
        """Starts a command: a str runs as `/bin/sh -c cmd`, a list as argv. Iterate the
        Execution for its output as it is produced, then read `exit_code`; or wait() for an
        ExecResult. `timeout` is the command's own clock (default: the session's)."""
        request = pb.ExecRequest(session_id=self.id, env=dict(env or {}), cwd=cwd,
                                 output_cap_bytes=output_cap_bytes)
        if isinstance(cmd, str):
            request.command = cmd
        else:
            request.argv.extend(cmd)
        d = duration(timeout, "timeout")
        if d is not None:
            request.timeout.CopyFrom(d)
        return Execution(self._client.stream("Exec", request))

    def start(self, cmd: Union[str, Sequence[str]], *, stdin: bool = False,
              pty: Optional[Tuple[int, int]] = None, env: Optional[Mapping[str, str]] = None,
              cwd: str = "", timeout: Optional[Seconds] = None) -> "Process":
        """Starts a process in the background and returns it at once (sandgate.Process): a str
        runs as `/bin/sh -c cmd`, a list as argv. stdin=True keeps its stdin open for write();
        pty=(rows, cols) runs it on a terminal. No timeout by default: it runs until it ends,
        is killed, or the session ends. While it runs, the session does not idle."""
        from . import processes
        return processes.start(self._client, self.id, cmd, stdin=stdin, pty=pty, env=env,
                               cwd=cwd, timeout=timeout)

    def processes(self) -> List[pb.Process]:
        """The session's processes (sandgate.v1.Process), running and ended, oldest first."""
        return list(self._client.call("ListProcesses",
                                      pb.ListProcessesRequest(session_id=self.id)).processes)

    def process(self, process_id: str) -> "Process":
        """A handle on one of its processes, by id (from start() or processes())."""
        from . import processes
        for record in self.processes():
            if record.id == process_id:
                return processes.Process(self._client, record)
        raise NotFound(grpc.StatusCode.NOT_FOUND, f"process not found: {process_id}")

    def run(self, cmd: Union[str, Sequence[str]], *, text: bool = True,
            **kwargs) -> ExecResult:
        """exec() and wait(): `code, out, err = s.run("make test")`."""
        return self.exec(cmd, **kwargs).wait(text=text)

    def upload(self, local: str, remote: str, mode: int = 0) -> pb.FileInfo:
        """Copies the local file to `remote` (relative to the workspace). The daemon checks the
        size and sha256 sent ahead and shows the file only when they match."""
        size, sha256 = _files.sha256_file(local)

        def requests() -> Iterator[pb.UploadFileRequest]:
            yield pb.UploadFileRequest(header=pb.UploadFileRequest.Header(
                session_id=self.id, path=remote, mode=mode, size_bytes=size, sha256=sha256))
            with open(local, "rb") as f:
                for block in iter(lambda: f.read(_UPLOAD_CHUNK_BYTES), b""):
                    yield pb.UploadFileRequest(data=block)

        return self._client.call("UploadFile", requests())

    def write(self, remote: str, data: bytes, mode: int = 0) -> pb.FileInfo:
        """Writes `data` to `remote` (relative to the workspace)."""
        header = pb.UploadFileRequest.Header(session_id=self.id, path=remote, mode=mode,
                                             size_bytes=len(data),
                                             sha256=hashlib.sha256(data).hexdigest())
        pieces = [pb.UploadFileRequest(header=header)] + [
            pb.UploadFileRequest(data=data[i:i + _UPLOAD_CHUNK_BYTES])
            for i in range(0, len(data), _UPLOAD_CHUNK_BYTES)]
        return self._client.call("UploadFile", iter(pieces))

    def download(self, remote: str, local: str) -> str:
        """Copies `remote` to the local path (into it when it is a directory), checked against
        the sha256 and size the daemon sends (DataLoss otherwise, nothing left behind).
        Returns the path written."""
        if os.path.isdir(local):
            local = os.path.join(local, os.path.basename(remote.rstrip("/")))
        call = self._client.stream("DownloadFile",
                                   pb.DownloadFileRequest(session_id=self.id, path=remote))
        try:
            _files.receive(call, local)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        finally:
            call.cancel()
        return local

    def read(self, remote: str) -> bytes:
        """The bytes of `remote`, checked against the sha256 the daemon sends."""
        data = bytearray()
        sha256 = ""
        try:
            for chunk in self._client.stream(
                    "DownloadFile", pb.DownloadFileRequest(session_id=self.id, path=remote)):
                data.extend(chunk.data)
                sha256 = chunk.sha256 or sha256
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        got = hashlib.sha256(data).hexdigest()
        if got != sha256:
            raise DataLoss(grpc.StatusCode.DATA_LOSS,
                        f"{remote}: sha256 {got} does not match the stream's {sha256!r}")
        return bytes(data)

    def ls(self, path: str = "") -> List[pb.FileInfo]:
        """The files under `path` (default the workspace), recursively, as sandgate.v1.FileInfo
        (paths as the daemon gives them: relative to the workspace, "data/x.csv" also when
        listing "data"); the list's `truncated` is set when a cap stopped it."""
        answer = self._client.call("ListFiles", pb.ListFilesRequest(session_id=self.id, dir=path))
        files = FileList(answer.files)
        files.truncated = answer.truncated
        return files

    def stat(self, path: str = "") -> pb.FileInfo:
        """What `path` is (sandgate.v1.FileInfo; "" = the workspace); a link is not followed."""
        return self._client.call("StatFile", pb.StatFileRequest(session_id=self.id, path=path))

    def remove(self, path: str, recursive: bool = False) -> None:
        """Deletes a file, a link or an empty directory; recursive=True a whole directory."""
        self._client.call("DeleteFile", pb.DeleteFileRequest(session_id=self.id, path=path,
                                                             recursive=recursive))

    def rename(self, source: str, target: str, overwrite: bool = False) -> pb.FileInfo:
        """Renames `source` to `target` (missing parents made; an existing target is
        AlreadyExists unless overwrite=True). Returns what `target` is now."""
        return self._client.call("RenameFile", pb.RenameFileRequest(
            session_id=self.id, to=target, overwrite=overwrite, **{"from": source}))

    def mkdir(self, path: str, parents: bool = False) -> pb.FileInfo:
        """Makes a directory (parents=True: missing parents too, and an existing one is fine)."""
        return self._client.call("MakeDirectory", pb.MakeDirectoryRequest(
            session_id=self.id, path=path, parents=parents))

    def expose(self, port: int, *, signed: bool = False,
               ttl: Optional[Seconds] = None) -> pb.ExposedPort:
        """Makes `port`, which the session's code listens on at 127.0.0.1 in the sandbox,
        reachable through the daemon's REST port (HTTP and WebSocket): `.url` with this
        client's token; with signed=True also `.signed_url`, which needs no token until
        `.signed_expires_at` (ttl: seconds or a timedelta; default the daemon's, 1 h)."""
        req = pb.ExposePortRequest(session_id=self.id, port=port, signed_url=signed)
        if ttl is not None:
            req.signed_ttl.CopyFrom(duration(ttl, "ttl"))
        return self._client.call("ExposePort", req)

    def unexpose(self, port: int) -> None:
        """Closes an exposed port: its URLs and open connections end."""
        self._client.call("UnexposePort", pb.UnexposePortRequest(session_id=self.id, port=port))

    def ports(self) -> List[pb.ExposedPort]:
        """The session's exposed ports (sandgate.v1.ExposedPort), by port."""
        return list(self._client.call("ListPorts",
                                      pb.ListPortsRequest(session_id=self.id)).ports)

    def usage(self) -> pb.SessionUsage:
        """What the session uses now, from its cgroups (sandgate.v1.SessionUsage): memory_bytes
        (and memory_limit_bytes, 0 for none), cpu_time since it started, processes, and in
        `unmeasured` the figures this host cannot give (they are 0) and why. The CPU share is
        the growth of cpu_time between two calls over the time between their sampled_at."""
        return self._client.call("GetSessionUsage",
                                 pb.GetSessionUsageRequest(session_id=self.id))
