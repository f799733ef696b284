// The MCP server through the official MCP client (@modelcontextprotocol/sdk from npm) on
// stdio, against the real daemon: list the tools, run a command, write and read a file, run
// an analysis and read its artifacts, see errors (unknown arguments, a request over the
// limit) as tool errors, and see the sessions it made closed once the client disconnects or
// the server is stopped.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { repo, sampleCsv, sha256, startDaemon } from "../node/daemon.mjs";
import { connectMcp } from "./server.mjs";

const { Client } = await import(join(repo, "clients", "node", "dist", "index.js"));

const { artifactContent } = await import(join(repo, "clients", "mcp", "dist", "render.js"));

const TOKEN = "mcp-test-token";
const OTHER = "mcp-test-other-token";
let daemon;
let mcp;
let transport;

async function connect(token = TOKEN) {
  let client;
  ({ client, transport } = await connectMcp(daemon.addr, token));
  return client;
}

before(async () => {
  daemon = await startDaemon({
    tenants: [
      { name: "agents", token_sha256: sha256(TOKEN) },
      { name: "others", token_sha256: sha256(OTHER) },
    ],
  });
  mcp = await connect();
});
after(async () => {
  await mcp?.close();
  await daemon?.dispose();
});

const call = (name, args) => mcp.callTool({ name, arguments: args });

test("lists its tools, each with an input schema", async () => {
  const { tools } = await mcp.listTools();
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, [
    "close_session", "create_session", "delete_file", "exec", "expose_port", "list_files", "list_ports",
    "make_directory", "move_file", "read_artifact", "read_file", "restore_snapshot", "run_analysis",
    "session_usage", "snapshot_session", "stat_file", "unexpose_port", "write_file",
  ]);
  const exec = tools.find((t) => t.name === "exec");
  assert.deepEqual(exec.inputSchema.required.sort(), ["command", "session_id"]);
  assert.ok(tools.every((t) => t.description && t.inputSchema.type === "object"));
});

test("a session paused into a snapshot and restored into a new one", async () => {
  const made = await call("create_session", {});
  const id = made.structuredContent.session_id;
  assert.ok(!(await call("write_file", { session_id: id, path: "notes.md", content: "kept" })).isError);
  const paused = await call("snapshot_session", { session_id: id, close: true });
  assert.ok(!paused.isError, paused.content[0].text);
  const restored = await call("restore_snapshot", { snapshot_id: paused.structuredContent.snapshot_id });
  assert.ok(!restored.isError, restored.content[0].text);
  const again = restored.structuredContent.session_id;
  assert.notEqual(again, id);
  const read = await call("read_file", { session_id: again, path: "notes.md" });
  assert.equal(read.content[0].text, "kept");
  const missing = await call("restore_snapshot", { snapshot_id: "snap-00000000000000000000000000000000" });
  assert.ok(missing.isError);
  assert.match(missing.content[0].text, /NOT_FOUND/);
  await call("close_session", { session_id: again });
});

test("a session: run a command, write and read a file, list, close", async () => {
  const made = await call("create_session", {});
  assert.ok(!made.isError, made.content[0].text);
  const id = made.structuredContent.session_id;
  assert.match(id, /.+/);

  const ran = await call("exec", { session_id: id, command: "echo hi; echo oops >&2; exit 2" });
  assert.ok(!ran.isError);
  assert.equal(ran.structuredContent.exit_code, 2);
  assert.equal(ran.structuredContent.stdout, "hi\n");
  assert.equal(ran.structuredContent.stderr, "oops\n");
  assert.match(ran.content[0].text, /exited with 2/);

  const wrote = await call("write_file", { session_id: id, path: "notes/memo.txt", content: "ratios ✓\n" });
  assert.equal(wrote.structuredContent.sha256, sha256("ratios ✓\n"));
  const read = await call("read_file", { session_id: id, path: "notes/memo.txt" });
  assert.equal(read.structuredContent.content, "ratios ✓\n");
  assert.equal(read.structuredContent.encoding, "utf8");
  const binary = await call("write_file", { session_id: id, path: "b.bin", content: Buffer.from([0xff, 0, 1]).toString("base64"), encoding: "base64" });
  assert.equal(binary.structuredContent.size_bytes, 3);
  assert.equal((await call("read_file", { session_id: id, path: "b.bin" })).structuredContent.encoding, "base64");
  const seen = await call("exec", { session_id: id, command: "cat notes/memo.txt" });
  assert.equal(seen.structuredContent.stdout, "ratios ✓\n");

  const dir = await call("make_directory", { session_id: id, path: "a/b" });
  assert.equal(dir.structuredContent.type, "dir");
  const moved = await call("move_file", { session_id: id, from: "b.bin", to: "a/b/c.bin" });
  assert.equal(moved.structuredContent.path, "a/b/c.bin");
  assert.equal((await call("stat_file", { session_id: id, path: "a/b/c.bin" })).structuredContent.size_bytes, 3);
  const notEmpty = await call("delete_file", { session_id: id, path: "a" });
  assert.equal(notEmpty.isError, true);
  assert.match(notEmpty.content[0].text, /^FAILED_PRECONDITION: .*not empty/);
  assert.ok(!(await call("delete_file", { session_id: id, path: "a", recursive: true })).isError);
  const outside = await call("delete_file", { session_id: id, path: "../etc/passwd" });
  assert.equal(outside.isError, true);
  assert.match(outside.content[0].text, /^INVALID_ARGUMENT: /);

  const listed = await call("list_files", { session_id: id });
  assert.ok(listed.structuredContent.files.some((f) => f.path === "notes/memo.txt" && f.type === "file"));

  const closed = await call("close_session", { session_id: id });
  assert.equal(closed.structuredContent.status, "SESSION_STATUS_CLOSED");
});

test("errors are tool errors that name the problem", async () => {
  const missing = await call("exec", { session_id: "s-does-not-exist", command: "true" });
  assert.equal(missing.isError, true);
  assert.match(missing.content[0].text, /^NOT_FOUND: /);
  // Input that does not match the schema is refused before anything is done.
  const bad = await call("exec", { session_id: "x" }).catch((e) => ({ isError: true, content: [{ text: String(e.message) }] }));
  assert.equal(bad.isError, true);
  assert.match(bad.content[0].text, /command/);
  const badRun = await call("run_analysis", { input_name: "s.csv", input_content: "x", playbook: "nope" });
  assert.equal(badRun.isError, true);
  assert.match(badRun.content[0].text, /INVALID_ARGUMENT: .*nope/);
});

test("an unknown argument is refused by name, as the schema's additionalProperties says", async () => {
  const { tools } = await mcp.listTools();
  assert.ok(tools.every((t) => t.inputSchema.additionalProperties === false));
  const made = await call("create_session", { netwrok: "enabled" });
  assert.equal(made.isError, true, "nothing is created with an argument the server would ignore");
  assert.match(made.content[0].text, /Unrecognized key.*netwrok/);
  const ran = await call("exec", { session_id: "s-x", command: "true", cwd: ".", timeout: 5 });
  assert.equal(ran.isError, true);
  assert.match(ran.content[0].text, /Unrecognized key.*timeout/);
});

test("a request over 10 MiB is a tool error naming the limit, and the server goes on", async () => {
  const made = await call("create_session", {});
  const id = made.structuredContent.session_id;
  const big = "x".repeat(11 << 20);
  const refused = await mcp.callTool(
    { name: "write_file", arguments: { session_id: id, path: "big.txt", content: big } },
    undefined,
    { timeout: 30000 },
  );
  assert.equal(refused.isError, true);
  assert.match(refused.content[0].text, /write_file call is \d+ bytes; sandgate-mcp takes requests of at most 10485760 bytes \(10 MiB\)/);
  // The same connection and the session it made still work.
  const ran = await call("exec", { session_id: id, command: "ls big.txt 2>&1; echo alive" });
  assert.ok(!ran.isError, ran.content[0].text);
  assert.match(ran.structuredContent.stdout, /alive\n$/);
  assert.match(ran.structuredContent.stdout, /No such file/);
  await call("close_session", { session_id: id });
});

test("run_analysis returns the summary, the checks and the artifacts", async () => {
  const res = await call("run_analysis", {
    input_name: "statements.csv",
    input_content: readFileSync(sampleCsv, "utf8"),
  });
  assert.ok(!res.isError, res.content[0].text);
  const r = res.structuredContent;
  assert.equal(r.status, "RUN_STATUS_SUCCEEDED");
  assert.ok(r.checks.length > 0 && r.checks.every((c) => c.passed));
  assert.ok(r.artifacts.length > 0 && r.artifacts.every((a) => /^[0-9a-f]{64}$/.test(a.sha256)));
  assert.ok(r.summary.headline);
  assert.match(res.content[0].text, /succeeded/);
  // The figures and flags are in the text the model reads, not only in the structure.
  const text = res.content[0].text;
  assert.match(text, /^figures:$/m);
  assert.match(text, /^  revenue_growth: 13\.8%$/m);
  assert.match(text, /^flagged:/m);
  for (const m of r.summary.metrics) assert.ok(text.includes(`  ${m.label}: `), `${m.label} in ${text}`);
  for (const f of r.summary.flags) assert.ok(text.includes(`  ${f.what}`), `${f.what} in ${text}`);
  // Plain values: no protobuf artefacts ("_value") in the structured content.
  assert.doesNotMatch(JSON.stringify(r), /"_value"/);
  const growth = r.summary.metrics.find((m) => m.label === "revenue_growth");
  assert.equal(typeof growth.value, "number");
  assert.ok(r.summary.flags.every((f) => f.size === null || f.size.value === null || typeof f.size.value === "number"));

  // Its artifacts, read back: the memo as text, the SVG chart as text too.
  const memo = r.summary.files.find((f) => f.role === "memo");
  const read = await call("read_artifact", { run_id: r.run_id, name: memo.name });
  assert.ok(!read.isError, read.content[0].text);
  const listed = r.artifacts.find((a) => a.name === memo.name);
  assert.equal(read.structuredContent.sha256, listed.sha256);
  assert.equal(read.structuredContent.truncated, false);
  assert.equal(sha256(read.content[0].text), listed.sha256, "the whole memo, as written");
  const missing = await call("read_artifact", { run_id: r.run_id, name: "nope.md" });
  assert.equal(missing.isError, true);
  assert.match(missing.content[0].text, new RegExp(`no artifact named "nope.md"; its artifacts: .*${memo.name}`));
  // Another tenant's run is not there for it (the daemon decides).
  const stranger = await connect(OTHER);
  const theirs = await stranger.callTool({ name: "read_artifact", arguments: { run_id: r.run_id, name: memo.name } });
  assert.equal(theirs.isError, true);
  assert.match(theirs.content[0].text, /^NOT_FOUND: /);
  await stranger.close();
});

test("read_artifact: text cut at its limit, small images as images, anything else refused", () => {
  const about = (data) => ({ name: "x", sizeBytes: data.length, sha256: sha256(data) });
  const limits = { maxText: 9, maxImage: 64 };
  const text = Buffer.from("héllo wörld, and more");
  const cut = artifactContent("r-1", about(text), text, limits);
  assert.ok(!cut.isError);
  assert.equal(cut.structuredContent.truncated, true);
  assert.equal(cut.structuredContent.content, "héllo w", "cut before the character the limit splits");
  assert.match(cut.content[0].text, /\[cut: the artifact has 23 bytes; the first 8 are shown\]/);
  const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(20)]);
  const image = artifactContent("r-1", about(png), png, limits);
  assert.ok(!image.isError);
  assert.deepEqual(image.content[1], { type: "image", data: png.toString("base64"), mimeType: "image/png" });
  const large = Buffer.concat([png, Buffer.alloc(100)]);
  const refused = artifactContent("r-1", about(large), large.subarray(0, 64), limits);
  assert.equal(refused.isError, true);
  assert.match(refused.content[0].text, /image\/png image of 128 bytes, over the 64 bytes .*sandgate download r-1/);
  const binary = Buffer.from([0, 1, 2, 0xff, 0xfe]);
  const other = artifactContent("r-1", about(binary), binary, limits);
  assert.equal(other.isError, true);
  assert.match(other.content[0].text, /neither UTF-8 text nor a PNG, JPEG, GIF or WebP image; download it with: sandgate download r-1/);
});

test("SIGTERM closes the sessions the server made", async () => {
  const own = await connect();
  const ownTransport = transport;
  const made = await own.callTool({ name: "create_session", arguments: {} });
  const id = made.structuredContent.session_id;
  const exited = new Promise((r) => ownTransport._process.once("exit", (code, signal) => r({ code, signal })));
  process.kill(ownTransport.pid, "SIGTERM");
  assert.deepEqual(await exited, { code: 0, signal: null }, "it closed its sessions and exited");
  const sandgate = new Client({ addr: daemon.addr, token: TOKEN });
  const record = (await sandgate.listSessions(true)).find((s) => s.id === id);
  assert.equal(record.status, "SESSION_STATUS_CLOSED");
  assert.match(record.statusReason, /stopped \(SIGTERM\)/);
  sandgate.close();
  await own.close();
});

test("a broken stdout (the client went away) closes the sessions the server made", async () => {
  const own = await connect();
  const ownTransport = transport;
  const made = await own.callTool({ name: "create_session", arguments: {} });
  const id = made.structuredContent.session_id;
  const child = ownTransport._process;
  const exited = new Promise((r) => child.once("exit", (code, signal) => r({ code, signal })));
  // Nobody reads its answers any more: the next one it writes fails (EPIPE).
  child.stdout.destroy();
  await ownTransport.send({ jsonrpc: "2.0", id: 999, method: "tools/list" });
  assert.deepEqual(await exited, { code: 0, signal: null }, "it closed its sessions and exited");
  const sandgate = new Client({ addr: daemon.addr, token: TOKEN });
  const record = (await sandgate.listSessions(true)).find((s) => s.id === id);
  assert.equal(record.status, "SESSION_STATUS_CLOSED");
  assert.match(record.statusReason, /MCP client disconnected/);
  sandgate.close();
  await own.close().catch(() => {});
});

test("the sessions it made are closed when the client disconnects", async () => {
  const made = await call("create_session", {});
  const id = made.structuredContent.session_id;
  await mcp.close();
  mcp = null;
  const sandgate = new Client({ addr: daemon.addr, token: TOKEN });
  let record;
  for (let i = 0; i < 100; ++i) {
    record = (await sandgate.listSessions(true)).find((s) => s.id === id);
    if (record.status !== "SESSION_STATUS_ACTIVE") break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(record.status, "SESSION_STATUS_CLOSED");
  assert.match(record.statusReason, /MCP client disconnected/);
  sandgate.close();
});
