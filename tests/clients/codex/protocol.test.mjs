// The exec-server route on the real daemon through a protocol-faithful client of our own (the
// `ws` package, speaking the JSON-RPC recorded from codex-cli 0.169.0): what the published
// binary did not exercise in codex.test.mjs (a terminal, signals), and hostile input on a
// real sandbox and a real socket.
import assert from "node:assert/strict";
import { once } from "node:events";
import { after, before, test } from "node:test";

import WebSocket from "ws";

import { codexUrl, createSession, execText, rest, startRestDaemon } from "./harness.mjs";

let daemon;
before(async () => {
  // A small max_input_bytes: files and messages over it are quick to send.
  daemon = await startRestDaemon({ max_input_bytes: 64 * 1024 });
});
after(async () => {
  await daemon?.dispose();
});

// A connected, initialized client: call(method, params) → the answer; notes() → what was pushed.
async function connect(id) {
  const ws = new WebSocket(codexUrl(daemon, id));
  const answers = new Map();
  const notes = [];
  let waiting = [];
  ws.on("message", (data) => {
    const m = JSON.parse(data.toString());
    if (m.id !== undefined && m.id !== null) answers.get(m.id)?.(m);
    else notes.push(m);
    for (const w of waiting) w();
  });
  const closed = once(ws, "close").then(([code, reason]) => ({ code, reason: reason.toString() }));
  await once(ws, "open");
  let next = 1;
  const client = {
    ws,
    closed,
    notes,
    call(method, params = {}) {
      const id = next++;
      return new Promise((resolve) => {
        answers.set(id, resolve);
        ws.send(JSON.stringify({ id, method, params }));
      });
    },
    // Waits for a pushed notification that matches.
    async until(match) {
      for (;;) {
        const found = notes.find(match);
        if (found) return found;
        await new Promise((r) => waiting.push(r));
        waiting = [];
      }
    },
  };
  const init = await client.call("initialize", { clientName: "codex-environment", resumeSessionId: null });
  assert.ok(init.result, JSON.stringify(init));
  ws.send(JSON.stringify({ method: "initialized", params: {} }));
  return client;
}

const output = (client, processId, stream) =>
  client.notes
    .filter((n) => n.method === "process/output" && n.params.processId === processId && (!stream || n.params.stream === stream))
    .map((n) => Buffer.from(n.params.chunk, "base64").toString())
    .join("");

test("a command on a terminal takes input and answers on the pty stream; interrupt stops one", async () => {
  const session = await createSession(daemon);
  const c = await connect(session.id);
  const cwd = `file://${session.workdir}`;
  const start = (processId, cmd, extra = {}) =>
    c.call("process/start", { processId, argv: ["/bin/bash", "-lc", cmd], cwd, env: { TERM: "dumb" }, tty: false, pipeStdin: false, arg0: null, sandbox: null, ...extra });
  assert.ok((await start("tty", "head -n1", { tty: true })).result);
  const w = await c.call("process/write", { processId: "tty", chunk: Buffer.from("typed\n").toString("base64"), writeId: "1" });
  assert.equal(w.result.status, "accepted");
  const exited = await c.until((n) => n.method === "process/exited" && n.params.processId === "tty");
  assert.equal(exited.params.exitCode, 0);
  await c.until((n) => n.method === "process/closed" && n.params.processId === "tty");
  assert.match(output(c, "tty", "pty"), /typed\r\ntyped\r\n/);
  assert.ok((await start("loop", "trap 'echo got-int; exit 7' INT; echo ready; while :; do sleep 0.1; done")).result);
  await c.until((n) => n.method === "process/output" && n.params.processId === "loop");
  assert.deepEqual((await c.call("process/signal", { processId: "loop", signal: "interrupt" })).result, {});
  const stopped = await c.until((n) => n.method === "process/exited" && n.params.processId === "loop");
  assert.equal(stopped.params.exitCode, 7);
  assert.match(output(c, "loop", "stdout"), /got-int/);
  c.ws.close();
  await rest(daemon, "POST", `/v1/sessions/${session.id}:close`, { body: {} });
});

test("a symlink out of the workspace is not followed, and files over the limit are refused", async () => {
  const session = await createSession(daemon);
  await execText(daemon, session.id, "ln -s / escape; echo inside > inside.txt");
  const c = await connect(session.id);
  const url = (p) => `file://${session.workdir}/${p}`;
  const read = await c.call("fs/readFile", { path: url("escape/etc/hostname"), sandbox: null });
  assert.ok(read.error, JSON.stringify(read));
  const write = await c.call("fs/writeFile", { path: url("escape/tmp/planted"), dataBase64: "eA==", sandbox: null });
  assert.ok(write.error, JSON.stringify(write));
  assert.equal(await execText(daemon, session.id, "test -e /tmp/planted && echo planted || echo absent"), "absent\n");
  const big = await c.call("fs/writeFile", { path: url("big.bin"), dataBase64: Buffer.alloc(65 * 1024).toString("base64"), sandbox: null });
  assert.match(big.error?.message ?? "", /65536 bytes/, JSON.stringify(big));
  const ok = await c.call("fs/readFile", { path: url("inside.txt"), sandbox: null });
  assert.equal(Buffer.from(ok.result.dataBase64, "base64").toString(), "inside\n");
  c.ws.close();
  await rest(daemon, "POST", `/v1/sessions/${session.id}:close`, { body: {} });
});

test("hostile frames close the connection with the RFC's code; the route stays up", async () => {
  const session = await createSession(daemon);
  const utf8 = await connect(session.id);
  utf8.ws._socket.write(Buffer.from([0x81, 0x82, 0, 0, 0, 0, 0xff, 0xfe])); // text, masked, not UTF-8
  assert.equal((await utf8.closed).code, 1007);
  const huge = await connect(session.id);
  huge.ws.send("x".repeat(200 * 1024)); // over the cap (a 64 KiB file in base64 and change)
  assert.equal((await huge.closed).code, 1009);
  const binary = await connect(session.id);
  binary.ws.send(Buffer.from([1, 2, 3]), { binary: true });
  assert.equal((await binary.closed).code, 1003);
  const fine = await connect(session.id);
  const bad = await fine.call("no/such", {});
  assert.equal(bad.error.code, -32601);
  fine.ws.close();
  await rest(daemon, "POST", `/v1/sessions/${session.id}:close`, { body: {} });
});

test("the session's end closes its connections (1001), and a new one to it is refused", async () => {
  const session = await createSession(daemon);
  const c = await connect(session.id);
  assert.ok(
    (await c.call("process/start", { processId: "sleeper", argv: ["sleep", "100"], cwd: `file://${session.workdir}`, env: {}, tty: false, pipeStdin: false, sandbox: null })).result,
  );
  await rest(daemon, "POST", `/v1/sessions/${session.id}:close`, { body: {} });
  const closed = await c.closed;
  assert.equal(closed.code, 1001);
  assert.match(closed.reason, /session ended/);
  // A new connection to the closed session is refused before the upgrade.
  const again = new WebSocket(codexUrl(daemon, session.id));
  const [, res] = await once(again, "unexpected-response");
  assert.equal(res.statusCode, 412);
});

test("the daemon stops cleanly with a connection open", async () => {
  const own = await startRestDaemon();
  try {
    const session = await rest(own, "POST", "/v1/sessions", { body: { sandbox: { idleTimeout: "600s" } } });
    const ws = new WebSocket(codexUrl(own, session.id));
    await once(ws, "open");
    const closed = once(ws, "close");
    await own.stop("SIGTERM");
    assert.equal(own.child.exitCode, 0, own.log());
    const [code] = await closed;
    assert.ok(code === 1001 || code === 1006, `closed with ${code}`);
  } finally {
    await own.dispose();
  }
});
