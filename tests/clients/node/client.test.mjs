// The TypeScript client against the real daemon (reference agent, local provider): a run end
// to end with its events, resuming a broken stream, downloads checked by sha256, a session
// with exec and files, and errors carrying the daemon's code and message.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync, existsSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { status } from "../../../clients/node/dist/index.js";
const grpc = { status };

import { Client, SandgateError, Session, channelTarget } from "../../../clients/node/dist/index.js";
import { sampleCsv, sha256, startDaemon, startProxy, twoTenants } from "./daemon.mjs";

const TOKEN = "node-client-test-token";
const OTHER = "node-client-other-token";
let daemon;

before(async () => {
  daemon = await startDaemon(twoTenants(TOKEN, OTHER));
});
after(async () => {
  await daemon?.dispose();
});

const client = (options = {}) => new Client({ addr: daemon.addr, token: TOKEN, ...options });

describe("runs", () => {
  test("a run end to end: dense events ending in run.finished, then SUCCEEDED", async () => {
    const c = client();
    const run = await c.runAnalysis(sampleCsv, { labels: { from: "node" } });
    assert.match(run.id, /.+/);
    const seqs = [];
    const types = new Set();
    for await (const e of run.events()) {
      seqs.push(e.seq);
      types.add(e.type);
    }
    assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1));
    assert.ok(types.has("run.started") && types.has("run.finished"), [...types].join(","));
    const final = await run.wait();
    assert.equal(final.status, "RUN_STATUS_SUCCEEDED", final.statusReason);
    assert.equal(final.labels.from, "node");
    assert.ok(final.checks.length > 0 && final.checks.every((k) => k.passed));
    assert.ok((await c.listRuns()).some((r) => r.id === run.id));
    assert.equal((await c.getRun(run.id)).status, "RUN_STATUS_SUCCEEDED");
    c.close();
  });

  // Resumed at (or past) run.finished: nothing, and at once; the timeout bounds a follow that
  // would wait on heartbeats (or reopen the stream) for ever.
  test("events from the end of a finished run end at once", { timeout: 60_000 }, async () => {
    const c = client();
    try {
      const run = await c.runAnalysis(sampleCsv);
      const last = (await run.wait()).lastSeq;
      for (const afterSeq of [last, last + 2]) {
        const got = [];
        for await (const e of run.events({ afterSeq })) got.push(e.type);
        assert.deepEqual(got, [], `after ${afterSeq}`);
      }
      const one = [];
      for await (const e of run.events({ afterSeq: last - 1 })) one.push(e.type);
      assert.deepEqual(one, ["run.finished"]);
    } finally {
      c.close();
    }
  });

  test("a broken stream is resumed from the last seq: no event lost or repeated", async () => {
    const proxy = await startProxy(daemon.addr.slice("unix:".length));
    const c = client({ addr: proxy.addr });
    try {
      const run = await c.runAnalysis(sampleCsv);
      const seqs = [];
      for await (const e of run.events()) {
        seqs.push(e.seq);
        if (seqs.length === 3) proxy.cutAll(); // mid-stream, as a network drop
      }
      assert.ok(proxy.accepted() >= 2, `reconnected: ${proxy.accepted()} connections`);
      assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1));
      assert.ok(seqs.length > 3);
      assert.equal((await run.refresh()).lastSeq, seqs.at(-1));
    } finally {
      c.close();
      await proxy.close();
    }
  });

  test("download: every artifact saved and checked; one that does not match is refused", async () => {
    const c = client();
    const run = await c.runAnalysis(sampleCsv);
    const final = await run.wait();
    const dir = mkdtempSync(join(tmpdir(), "sg-node-dl-"));
    const paths = await run.download(dir);
    assert.equal(paths.length, final.artifacts.length);
    for (const a of final.artifacts) {
      assert.equal(sha256(readFileSync(join(dir, a.name))), a.sha256, a.name);
    }
    // The record says another hash (as if the bytes had been changed in transit or at rest).
    const bad = mkdtempSync(join(tmpdir(), "sg-node-bad-"));
    run.record.artifacts[0].sha256 = "0".repeat(64);
    await assert.rejects(run.download(bad), /does not match/);
    assert.equal(existsSync(join(bad, final.artifacts[0].name)), false);
    assert.deepEqual(readdirSync(bad), []);
    c.close();
  });

  test("cancel ends a run CANCELLED", async () => {
    const c = client();
    const run = await c.runAnalysis(sampleCsv, { sandbox: { setupCommands: ["sleep 30"] } });
    await run.cancel("not needed");
    const final = await run.wait();
    assert.equal(final.status, "RUN_STATUS_CANCELLED");
    c.close();
  });
});

describe("processes", () => {
  test("a background process takes stdin, runs on a terminal, and is read from offsets", async () => {
    const c = client();
    await c.withSession({ sandbox: { idleTimeout: { seconds: 60 } } }, async (s) => {
      const cat = await s.start("cat", { stdin: true });
      assert.equal(cat.id, "p1");
      assert.ok(cat.running);
      await cat.write("hello\n");
      const first = await cat.read({ waitSeconds: 10 });
      assert.equal(Buffer.concat(first.map((p) => p.data)).toString(), "hello\n");
      await cat.closeStdin();
      const done = await cat.wait();
      assert.equal(done.exitCode, 0);
      assert.ok(!cat.running);

      const py = await s.start(["python3", "-i", "-q"], { pty: { rows: 24, cols: 80 } });
      let seen = "";
      const until = async (text) => {
        while (!seen.includes(text)) seen += Buffer.concat((await py.read({ waitSeconds: 10 })).map((p) => p.data)).toString();
      };
      await until(">>> ");
      await py.resize(33, 101);
      await py.write("import os; print(os.get_terminal_size())\n");
      await until("columns=101, lines=33");
      await py.kill();
      assert.equal((await py.wait()).record.finished.signal, 9);

      const quick = await s.start("sleep 0.2; echo finished");
      const all = await quick.read({ waitSeconds: 20, untilExit: true });
      assert.equal(Buffer.concat(all.map((p) => p.data)).toString(), "finished\n");
      assert.equal(quick.record.state, "STATE_EXITED");

      const printed = await s.start("printf abcdef");
      await printed.wait();
      const again = await s.process(printed.id);
      again.offset = 2;
      assert.equal(Buffer.concat((await again.read()).map((p) => p.data)).toString(), "cdef");
      assert.deepEqual((await s.processes()).map((p) => p.id), ["p1", "p2", "p3", "p4"]);
      await assert.rejects(again.signal("SIGSTOP"), (e) => e.codeName === "INVALID_ARGUMENT" && e.message.includes("SIGSTOP"));
      await assert.rejects(s.process("p99"), (e) => e.codeName === "NOT_FOUND");
    });
    c.close();
  });
});

describe("session files", () => {
  test("stat, remove, rename and mkdir stay inside the workspace", async () => {
    const c = client();
    await c.withSession({}, async (s) => {
      assert.equal((await s.mkdir("a/b", { parents: true })).type, "TYPE_DIRECTORY");
      await s.write("a/b/f.txt", "abc");
      assert.equal((await s.stat("a/b/f.txt")).sizeBytes, 3);
      assert.equal((await s.rename("a/b/f.txt", "g.txt")).path, "g.txt");
      await assert.rejects(s.rename("a", "g.txt"), (e) => e.codeName === "ALREADY_EXISTS");
      await assert.rejects(s.remove("a"), (e) => e.codeName === "FAILED_PRECONDITION");
      await s.remove("a", { recursive: true });
      await assert.rejects(s.stat("a"), (e) => e.codeName === "NOT_FOUND");
      for (const bad of ["../g.txt", "/etc/passwd"]) {
        await assert.rejects(s.remove(bad), (e) => e.codeName === "INVALID_ARGUMENT");
      }
      assert.equal((await s.read("g.txt")).toString(), "abc");
    });
    c.close();
  });
});

describe("sessions", () => {
  test("exec streams output and its end; files go up, are listed, and come back", async () => {
    const c = client();
    const work = mkdtempSync(join(tmpdir(), "sg-node-files-"));
    let id;
    await c.withSession({ sandbox: { idleTimeout: { seconds: 60 } } }, async (s) => {
      id = s.id;
      const pieces = [];
      const execution = s.exec("echo out; echo err >&2; exit 3");
      for await (const p of execution) pieces.push(p);
      const end = await execution.result;
      assert.equal(end.exitCode, 3);
      assert.equal(Buffer.concat(pieces.filter((p) => p.stream === "stdout").map((p) => p.data)).toString(), "out\n");
      assert.equal(Buffer.concat(pieces.filter((p) => p.stream === "stderr").map((p) => p.data)).toString(), "err\n");

      const local = join(work, "data.bin");
      const bytes = Buffer.alloc(3 << 20, 7); // several chunks
      writeFileSync(local, bytes);
      const info = await s.upload(local, "in/data.bin");
      assert.equal(info.sha256, sha256(bytes));
      const listed = await s.ls("in");
      assert.ok(listed.some((f) => f.path === "in/data.bin" && f.sizeBytes === bytes.length), JSON.stringify(listed));
      const r = await s.run(["sha256sum", "in/data.bin"]);
      assert.equal(r.exitCode, 0);
      assert.ok(r.stdout.startsWith(sha256(bytes)));
      const back = await s.download("in/data.bin", join(work, "back.bin"));
      assert.deepEqual(readFileSync(back), bytes);
      // From memory and back.
      await s.write("notes/a.txt", "hello ünïcode\n");
      assert.equal((await s.read("notes/a.txt")).toString(), "hello ünïcode\n");
      await assert.rejects(s.read("notes/none.txt"), (e) => e.codeName === "NOT_FOUND");
    });
    const closed = (await c.listSessions(true)).find((x) => x.id === id);
    assert.equal(closed.status, "SESSION_STATUS_CLOSED");
    c.close();
  });

  test("getSession reattaches by id: a live session that runs, moves files, keeps alive, closes", async () => {
    const c = client();
    const made = await c.createSession({ sandbox: { idleTimeout: { seconds: 60 } } });
    await made.write("left.txt", "from the first handle\n");
    // Another process (here: another client) picks the session up by its id alone.
    const other = client();
    const s = await other.getSession(made.id);
    assert.equal(s.id, made.id);
    assert.equal(s.record.status, "SESSION_STATUS_ACTIVE");
    const r = await s.run("cat left.txt");
    assert.equal(r.stdout, "from the first handle\n");
    await s.write("back.txt", "from the second\n");
    assert.equal((await s.read("back.txt")).toString(), "from the second\n");
    assert.equal((await s.keepAlive()).status, "SESSION_STATUS_ACTIVE");
    assert.equal((await s.close("done")).status, "SESSION_STATUS_CLOSED");
    await assert.rejects(other.getSession("s-does-not-exist"), (e) => e instanceof SandgateError && e.codeName === "NOT_FOUND");
    // Another tenant's session is not found, as its runs are.
    const stranger = client({ token: OTHER });
    const theirs = await c.createSession({});
    await assert.rejects(stranger.getSession(theirs.id), (e) => e.code === grpc.status.NOT_FOUND);
    await theirs.close();
    for (const x of [c, other, stranger]) x.close();
  });

  test("exec on a missing or closed session rejects with the daemon's code, as every call does", async () => {
    const c = client();
    const s = await c.createSession({});
    const missing = new Session(c, { id: "s-does-not-exist" }, { keepAlive: false });
    await assert.rejects(missing.run("true"), (e) => e instanceof SandgateError && e.codeName === "NOT_FOUND");
    await s.close();
    await assert.rejects(s.run("true"), (e) => e instanceof SandgateError && e.codeName === "FAILED_PRECONDITION");
    // The same through iteration and through `result`.
    const execution = s.exec("true");
    await assert.rejects(execution.result, (e) => e instanceof SandgateError && e.codeName === "FAILED_PRECONDITION");
    await assert.rejects(
      (async () => {
        for await (const _ of execution);
      })(),
      (e) => e instanceof SandgateError && e.codeName === "FAILED_PRECONDITION",
    );
    c.close();
  });
});

describe("errors", () => {
  test("carry the gRPC code and the daemon's message", async () => {
    const wrong = client({ token: "not-a-token" });
    await assert.rejects(wrong.listRuns(), (e) => e instanceof SandgateError && e.code === grpc.status.UNAUTHENTICATED && /unknown token/.test(e.message));
    const c = client();
    await assert.rejects(c.runAnalysis(sampleCsv, { playbook: "no-such-playbook" }), (e) =>
      e instanceof SandgateError && e.codeName === "INVALID_ARGUMENT" && /no-such-playbook/.test(e.message));
    await assert.rejects(c.getRun("r-nope"), (e) => e.code === grpc.status.NOT_FOUND);
    // Another tenant's run is not found, never forbidden.
    const mine = await c.runAnalysis(sampleCsv);
    const other = client({ token: OTHER });
    await assert.rejects(other.getRun(mine.id), (e) => e.code === grpc.status.NOT_FOUND);
    await mine.wait();
    for (const x of [wrong, c, other]) x.close();
  });

  test("a bad address or TLS file is refused at once, naming it", () => {
    assert.throws(() => new Client({ addr: "localhost" }), /no port/);
    assert.throws(() => new Client({ addr: "tcp:a:1,tcp:b:2" }), /several addresses/);
    assert.throws(() => new Client({ addr: "tcp:127.0.0.1:1", tlsCa: "/nonexistent/ca.pem" }), /tlsCa \/nonexistent\/ca.pem/);
    assert.deepEqual(channelTarget("tcp:10.0.0.1:7,10.0.0.2:8"), { target: "ipv4:10.0.0.1:7,10.0.0.2:8", several: true });
    assert.deepEqual(channelTarget("unix:/run/x.sock"), { target: "unix:/run/x.sock", several: false });
  });
});
