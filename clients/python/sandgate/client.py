"""The client: one gRPC channel to the daemon (or its replicas) and the bearer token.

    import sandgate

    client = sandgate.Client()              # $SANDGATE_ADDR, $SANDGATE_TOKEN, like the CLI
    run = client.run_analysis("statements.csv", playbook="financial-analyst")
    for event in run.events():              # resumes by itself after a broken stream
        print(event.seq, event.type)
    print(run.wait().status)                # sandgate.RunStatus.SUCCEEDED
    run.download("out")                     # every artifact, sha256 checked

A Client is thread safe (gRPC channels are); the Run and Session handles it returns may be used
from several threads too, but one iterator (events(), an exec's output) belongs to one thread.
"""

from __future__ import annotations

import os
from typing import Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
from . import _connection
from ._durations import Seconds, duration
from .errors import InvalidArgument, from_rpc_error
from . import images as _images
from . import snapshots as _snapshots
from .runs import Run
from .sessions import Session
from .v1 import sandgate_pb2 as pb
from .v1 import sandgate_pb2_grpc as pb_grpc
from .v1 import images_pb2 as ipb
from .v1 import images_pb2_grpc as ipb_grpc

PathLike = Union[str, "os.PathLike[str]"]
Inputs = Union[PathLike, Sequence[PathLike], Mapping[str, bytes]]


def _inputs(inputs: Inputs) -> List[pb.InputFile]:
    if isinstance(inputs, Mapping):
        return [pb.InputFile(name=name, content=bytes(data)) for name, data in inputs.items()]
    paths = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    files = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                content = f.read()
        except OSError as e:
            raise InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT,
                                  f"input {os.fspath(path)}: {e.strerror}") from None
        files.append(pb.InputFile(name=os.path.basename(os.fspath(path)), content=content))
    return files


class Client:
    """A connection to sandgated.

    Args:
      addr: "unix:PATH", "tcp:HOST:PORT" or "HOST:PORT", or several replicas' comma separated
        (IPv4 or bracketed IPv6 literals); default $SANDGATE_ADDR, else
        unix:/run/sandgate/sandgated.sock.
      token: the tenant's bearer token; default $SANDGATE_TOKEN (none when unset).
      tls_ca, tls_cert, tls_key: TLS for a tcp: address (the CA that signed the daemon's
        certificate, and a client certificate and key for mutual TLS); default
        $SANDGATE_TLS_CA, $SANDGATE_TLS_CERT, $SANDGATE_TLS_KEY.

    Raises InvalidArgument for an address or TLS file that is wrong. Connecting is lazy: an
    unreachable daemon is Unavailable at the first call. Use as a context manager, or close().
    """

    def __init__(self, addr: Optional[str] = None, token: Optional[str] = None,
                 tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None) -> None:
        env = os.environ.get
        self.addr = addr or env("SANDGATE_ADDR") or _connection.DEFAULT_ADDR
        token = token if token is not None else env("SANDGATE_TOKEN", "")
        self._metadata: Tuple[Tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ())
        self._channel = _connection.open_channel(
            _connection.parse_addresses(self.addr), tls_ca or env("SANDGATE_TLS_CA"),
            tls_cert or env("SANDGATE_TLS_CERT"), tls_key or env("SANDGATE_TLS_KEY"))
        self.stub = pb_grpc.SandgateStub(self._channel)
        self.images = ipb_grpc.ImagesStub(self._channel)  # the same channel, its own service

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing for the handles -------------------------------------------------------------

    def call(self, method: str, request, *, service=None, **kwargs):
        """Calls a unary RPC of the stub (or of `service`, e.g. self.images) with the token;
        raises Error on failure."""
        try:
            return getattr(service or self.stub, method)(request, metadata=self._metadata,
                                                         **kwargs)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    def stream(self, method: str, request, *, service=None, **kwargs):
        """Starts a streaming RPC with the token; the caller maps errors while reading."""
        return getattr(service or self.stub, method)(request, metadata=self._metadata, **kwargs)

    def wait_until_ready(self, timeout: float) -> bool:
        """Whether the channel (re)connected within `timeout` seconds."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=max(timeout, 0.0))
            return True
        except grpc.FutureTimeoutError:
            return False

    # -- runs ---------------------------------------------------------------------------------

    def run_analysis(self, inputs: Inputs, *, playbook: Optional[str] = None,
                     agent: Optional[str] = None, provider: Optional[str] = None,
                     model: Optional[str] = None, idempotency_key: Optional[str] = None,
                     session_id: Optional[str] = None,
                     labels: Optional[Mapping[str, str]] = None,
                     sandbox: Optional[pb.SandboxSpec] = None,
                     run_timeout: Optional[Seconds] = None,
                     max_turns: Optional[int] = None, image: Optional[str] = None) -> Run:
        """Starts a run and returns its handle at once (status QUEUED or RUNNING).

        `inputs` is a file path, several, or {name: bytes}. Unset options take the daemon's
        defaults (playbook "financial-analyst", agent "reference", provider "local"). With an
        idempotency_key, a retry returns the same run. A bad playbook, agent or provider is
        InvalidArgument with the daemon's message. `image` is the sandbox's image (images.py),
        as sandbox.image.
        """
        request = pb.RunAnalysisRequest(
            playbook=playbook or "", agent=agent or "", provider=provider or "",
            model=model or "", inputs=_inputs(inputs), session_id=session_id or "",
            idempotency_key=idempotency_key or "", labels=dict(labels or {}),
            max_turns=max_turns or 0)
        if sandbox is not None:
            request.sandbox.CopyFrom(sandbox)
        if image:
            request.sandbox.image = image
        timeout = duration(run_timeout, "run_timeout")
        if timeout is not None:
            request.run_timeout.CopyFrom(timeout)
        return Run(self, self.call("RunAnalysis", request))

    def get_run(self, run_id: str) -> Run:
        """The run `run_id` (NotFound when it is not this tenant's)."""
        return Run(self, self.call("GetRun", pb.GetRunRequest(run_id=run_id)))

    def list_runs(self, page_size: int = 0) -> Iterator[Run]:
        """Every run of the tenant, newest first, fetched page by page as it is iterated."""
        token = ""
        while True:
            page = self.call("ListRuns", pb.ListRunsRequest(page_size=page_size,
                                                            page_token=token))
            for record in page.runs:
                yield Run(self, record)
            token = page.next_page_token
            if not token:
                return

    # -- sessions -----------------------------------------------------------------------------

    def session(self, *, provider: Optional[str] = None,
                sandbox: Optional[pb.SandboxSpec] = None,
                idle_timeout: Optional[Seconds] = None,
                max_lifetime: Optional[Seconds] = None,
                labels: Optional[Mapping[str, str]] = None,
                idempotency_key: Optional[str] = None,
                keepalive_interval: Optional[float] = None,
                from_snapshot: Optional[str] = None, image: Optional[str] = None) -> Session:
        """Creates a session (a sandbox kept for several commands) and returns its handle.

        The handle sends KeepAlive in the background (every third of the idle timeout, or
        `keepalive_interval` seconds) until it is closed; use it as a context manager so it is
        closed when the block ends, also on an exception:

            with client.session() as s:
                code, out, err = s.run("echo hi")

        `from_snapshot` restores a snapshot's workspace into it; with no sandbox options, in
        the snapshot's sandbox (see resume()). `image` is the sandbox's image (images.py), as
        sandbox.image.
        """
        spec = pb.SandboxSpec()
        if sandbox is not None:
            spec.CopyFrom(sandbox)
        for field, value in (("idle_timeout", idle_timeout), ("max_lifetime", max_lifetime)):
            d = duration(value, field)
            if d is not None:
                getattr(spec, field).CopyFrom(d)
        if image:
            spec.image = image
        request = pb.CreateSessionRequest(provider=provider or "",
                                          idempotency_key=idempotency_key or "",
                                          labels=dict(labels or {}),
                                          from_snapshot=from_snapshot or "")
        if not from_snapshot or spec.ByteSize() > 0:
            request.sandbox.CopyFrom(spec)
        return Session(self, self.call("CreateSession", request), keepalive_interval)

    def get_session(self, session_id: str, *,
                    keepalive_interval: Optional[float] = None) -> Session:
        """Reattaches to the tenant's session `session_id` (NotFound otherwise): a live handle,
        the same as session() returns, that can exec, read and write files, keep alive and
        close. While it is open (and the session active) it sends KeepAlive in the background,
        as session()'s does; `record` (and `status`) are the sandgate.v1.Session as fetched."""
        record = self.call("GetSession", pb.GetSessionRequest(session_id=session_id))
        return Session(self, record, keepalive_interval)

    def list_sessions(self, include_closed: bool = False) -> List[pb.Session]:
        """The tenant's sessions, newest first (active ones only unless include_closed)."""
        return list(self.call("ListSessions",
                              pb.ListSessionsRequest(include_closed=include_closed)).sessions)

    # -- snapshots (snapshots.py) -------------------------------------------------------------

    def resume(self, snapshot_id: str, *,
               keepalive_interval: Optional[float] = None) -> Session:
        """A new session with the snapshot's sandbox and its workspace restored (on any
        replica); NotFound when the snapshot is not this tenant's."""
        return self.session(from_snapshot=snapshot_id, keepalive_interval=keepalive_interval)

    def get_snapshot(self, snapshot_id: str) -> pb.Snapshot:
        return _snapshots.get(self, snapshot_id)

    def list_snapshots(self, session_id: str = "") -> List[pb.Snapshot]:
        """The tenant's snapshots, newest first (of one session when session_id is given)."""
        return _snapshots.list_(self, session_id)

    def delete_snapshot(self, snapshot_id: str) -> None:
        _snapshots.delete(self, snapshot_id)

    # -- images (images.py) -------------------------------------------------------------------

    def build_image(self, name: str, packages: Sequence[str], *, detach: bool = False,
                    timeout: Optional[float] = None) -> _images.ImageBuild:
        """Starts building image `name` from Debian `packages`; iterate the answer for its
        progress, or wait() for the image. Ending the call (cancel(), `timeout` seconds
        passing: DeadlineExceeded, or a process that dies) cancels the build unless `detach`."""
        return _images.build(self, name, packages, detach, timeout)

    def get_image(self, name: str) -> ipb.Image:
        """The image `name`, built or building (its last progress line)."""
        return _images.get(self, name)

    def list_images(self) -> List[ipb.Image]:
        """Every image, built and building, that the caller may use."""
        return _images.list_(self)

    def delete_image(self, name: str) -> ipb.Image:
        """Removes a built image (FailedPrecondition while a live session uses it), or cancels
        its build."""
        return _images.delete(self, name)
