// The MCP server's port and usage tools (expose_port, unexpose_port, list_ports,
// session_usage) through the official MCP client, against the real daemon with its REST port:
// a background http.server exposed and fetched through the URL the tool gave, listed, closed;
// the usage of a session; and hostile input (ports out of range, ids with traversal, NUL,
// control characters or megabytes, another tenant's session) refused with a tool error naming
// the problem.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { sha256, startDaemon } from "../node/daemon.mjs";
import { connectMcp } from "./server.mjs";

const TOKEN = "mcp-ports-token";
const OTHER = "mcp-ports-other";
let daemon;
let mcp;
let stranger;

const connect = async (token) => (await connectMcp(daemon.addr, token)).client;

before(async () => {
  daemon = await startDaemon({
    http_listen: "127.0.0.1:0",
    allow_plaintext_tokens: true,
    tenants: [
      { name: "agents", token_sha256: sha256(TOKEN) },
      { name: "others", token_sha256: sha256(OTHER) },
    ],
    local: { uid_base: 330400, uid_count: 16 },
  });
  mcp = await connect(TOKEN);
  stranger = await connect(OTHER);
});
after(async () => {
  await mcp?.close();
  await stranger?.close();
  await daemon?.dispose();
});

// A tool call; the SDK's own refusal of input that does not match the schema as a tool error.
const call = (client, name, args) =>
  client
    .callTool({ name, arguments: args })
    .catch((e) => ({ isError: true, content: [{ text: String(e.message) }] }));

async function refused(client, name, args, words) {
  const r = await call(client, name, args);
  assert.equal(r.isError, true, `${name} ${JSON.stringify(args).slice(0, 200)} was not refused`);
  assert.match(r.content[0].text, words);
}

test("a port is exposed, reached through its URL, listed and closed", { timeout: 120_000 }, async () => {
  const id = (await call(mcp, "create_session", {})).structuredContent.session_id;
  try {
    await call(mcp, "write_file", { session_id: id, path: "hello.txt", content: "from the sandbox\n" });
    // In a session of its own, so the exec's end does not end it; exec returns once it listens.
    const serve =
      "setsid python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & " +
      "for i in $(seq 100); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8000))' " +
      "2>/dev/null && break; sleep 0.1; done";
    await call(mcp, "exec", { session_id: id, command: serve });
    const exposed = await call(mcp, "expose_port", { session_id: id, port: 8000, signed: true, ttl_seconds: 600 });
    assert.ok(!exposed.isError, exposed.content[0].text);
    const { url, signed_url: signedUrl } = exposed.structuredContent;
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/v1\/sessions\/.+\/ports\/8000\/$/);
    assert.equal(exposed.content[0].text, `port 8000 of session ${id}: ${signedUrl}`);
    let answer;
    for (let i = 0; i < 300; ++i) {
      answer = await fetch(signedUrl + "hello.txt");
      if (answer.status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(await answer.text(), "from the sandbox\n");
    assert.equal((await fetch(url + "hello.txt")).status, 401, "the plain URL needs the token");

    const listed = await call(mcp, "list_ports", { session_id: id });
    assert.deepEqual(listed.structuredContent.ports.map((p) => p.port), [8000]);
    assert.match(listed.content[0].text, /^8000\t\d+\thttp:/);
    const closed = await call(mcp, "unexpose_port", { session_id: id, port: 8000 });
    assert.ok(!closed.isError, closed.content[0].text);
    assert.equal((await fetch(signedUrl + "hello.txt")).status, 404);
    assert.equal((await call(mcp, "list_ports", { session_id: id })).content[0].text, "(no exposed ports)");
    await refused(mcp, "unexpose_port", { session_id: id, port: 8000 }, /^NOT_FOUND: .*8000/);
  } finally {
    await call(mcp, "close_session", { session_id: id });
  }
});

test("session_usage says what the session uses", async () => {
  const id = (await call(mcp, "create_session", { memory_mib: 128 })).structuredContent.session_id;
  try {
    await call(mcp, "exec", { session_id: id, command: "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done" });
    const r = await call(mcp, "session_usage", { session_id: id });
    assert.ok(!r.isError, r.content[0].text);
    const u = r.structuredContent;
    assert.equal(u.session_id, id);
    assert.match(r.content[0].text, new RegExp(`^session ${id}: memory [0-9.]+ MiB`));
    // Measured, or named as not measured: never a silent 0.
    if (!u.unmeasured.some((w) => w.startsWith("memory"))) {
      assert.ok(u.memory_bytes > 0, JSON.stringify(u));
      assert.equal(u.memory_limit_bytes, 128 << 20);
    }
    if (!u.unmeasured.some((w) => w.startsWith("cpu"))) assert.ok(u.cpu_seconds > 0, JSON.stringify(u));
  } finally {
    await call(mcp, "close_session", { session_id: id });
  }
});

test("hostile input is refused, naming the problem", async () => {
  const id = (await call(mcp, "create_session", {})).structuredContent.session_id;
  try {
    for (const port of [0, 65536, -1, 80.5, "8000", 1e300]) {
      await refused(mcp, "expose_port", { session_id: id, port }, /port/);
      await refused(mcp, "unexpose_port", { session_id: id, port }, /port/);
    }
    await refused(mcp, "expose_port", { session_id: id, port: 8000, ttl_seconds: 60 }, /ttl_seconds: only with signed/);
    await refused(mcp, "expose_port", { session_id: id, port: 8000, signed: true, ttl_seconds: 0 }, /ttl_seconds/);
    await refused(mcp, "list_ports", { session_id: id, port: 1 }, /Unrecognized key.*port/);
    for (const tool of ["list_ports", "session_usage"]) {
      await refused(mcp, tool, {}, /session_id/);
      for (const bad of ["../../etc", `${id}/../x`, "s\u0000x", "s\u001b[2Jx", "s\ud800x", "x".repeat(1 << 20)]) {
        await refused(mcp, tool, { session_id: bad }, /^(NOT_FOUND|INVALID_ARGUMENT): /);
      }
    }
    // Another tenant's session is not there for it; nothing says it exists.
    for (const [tool, extra] of [["list_ports", {}], ["session_usage", {}], ["expose_port", { port: 8000 }], ["unexpose_port", { port: 8000 }]]) {
      await refused(stranger, tool, { session_id: id, ...extra }, new RegExp(`^NOT_FOUND: .*${id}`));
    }
    await refused(mcp, "session_usage", { session_id: "s0123456789abcdef" }, /^NOT_FOUND: .*s0123456789abcdef/);
  } finally {
    await call(mcp, "close_session", { session_id: id });
  }
});
