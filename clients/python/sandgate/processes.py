"""Processes of a session you talk to: started in the background, read from any offset,
written to, signalled, resized (StartProcess, ReadProcessOutput, WriteProcessInput).

    p = session.start("python3 -m http.server 8000")          # returns at once
    p = session.start(["python3", "-i"], pty=(24, 80))         # on a terminal
    p.write("print(6*7)\n")
    for piece in p.read(wait=5):                               # output since the last read
        print(piece.stream, piece.data)
    p.signal("SIGINT"); p.resize(40, 120); p.close_stdin()
    result = p.wait()                                          # the rest, and how it ended
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, List, Optional, Union

from ._durations import Seconds, duration
from .v1 import sandgate_pb2 as pb

if TYPE_CHECKING:
    from .client import Client

from .sessions import Output

# One read waits at most this long on the daemon (processes.max_read_wait_seconds is 30 by
# default); wait() asks again until the process ends.
_READ_WAIT_SECONDS = 10.0


@dataclass
class ProcessResult:
    """How a process ended and the output read by wait(). Unpacks as (exit_code, stdout,
    stderr). exit_code is -1 when a signal ended it (finished.signal says which)."""
    exit_code: int
    stdout: Union[str, bytes]
    stderr: Union[str, bytes]
    record: pb.Process = field(repr=False)

    def __iter__(self):
        return iter((self.exit_code, self.stdout, self.stderr))


class Process:
    """A process of a session. `record` is the sandgate.v1.Process last seen; `offset` is where
    the next read() starts (everything before it was returned, or dropped: `dropped_bytes`
    counts what the daemon's bounded buffer no longer held). One thread reads a Process;
    write(), signal() and resize() may come from any thread."""

    def __init__(self, client: "Client", record: pb.Process) -> None:
        self._client = client
        self.record = record
        self.offset = 0
        self.dropped_bytes = 0

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def session_id(self) -> str:
        return self.record.session_id

    @property
    def running(self) -> bool:
        return self.record.state == pb.Process.STATE_RUNNING

    def __repr__(self) -> str:
        return f"<sandgate.Process {self.session_id}/{self.id}>"

    def read(self, wait: Seconds = 0, max_bytes: int = 0,
             until_exit: bool = False) -> List[Output]:
        """The output after `offset` (advancing it), waiting up to `wait` seconds for some when
        there is none yet and the process runs; with until_exit, for the process's end (or
        max_bytes of output) instead, as an agent's yieldTimeMs. Empty once it ended and all
        was read."""
        request = pb.ReadProcessOutputRequest(session_id=self.session_id, process_id=self.id,
                                              offset=self.offset, max_bytes=max_bytes,
                                              until_exit=until_exit)
        d = duration(wait, "wait") if wait else None
        if d is not None:
            request.wait.CopyFrom(d)
        answer = self._client.call("ReadProcessOutput", request,
                                   timeout=(d.ToTimedelta().total_seconds() if d else 0) + 60.0)
        self.record = answer.process
        self.offset = answer.next_offset
        self.dropped_bytes += answer.dropped_bytes
        return [Output("stderr" if c.stream == pb.CommandOutput.STREAM_STDERR else "stdout",
                       c.data) for c in answer.chunks]

    def _input(self, **fields) -> pb.WriteProcessInputResponse:
        answer = self._client.call("WriteProcessInput", pb.WriteProcessInputRequest(
            session_id=self.session_id, process_id=self.id, **fields))
        self.record = answer.process
        return answer

    def write(self, data: Union[str, bytes]) -> None:
        """Writes all of `data` to its stdin (a str as UTF-8); a terminal takes raw bytes, so
        "\\x03" is Ctrl-C there."""
        rest = data.encode() if isinstance(data, str) else bytes(data)
        while rest:
            rest = rest[self._input(data=rest[:1 << 20]).written_bytes:]

    def close_stdin(self) -> None:
        """EOF on its stdin (on a terminal: ^D)."""
        self._input(close_stdin=True)

    def signal(self, name: str = "SIGTERM") -> None:
        """Sends a signal to its process group: SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGKILL,
        SIGUSR1 or SIGUSR2."""
        self._input(signal=name)

    def kill(self) -> None:
        self.signal("SIGKILL")

    def resize(self, rows: int, cols: int) -> None:
        """The size of its terminal (a process started with pty=)."""
        self._input(resize=pb.TerminalSize(rows=rows, cols=cols))

    def wait(self, text: bool = True) -> ProcessResult:
        """Reads the rest of its output until it ended; stdout and stderr are str (UTF-8,
        undecodable bytes replaced) unless text=False."""
        out, err = bytearray(), bytearray()
        while True:
            pieces = self.read(wait=_READ_WAIT_SECONDS)
            for piece in pieces:
                (err if piece.stream == "stderr" else out).extend(piece.data)
            if not self.running and not pieces:
                break
        decode = (lambda b: b.decode("utf-8", "replace")) if text else bytes
        code = self.record.finished.exit_code if self.record.HasField("finished") else -1
        return ProcessResult(code, decode(out), decode(err), self.record)


def start(client: "Client", session_id: str, cmd, *, stdin: bool = False, pty=None,
          env=None, cwd: str = "", timeout: Optional[Seconds] = None) -> Process:
    request = pb.StartProcessRequest(session_id=session_id, env=dict(env or {}), cwd=cwd,
                                     stdin=stdin)
    if isinstance(cmd, str):
        request.command = cmd
    else:
        request.argv.extend(cmd)
    if pty is not None:
        rows, cols = pty
        request.pty.CopyFrom(pb.TerminalSize(rows=rows, cols=cols))
    d = duration(timeout, "timeout")
    if d is not None:
        request.timeout.CopyFrom(d)
    return Process(client, client.call("StartProcess", request))
