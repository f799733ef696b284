// Snapshots through the TypeScript client against the real daemon: a session's workspace
// snapshotted, resumed into a new session, paused, listed and deleted; another tenant's
// snapshot is NOT_FOUND.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client, SandgateError, status } from "../../../clients/node/dist/index.js";
import { startDaemon, twoTenants } from "./daemon.mjs";

const TOKEN = "node-snapshots-token";
const OTHER = "node-snapshots-other";
let daemon;

before(async () => {
  daemon = await startDaemon(twoTenants(TOKEN, OTHER));
});
after(async () => {
  await daemon?.dispose();
});

test("snapshot, resume, pause, list and delete", async () => {
  const client = new Client({ addr: daemon.addr, token: TOKEN });
  const other = new Client({ addr: daemon.addr, token: OTHER });
  try {
    const s = await client.createSession({ sandbox: { env: { KEPT: "yes" } } });
    await s.run("mkdir -p d && echo notes > d/notes.md && chmod 0700 d && ln -s d/notes.md n");
    const snap = await s.snapshot({ labels: { why: "test" } });
    assert.match(snap.id, /^snap-[0-9a-f]{32}$/);
    assert.equal(snap.sessionId, s.id);
    assert.equal(snap.labels.why, "test");

    const again = await client.resume(snap.id);
    const { stdout } = await again.run("cat n; stat -c %a d; echo $KEPT");
    assert.equal(stdout, "notes\n700\nyes\n");
    await again.close();

    const paused = await s.pause();
    assert.equal(s.record.status, "SESSION_STATUS_CLOSED");
    assert.deepEqual(
      (await client.listSnapshots(s.id)).map((x) => x.id),
      [paused.id, snap.id],
    );

    await assert.rejects(other.getSnapshot(snap.id), (e) => e instanceof SandgateError && e.code === status.NOT_FOUND);
    await assert.rejects(other.resume(snap.id), (e) => e.code === status.NOT_FOUND);
    assert.deepEqual(await other.listSnapshots(), []);

    for (const id of [snap.id, paused.id]) await client.deleteSnapshot(id);
    await assert.rejects(client.getSnapshot(snap.id), (e) => e.code === status.NOT_FOUND);
  } finally {
    client.close();
    other.close();
  }
});
