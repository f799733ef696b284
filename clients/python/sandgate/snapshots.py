"""Snapshots: a session's workspace saved in the daemon's store, restored on any replica.

    with client.session() as s:
        s.run("echo notes > notes.md")
        snap = s.snapshot()                        # sandgate.pb.Snapshot
    with client.resume(snap.id) as again:          # a new session, the workspace restored
        print(again.read("notes.md"))              # b'notes\\n'
    paused = client.session().pause()              # snapshot, then close
    for s in client.list_snapshots():
        client.delete_snapshot(s.id)

Another tenant's snapshot is NotFound, as one that does not exist.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Mapping, Optional

from .v1 import sandgate_pb2 as pb

if TYPE_CHECKING:
    from .client import Client


def take(client: "Client", session_id: str, close: bool = False,
         labels: Optional[Mapping[str, str]] = None) -> pb.Snapshot:
    return client.call("SnapshotSession", pb.SnapshotSessionRequest(
        session_id=session_id, close=close, labels=dict(labels or {})))


def get(client: "Client", snapshot_id: str) -> pb.Snapshot:
    return client.call("GetSnapshot", pb.GetSnapshotRequest(snapshot_id=snapshot_id))


def list_(client: "Client", session_id: str = "") -> List[pb.Snapshot]:
    return list(client.call("ListSnapshots",
                            pb.ListSnapshotsRequest(session_id=session_id)).snapshots)


def delete(client: "Client", snapshot_id: str) -> None:
    client.call("DeleteSnapshot", pb.DeleteSnapshotRequest(snapshot_id=snapshot_id))
