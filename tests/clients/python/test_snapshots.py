"""Snapshots through the Python client against the real daemon: snapshot, resume, pause, list
and delete, and the daemon's errors as the client's exceptions."""

from __future__ import annotations

import pytest

import sandgate
from conftest import TOKEN


@pytest.fixture
def client(daemon):
    with sandgate.Client(daemon.address, token=TOKEN) as c:
        yield c


def test_a_snapshot_resumes_into_a_new_session_with_its_workspace(client):
    with client.session(sandbox=sandgate.pb.SandboxSpec(env={"KEPT": "yes"})) as s:
        s.run("mkdir -p d && echo notes > d/notes.md && chmod 0700 d && ln -s d/notes.md n")
        snap = s.snapshot(labels={"why": "test"})
    assert snap.id.startswith("snap-") and snap.session_id == s.id
    assert snap.labels["why"] == "test"
    assert client.get_snapshot(snap.id).sha256 == snap.sha256
    assert snap.id in [x.id for x in client.list_snapshots(session_id=s.id)]
    with client.resume(snap.id) as again:
        assert again.id != s.id
        code, out, _ = again.run("cat n; stat -c %a d; echo $KEPT")
        assert (code, out) == (0, "notes\n700\nyes\n")
    client.delete_snapshot(snap.id)
    with pytest.raises(sandgate.NotFound):
        client.get_snapshot(snap.id)
    with pytest.raises(sandgate.NotFound):
        client.resume(snap.id)


def test_pause_closes_the_session_and_its_snapshot_resumes_it(client):
    s = client.session()
    s.write("state.json", b'{"step": 3}')
    snap = s.pause()
    assert s.status == sandgate.pb.SESSION_STATUS_CLOSED
    with client.session(from_snapshot=snap.id, idle_timeout=120) as again:
        assert again.read("state.json") == b'{"step": 3}'
        assert again.record.idle_timeout.seconds == 120


def test_bad_snapshot_ids_are_the_daemons_errors(client):
    with pytest.raises(sandgate.NotFound):
        client.get_snapshot("snap-00000000000000000000000000000000")
    with pytest.raises(sandgate.InvalidArgument):
        client.get_snapshot("")
    with pytest.raises(sandgate.InvalidArgument):
        client.delete_snapshot("bad\x01id")
