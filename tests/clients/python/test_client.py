"""The Python client (clients/python) against the real daemon: a run end to end, its events
resumed across a cut stream, checked downloads, a session, and the daemon's errors mapped."""

from __future__ import annotations

import gc
import os
import signal
import time

import grpc
import pytest

import sandgate
from conftest import SAMPLE_CSV, TOKEN
from cutting_proxy import CuttingProxy


@pytest.fixture
def client(daemon):
    with sandgate.Client(daemon.address, token=TOKEN) as c:
        yield c


def test_a_run_end_to_end_with_its_events(client):
    run = client.run_analysis(SAMPLE_CSV, idempotency_key="py-e2e")
    assert run.id and run.record.input_names == [os.path.basename(SAMPLE_CSV)]
    events = list(run.events())
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].type == "run.queued" and events[-1].type == "run.finished"
    assert {"run.started", "session.created", "command.finished", "check"} <= {
        e.type for e in events}
    final = run.wait()
    assert sandgate.RunStatus(final.status) == sandgate.RunStatus.SUCCEEDED
    assert run.status == sandgate.RunStatus.SUCCEEDED
    assert final.last_seq == events[-1].seq and final.checks and final.summary.headline
    # The same key is the same run; the tenant's list holds it.
    assert client.run_analysis(SAMPLE_CSV, idempotency_key="py-e2e").id == run.id
    assert run.id in [r.id for r in client.list_runs()]
    assert client.get_run(run.id).record.status == final.status


def test_events_resume_after_a_cut_stream_without_losing_or_repeating_one(daemon):
    # Beside the daemon's socket: a Unix socket path must stay under 108 bytes.
    proxy = CuttingProxy(daemon.socket, os.path.join(daemon.dir, "proxy.sock"))
    try:
        with sandgate.Client(proxy.address, token=TOKEN) as c:
            # The setup command keeps the run going while its stream is cut.
            run = c.run_analysis(SAMPLE_CSV, sandbox=sandgate.pb.SandboxSpec(
                setup_commands=["sleep 2"]))
            seqs = []
            cut = 0
            for event in run.events(timeout=60, reconnect_timeout=20):
                seqs.append(event.seq)
                if event.type == "command.started" and not cut:
                    cut = proxy.cut()
            assert cut >= 1
            assert run.reconnects >= 1 and proxy.connections >= 2
            replay = [e.seq for e in run.events(follow=False)]
        assert seqs == replay == list(range(1, len(seqs) + 1))
    finally:
        proxy.close()


def test_events_from_the_end_of_a_finished_run_end_at_once(client):
    run = client.run_analysis(SAMPLE_CSV)
    last = run.wait(timeout=120).last_seq
    # Resumed at (or past) run.finished: nothing, at once; `timeout` bounds a follow that
    # would wait on heartbeats (DeadlineExceeded).
    for after in (last, last + 2):
        assert list(run.events(after, timeout=10)) == []
    assert [e.type for e in run.events(last - 1, timeout=10)] == ["run.finished"]


def test_download_checks_every_artifact_and_refuses_a_tampered_one(client, daemon, tmp_path):
    run = client.run_analysis(SAMPLE_CSV)
    record = run.wait()
    paths = run.download(str(tmp_path / "good"))
    assert sorted(os.path.basename(p) for p in paths) == sorted(a.name for a in record.artifacts)
    memo = next(a for a in record.artifacts if a.name.endswith(".md"))
    with open(tmp_path / "good" / memo.name, "rb") as f:
        assert len(f.read()) == memo.size_bytes

    # Bytes that change after the run recorded their sha256 are refused, and leave nothing.
    stored = os.path.join(daemon.state_dir, "artifacts", run.id, memo.name)
    with open(stored, "r+b") as f:
        first = f.read(1)
        f.seek(0)
        f.write(b"X" if first != b"X" else b"Y")
    with pytest.raises(sandgate.DataLoss) as caught:
        run.download(str(tmp_path / "bad"))
    assert caught.value.code == grpc.StatusCode.DATA_LOSS
    assert memo.name in caught.value.message and memo.sha256 in caught.value.message
    assert memo.name not in os.listdir(tmp_path / "bad")
    assert not [n for n in os.listdir(tmp_path / "bad") if "partial" in n]


def test_a_session_execs_uploads_downloads_and_lists(client, tmp_path):
    local = tmp_path / "in.txt"
    local.write_bytes(os.urandom(600 << 10))  # several upload and download chunks
    with client.session() as s:
        assert s.record.status == sandgate.pb.SESSION_STATUS_ACTIVE
        info = s.upload(str(local), "data/in.txt")
        assert info.size_bytes == local.stat().st_size
        s.write("note.txt", b"a note")

        # Output arrives as produced: the command waits for a file the test writes only
        # after it has read the command's first line.
        execution = s.exec("echo ready; while [ ! -e go ]; do sleep 0.05; done; echo done",
                           timeout=30)
        lines = []
        for piece in execution:
            lines.append(piece.data)
            if piece.data == b"ready\n":
                s.write("go", b"")
        assert lines == [b"ready\n", b"done\n"] and execution.exit_code == 0
        assert not execution.finished.timed_out

        execution = s.exec("wc -c < data/in.txt; echo oops >&2; exit 4")
        pieces = list(execution)
        assert {p.stream for p in pieces} == {"stdout", "stderr"}
        assert execution.exit_code == 4
        code, out, err = s.run(["sh", "-c", "cat note.txt; printf x > made.txt"])
        assert (code, out, err) == (0, "a note", "")

        listing = {f.path: f for f in s.ls()}
        assert listing["data/in.txt"].size_bytes == local.stat().st_size
        assert listing["data"].type == sandgate.pb.FileInfo.TYPE_DIRECTORY
        assert "made.txt" in listing and not s.ls().truncated

        back = s.download("data/in.txt", str(tmp_path))
        assert open(back, "rb").read() == local.read_bytes()
        assert s.read("made.txt") == b"x"
        session_id = s.id
    assert client.get_session(session_id).status == sandgate.pb.SESSION_STATUS_CLOSED
    with pytest.raises(sandgate.FailedPrecondition, match=f"session {session_id} is closed"):
        s.run("true")


def test_a_session_is_closed_when_its_block_raises(client):
    with pytest.raises(RuntimeError):
        with client.session() as s:
            raise RuntimeError("the caller's own failure")
    assert client.get_session(s.id).status == sandgate.pb.SESSION_STATUS_CLOSED


def test_get_session_reattaches_a_live_session_by_id(client, daemon):
    made = client.session()
    made.write("left.txt", b"from the first handle\n")
    # Another process picks the session up by its id alone: the same handle session() gives.
    with sandgate.Client(daemon.address, token=TOKEN) as other:
        s = other.get_session(made.id)
        assert isinstance(s, sandgate.Session) and s.id == made.id
        assert s.status == sandgate.pb.SESSION_STATUS_ACTIVE
        assert s.run("cat left.txt").stdout == "from the first handle\n"
        s.write("back.txt", b"from the second")
        assert s.read("back.txt") == b"from the second"
        assert s.refresh().status == sandgate.pb.SESSION_STATUS_ACTIVE
        assert s.close("done").status == sandgate.pb.SESSION_STATUS_CLOSED
        with pytest.raises(sandgate.NotFound):
            other.get_session("s-does-not-exist")
    made.close()
    # A closed session reattached is a handle with nothing to keep alive.
    closed = client.get_session(made.id)
    assert closed.status == sandgate.pb.SESSION_STATUS_CLOSED
    closed._keepalive.join(timeout=10)
    assert not closed._keepalive.is_alive()


def test_the_keep_alive_holds_an_idle_session_past_its_idle_timeout(client):
    with client.session(idle_timeout=2, keepalive_interval=0.5) as s:
        # Real time: the daemon reaps sessions on its own clock (an unkept one is gone by now).
        time.sleep(3.5)
        assert s.refresh().status == sandgate.pb.SESSION_STATUS_ACTIVE
        assert s.keepalive_error is None


def test_errors_carry_the_daemons_code_and_message(client, daemon):
    with pytest.raises(sandgate.InvalidArgument) as caught:
        client.run_analysis(SAMPLE_CSV, playbook="no-such-playbook")
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert 'playbook not found: "no-such-playbook"' in caught.value.message

    with sandgate.Client(daemon.address, token="not-a-tenant") as stranger:
        with pytest.raises(sandgate.Unauthenticated) as caught:
            stranger.get_run("r-1")
    assert caught.value.message == "unknown token"

    with pytest.raises(sandgate.NotFound) as caught:
        client.get_run("r-nope")
    assert isinstance(caught.value, sandgate.Error) and "r-nope" in caught.value.message

    # Operator-only RPCs through the stub the client holds; the tenant is not an operator.
    with pytest.raises(sandgate.PermissionDenied, match="operator role is required"):
        client.call("Purge", sandgate.pb.PurgeRequest())

    with client.session() as s:
        with pytest.raises(sandgate.InvalidArgument, match='".." is not allowed'):
            s.write("../escape", b"x")
        with pytest.raises(sandgate.NotFound, match="file not found: nope.txt"):
            s.read("nope.txt")


def test_events_resume_across_a_daemon_restart(own_daemon):
    with sandgate.Client(own_daemon.address, token=TOKEN) as c:
        run = c.run_analysis(SAMPLE_CSV, sandbox=sandgate.pb.SandboxSpec(
            setup_commands=["sleep 5"]))
        events = []
        for event in run.events(timeout=60, reconnect_timeout=20):
            events.append(event)
            if event.type == "command.started" and own_daemon.process:
                # Killed, so it cannot end the stream with a terminal event; the restarted
                # daemon finds the run interrupted and writes its run.finished.
                own_daemon.stop(signal.SIGKILL)
                own_daemon.start()
        assert run.reconnects >= 1
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert events[-1].type == "run.finished"
        assert events[-1].run_finished.status == sandgate.pb.RUN_STATUS_FAILED
        assert "daemon stopped" in events[-1].run_finished.reason
        assert [e.seq for e in run.events(follow=False)] == [e.seq for e in events]


def test_a_dropped_session_handle_stops_keeping_its_session_alive(client):
    s = client.session(keepalive_interval=0.1)
    session_id, keepalive = s.id, s._keepalive
    del s
    gc.collect()
    keepalive.join(timeout=10)
    assert not keepalive.is_alive()
    client.call("CloseSession", sandgate.pb.CloseSessionRequest(session_id=session_id))


def test_wait_times_out_and_cancel_ends_a_running_run_as_cancelled(client):
    run = client.run_analysis(SAMPLE_CSV, sandbox=sandgate.pb.SandboxSpec(
        setup_commands=["sleep 30"]))
    for event in run.events(timeout=30):
        if event.type == "command.started":
            break
    with pytest.raises(sandgate.DeadlineExceeded, match="no run.finished within 0.3 s"):
        run.wait(timeout=0.3)
    assert run.cancel("the caller changed its mind").id == run.id
    final = run.wait(timeout=30)
    assert sandgate.RunStatus(final.status) == sandgate.RunStatus.CANCELLED
    assert "changed its mind" in final.status_reason
    assert sandgate.RunStatus(run.cancel().status) == sandgate.RunStatus.CANCELLED  # idempotent


def test_processes_take_stdin_run_on_a_terminal_and_are_read_from_offsets(client):
    with client.session() as s:
        cat = s.start("cat", stdin=True)
        assert cat.id == "p1" and cat.running
        cat.write("hello\n")
        assert [p.data for p in cat.read(wait=10)] == [b"hello\n"]
        cat.close_stdin()
        result = cat.wait()
        assert (result.exit_code, result.stdout) == (0, "")  # all of it was read before
        assert not cat.running

        py = s.start(["python3", "-i", "-q"], pty=(24, 80))
        seen = b""
        while b">>> " not in seen:
            seen += b"".join(p.data for p in py.read(wait=10))
        py.write("import os; print(os.isatty(0), 6*7)\n")
        # Resized at the prompt: readline writes back the size it read as it shows one.
        while b"True 42\r\n>>> " not in seen:
            seen += b"".join(p.data for p in py.read(wait=10))
        py.resize(40, 120)
        py.write("print(os.get_terminal_size())\n")
        while b"columns=120, lines=40" not in seen:
            seen += b"".join(p.data for p in py.read(wait=10))
        py.signal("SIGKILL")
        assert py.wait().record.finished.signal == signal.SIGKILL

        # A command given a time to finish: one read until its end.
        quick = s.start("sleep 0.2; echo finished")
        assert b"".join(p.data for p in quick.read(wait=20, until_exit=True)) == b"finished\n"
        assert quick.record.state == sandgate.pb.Process.STATE_EXITED

        # Output stays readable after the writer ended, from any offset.
        done = s.start("printf 'abcdef'; printf err >&2")
        code, out, err = done.wait(text=False)
        assert (code, out, err) == (0, b"abcdef", b"err")
        again = s.process(done.id)
        again.offset = 3
        assert b"".join(p.data for p in again.read()) == b"deferr"
        assert [p.id for p in s.processes()] == ["p1", "p2", "p3", "p4"]

        with pytest.raises(sandgate.InvalidArgument, match="SIGSTOP"):
            again.signal("SIGSTOP")
        with pytest.raises(sandgate.FailedPrecondition, match="has ended"):
            again.write("x")
        with pytest.raises(sandgate.NotFound):
            s.process("p99")


def test_session_files_stat_remove_rename_and_mkdir_inside_the_workspace(client):
    with client.session() as s:
        assert s.mkdir("a/b", parents=True).type == sandgate.pb.FileInfo.TYPE_DIRECTORY
        s.write("a/b/f.txt", b"abc")
        assert s.stat("a/b/f.txt").size_bytes == 3
        assert s.stat().type == sandgate.pb.FileInfo.TYPE_DIRECTORY
        assert s.rename("a/b/f.txt", "g.txt").path == "g.txt"
        with pytest.raises(sandgate.AlreadyExists):
            s.rename("a", "g.txt")
        with pytest.raises(sandgate.FailedPrecondition, match="not empty"):
            s.remove("a")
        s.remove("a", recursive=True)
        with pytest.raises(sandgate.NotFound):
            s.stat("a")
        for bad in ("../g.txt", "/etc/passwd", "a/../../b"):
            with pytest.raises(sandgate.InvalidArgument):
                s.remove(bad)
        s.run("ln -s /etc etc")
        with pytest.raises(sandgate.InvalidArgument, match="symbolic link"):
            s.stat("etc/passwd")
        assert s.read("g.txt") == b"abc"
