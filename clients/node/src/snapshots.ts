// Snapshots (docs/sessions.md, "Snapshots"): a kept session's workspace saved in the daemon's
// store and restored into a new session on any replica. Client.resume(id) and
// Session.snapshot()/pause() are the usual way in; these are the calls underneath.
//
//   const snap = await session.snapshot();          // or session.pause(): snapshot + close
//   const again = await client.resume(snap.id);     // a new session, the workspace restored
//   for (const s of await client.listSnapshots()) await client.deleteSnapshot(s.id);
import type { Snapshot__Output } from "./generated/sandgate/v1/Snapshot.js";

/** What the calls need of a Client (index.ts's Client has it). */
export interface UnaryCaller {
  unary<Res>(method: string, request: object): Promise<Res>;
}

export type SnapshotRecord = Snapshot__Output;

/** Saves session `sessionId`'s workspace; with `close`, the session is then closed. */
export function takeSnapshot(
  client: UnaryCaller,
  sessionId: string,
  options: { close?: boolean; labels?: Record<string, string> } = {},
): Promise<SnapshotRecord> {
  return client.unary<SnapshotRecord>("SnapshotSession", {
    sessionId,
    close: options.close ?? false,
    labels: options.labels ?? {},
  });
}

export function getSnapshot(client: UnaryCaller, snapshotId: string): Promise<SnapshotRecord> {
  return client.unary<SnapshotRecord>("GetSnapshot", { snapshotId });
}

/** The tenant's snapshots, newest first; of one session when `sessionId` is given. */
export async function listSnapshots(client: UnaryCaller, sessionId = ""): Promise<SnapshotRecord[]> {
  const res = await client.unary<{ snapshots: SnapshotRecord[] }>("ListSnapshots", { sessionId });
  return res.snapshots;
}

export async function deleteSnapshot(client: UnaryCaller, snapshotId: string): Promise<void> {
  await client.unary("DeleteSnapshot", { snapshotId });
}
