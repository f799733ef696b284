// The MCP server through the official MCP client (@modelcontextprotocol/sdk from npm) on
// stdio, against the real daemon: list the tools, run a command, write and read a file, run
// an analysis, see errors as tool errors, and see the sessions it made closed once the client
// disconnects.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { repo, sampleCsv, sha256, startDaemon } from "../node/daemon.mjs";

// The official SDK and our TypeScript client, as the MCP package installed them.
const mcpPackage = createRequire(join(repo, "clients", "mcp", "package.json"));
const { Client: McpClient } = await import(mcpPackage.resolve("@modelcontextprotocol/sdk/client/index.js"));
const { StdioClientTransport } = await import(mcpPackage.resolve("@modelcontextprotocol/sdk/client/stdio.js"));
const { Client } = await import(join(repo, "clients", "node", "dist", "index.js"));

const TOKEN = "mcp-test-token";
let daemon;
let mcp;
let transport;

async function connect() {
  transport = new StdioClientTransport({
    command: process.execPath,
    args: [join(repo, "clients", "mcp", "dist", "server.js")],
    env: { PATH: process.env.PATH, SANDGATE_ADDR: daemon.addr, SANDGATE_TOKEN: TOKEN },
    stderr: "pipe",
  });
  const client = new McpClient({ name: "sandgate-test", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

before(async () => {
  daemon = await startDaemon({ tenants: [{ name: "agents", token_sha256: sha256(TOKEN) }] });
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
  assert.deepEqual(names, ["close_session", "create_session", "exec", "list_files", "read_file", "run_analysis", "write_file"]);
  const exec = tools.find((t) => t.name === "exec");
  assert.deepEqual(exec.inputSchema.required.sort(), ["command", "session_id"]);
  assert.ok(tools.every((t) => t.description && t.inputSchema.type === "object"));
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
