// SandgateSandboxClient driven by the real OpenAI Agents SDK (the published package, from
// npm) and its ScriptedModel: no API key, no network; against the real daemon.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { pathToFileURL } from "node:url";

import { repo, sampleCsv, sha256, startDaemon } from "../node/daemon.mjs";
import { startPostgres } from "./postgres.mjs";

const agentsDir = join(repo, "clients", "agents");
// The SDK as ESM, from the package's own node_modules (where its client imports it).
const sdk = (file) => import(pathToFileURL(join(agentsDir, "node_modules", "@openai", file)).href);
const { Runner, RunState, tool } = await sdk("agents/dist/index.mjs");
const { z } = await import(pathToFileURL(join(agentsDir, "node_modules", "zod", "index.js")).href);
const { SandboxAgent, Manifest, Capabilities, SandboxProviderError, SandboxUnsupportedFeatureError } = await sdk(
  "agents/dist/sandbox/index.mjs",
);
const { ScriptedModel, functionCall, assistantMessage } = await sdk("agents/dist/testing/index.mjs");
const { SandgateSandboxClient } = await import(join(agentsDir, "dist", "index.js"));

let daemon;
let client;
before(async () => {
  daemon = await startDaemon();
  client = new SandgateSandboxClient({ addr: daemon.addr });
});
after(async () => {
  client?.close();
  await daemon?.dispose();
});

// The text every tool call of a run gave the model, by call id.
function toolOutputs(result) {
  const outputs = {};
  for (const item of result.newItems) {
    if (item.type === "tool_call_output_item") outputs[item.rawItem.callId] = item.output;
  }
  return outputs;
}

const runner = () => new Runner({ tracingDisabled: true });

// A tool the run must be approved for: the run pauses at its call.
function approvalTool(name) {
  return tool({
    name,
    description: name,
    parameters: z.object({}),
    needsApproval: async () => true,
    execute: async () => "ok",
  });
}

// The session ids a client's resume() reattaches (the SDK could instead reuse a live session
// of this process).
function recordResumes(sandboxClient) {
  const resumed = [];
  const resume = sandboxClient.resume.bind(sandboxClient);
  sandboxClient.resume = async (state, options) => {
    resumed.push(state.sessionId);
    return resume(state, options);
  };
  return resumed;
}

test("an agent with the default capabilities writes a file, runs it and reads its output; its session is gone afterwards", async () => {
  const model = new ScriptedModel([
    [
      {
        type: "apply_patch_call",
        callId: "patch",
        status: "completed",
        operation: {
          type: "create_file",
          path: "hello.py",
          diff: "+print(sum(range(10)))\n+open('out.txt', 'w').write('written')\n",
        },
      },
    ],
    [functionCall("exec_command", { cmd: "python3 hello.py && cat out.txt" }, { callId: "run" })],
    [functionCall("exec_command", { cmd: "exit 3" }, { callId: "fail" })],
    [assistantMessage("done")],
  ]);
  const agent = new SandboxAgent({
    name: "coder",
    instructions: "Write and run code.",
    model,
    capabilities: Capabilities.default(),
  });
  const before = new Set((await client.client.listSessions()).map((s) => s.id));
  const result = await runner().run(agent, "print the sum", { sandbox: { client } });
  assert.equal(result.finalOutput, "done");
  // The model is told where the workspace is: the session's, not the SDK's default.
  assert.match(JSON.stringify(model.calls[0].request.systemInstructions), /filesystem layout is:\\n\\n\/work/);
  const out = toolOutputs(result);
  assert.match(String(out.run), /Process exited with code 0/);
  assert.match(String(out.run), /45\nwritten/);
  assert.match(String(out.fail), /Process exited with code 3/);
  const mine = (await client.client.listSessions(true)).filter((s) => !before.has(s.id));
  assert.equal(mine.length, 1);
  assert.equal(mine[0].status, "SESSION_STATUS_CLOSED");
});

test("a command still running at its yield is a process the model talks to with write_stdin", async () => {
  const model = new ScriptedModel([
    [functionCall("exec_command", { cmd: "python3 -i -q", tty: true, yield_time_ms: 300 }, { callId: "start" })],
    [functionCall("write_stdin", { session_id: 1, chars: "print(6*7)\n", yield_time_ms: 1500 }, { callId: "write" })],
    [functionCall("write_stdin", { session_id: 1, chars: "exit(4)\n", yield_time_ms: 5000 }, { callId: "exit" })],
    [functionCall("write_stdin", { session_id: 1, chars: "" }, { callId: "gone" })],
    [assistantMessage("done")],
  ]);
  const agent = new SandboxAgent({ name: "repl", instructions: "Use python.", model });
  const out = toolOutputs(await runner().run(agent, "6*7", { sandbox: { client } }));
  assert.match(String(out.start), /Process running with session ID 1/);
  assert.match(String(out.write), /42/);
  assert.match(String(out.exit), /Process exited with code 4/);
  assert.match(String(out.gone), /session not found: 1/);
});

test("a command that runs past its time limit is output for the model, not an error", async () => {
  const model = new ScriptedModel([
    [functionCall("exec_command", { cmd: "echo before; sleep 30" }, { callId: "slow" })],
    [assistantMessage("done")],
  ]);
  const agent = new SandboxAgent({ name: "slow", instructions: "", model });
  const out = toolOutputs(
    await runner().run(agent, "wait", { sandbox: { client, options: { commandTimeoutSeconds: 1 } } }),
  );
  assert.match(String(out.slow), /before/);
  assert.match(String(out.slow), /killed at its time limit/);
  assert.match(String(out.slow), /Process exited with code \d+/);
});

test("the network policy holds inside: curl to a host that is not allowed fails", async () => {
  const model = new ScriptedModel([
    [
      functionCall(
        "exec_command",
        { cmd: "curl -sS -m 10 https://example.com/ >/dev/null; echo curl=$?" },
        { callId: "curl" },
      ),
    ],
    [assistantMessage("done")],
  ]);
  const agent = new SandboxAgent({ name: "net", instructions: "", model });
  const options = { network: "restricted", allowedDomains: ["allowed.example.org"] };
  const out = toolOutputs(await runner().run(agent, "fetch", { sandbox: { client, options } }));
  // The daemon's proxy refuses the tunnel: the policy, not a missing network, stops it.
  assert.match(String(out.curl), /CONNECT tunnel failed, response 403/);
  assert.match(String(out.curl), /curl=56/);
});

test("a paused run keeps its session, and a new client resumes it by id after approval", async () => {
  const deploy = approvalTool("deploy");
  const script = [
    [functionCall("exec_command", { cmd: "echo kept > state.txt" }, { callId: "write" })],
    [functionCall("deploy", {}, { callId: "deploy" })],
    [functionCall("exec_command", { cmd: "cat state.txt; echo $API_SECRET" }, { callId: "read" })],
    [assistantMessage("done")],
  ];
  const model = new ScriptedModel(script);
  const agent = new SandboxAgent({ name: "pauser", instructions: "", model, tools: [deploy] });
  const options = { idleTimeoutSeconds: 3, env: { API_SECRET: "do-not-save-me" } };
  const first = await runner().run(agent, "go", { sandbox: { client, options } });
  assert.equal(first.interruptions.length, 1);
  const saved = first.state.toString();
  assert.doesNotMatch(saved, /do-not-save-me/, "the saved run state holds no environment");
  const active = (await client.client.listSessions()).filter((s) => s.sandbox?.idleTimeout?.seconds === 3);
  assert.equal(active.length, 1, "the paused run's session is kept");
  // Longer than the idle timeout: the client that holds the session keeps it alive.
  await new Promise((r) => setTimeout(r, 4500));

  const second = new SandgateSandboxClient({ addr: daemon.addr });
  try {
    const state = await RunState.fromString(agent, saved);
    state.approve(state.getInterruptions()[0]);
    const resumed = recordResumes(second);
    const result = await runner().run(agent, state, { sandbox: { client: second } });
    assert.deepEqual(resumed, [active[0].id], "the new client reattached the session");
    assert.equal(result.finalOutput, "done");
    assert.match(String(toolOutputs(result).read), /kept\ndo-not-save-me/);
  } finally {
    second.close();
  }
  const after = await client.client.listSessions(true);
  assert.equal(after.find((s) => s.id === active[0].id).status, "SESSION_STATUS_CLOSED");
});

test("what a sandgate session cannot honour is refused before a session is made", async () => {
  const { gitRepo, s3Mount } = await sdk("agents/dist/sandbox/index.mjs");
  const count = async () => (await client.client.listSessions(true)).length;
  const before = await count();
  const refused = [
    { manifest: new Manifest({ entries: { repo: gitRepo({ repo: "openai/openai-agents-js" }) } }) },
    { manifest: new Manifest({ root: "/elsewhere" }) },
    { manifest: new Manifest({ users: [{ name: "alice" }] }) },
    { manifest: new Manifest({ entries: { data: s3Mount({ bucket: "b" }) } }) },
    { options: { allowedDomains: ["example.com"] } },
  ];
  for (const args of refused) {
    await assert.rejects(client.create(args), SandboxUnsupportedFeatureError, JSON.stringify(args.options ?? {}));
  }
  assert.equal(await count(), before);
});

test("an image is the daemon's: one it does not have fails create, naming it, and leaves no session", async () => {
  const count = async () => (await client.client.listSessions(true)).length;
  const before = await count();
  await assert.rejects(client.create({ manifest: new Manifest(), options: { image: "no-such-image" } }),
    /sandbox\.image: .*no-such-image/);
  await assert.rejects(client.create({ manifest: new Manifest(), options: { image: "python:3.12" } }),
    /sandbox\.image/);
  assert.equal(await count(), before);
});

test("manifest entries are uploaded, and the file calls work on them: read, list, exists, image, edits", async () => {
  const { file, dir, localFile, localDir } = await sdk("agents/dist/sandbox/index.mjs");
  const local = mkdtempSync(join(tmpdir(), "sg-agents-"));
  mkdirSync(join(local, "tree", "sub"), { recursive: true });
  writeFileSync(join(local, "tree", "sub", "deep.txt"), "deep");
  writeFileSync(join(local, "one.csv"), "a,b\n1,2\n");
  // A 1x1 PNG.
  const png = Buffer.from(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000" +
      "1f15c4890000000d49444154789c6300010000050001" +
      "0d0a2db40000000049454e44ae426082",
    "hex",
  );
  const manifest = new Manifest({
    entries: {
      "notes.md": file({ content: "# notes\nline two\n" }),
      "pixel.png": file({ content: png }),
      empty: dir(),
      data: dir({ children: { "inner.txt": file({ content: "inner" }) } }),
      "input.csv": localFile({ src: join(local, "one.csv") }),
      tree: localDir({ src: join(local, "tree") }),
    },
  });
  const session = await client.create({ manifest, options: { env: { GREETING: "hi" } } });
  let closes = 0;
  const unary = client.client.unary.bind(client.client);
  client.client.unary = (method, request) => {
    if (method === "CloseSession") closes += 1;
    return unary(method, request);
  };
  try {
    const root = session.state.manifest.root;
    assert.equal(Buffer.from(await session.readFile({ path: "notes.md" })).toString(), "# notes\nline two\n");
    assert.equal(Buffer.from(await session.readFile({ path: `${root}/data/inner.txt` })).toString(), "inner");
    assert.equal(Buffer.from(await session.readFile({ path: "tree/sub/deep.txt" })).toString(), "deep");
    assert.equal(Buffer.from(await session.readFile({ path: "input.csv" })).toString(), "a,b\n1,2\n");
    // Outside the workspace: read through the sandbox.
    assert.equal((await session.exec({ cmd: "printf outside > /tmp/o.txt" })).exitCode, 0);
    assert.equal(Buffer.from(await session.readFile({ path: "/tmp/o.txt" })).toString(), "outside");
    const names = (await session.listDir({ path: "." })).map((e) => `${e.type}:${e.name}`);
    assert.deepEqual(names, ["dir:data", "dir:empty", "file:input.csv", "file:notes.md", "file:pixel.png", "dir:tree"]);
    assert.equal(await session.pathExists("notes.md"), true);
    assert.equal(await session.pathExists("missing.md"), false);
    assert.equal(await session.directoryExists("empty"), true);
    assert.equal(await session.directoryExists("notes.md"), false);
    const image = await session.viewImage({ path: "pixel.png" });
    assert.match(JSON.stringify(image), /image\/png/);
    await assert.rejects(
      session.readFile({ path: "missing.md" }),
      (e) => e.code === "workspace_read_not_found" && /missing\.md/.test(e.message),
    );
    // The SDK's truncation: the head and the tail, the line count, the original size.
    const long = await session.execCommand({ cmd: "seq 1 20000", maxOutputTokens: 40 });
    assert.match(long, /Original token count: \d+/);
    assert.match(long, /Total output lines: 20001/);
    assert.match(long, /tokens truncated/);
    assert.match(long, /^1\n2\n/m);
    assert.match(long, /\n20000\n?$/);
    // A workdir that is not a directory: the command fails, as output.
    const refused = await session.exec({ cmd: "true", workdir: "notes.md" });
    assert.notEqual(refused.exitCode, 0);
    assert.match(refused.output, /notes\.md/);

    const editor = session.createEditor();
    await editor.createFile({ type: "create_file", path: "src/app.py", diff: "+print('one')\n" });
    await editor.updateFile({
      type: "update_file",
      path: "src/app.py",
      moveTo: "src/main.py",
      diff: "@@\n-print('one')\n+print('two')\n",
    });
    assert.equal(await session.pathExists("src/app.py"), false);
    const run = await session.exec({ cmd: "python3 src/main.py; echo $GREETING", yieldTimeMs: 10000 });
    assert.equal(run.exitCode, 0);
    assert.equal(run.stdout, "two\nhi\n");
    await editor.deleteFile({ type: "delete_file", path: "src/main.py" });
    assert.equal(await session.pathExists("src/main.py"), false);
    await assert.rejects(
      editor.createFile({ type: "create_file", path: "/tmp/outside.txt", diff: "+x\n" }),
      /outside the sandgate workspace/,
    );
    await assert.rejects(
      editor.createFile({ type: "create_file", path: "../escape.txt", diff: "+x\n" }),
      /outside the sandgate workspace/,
    );
    await assert.rejects(
      editor.createFile({ type: "create_file", path: "src/../../escape.txt", diff: "+x\n" }),
      /outside the sandgate workspace/,
    );
    assert.equal(await session.pathExists("/escape.txt"), false);
  } finally {
    await Promise.all([session.close(), session.shutdown()]);
    await session.delete();
    client.client.unary = unary;
    rmSync(local, { recursive: true, force: true });
  }
  const record = await client.client
    .listSessions(true)
    .then((all) => all.find((s) => s.id === session.state.sessionId));
  assert.equal(record.status, "SESSION_STATUS_CLOSED");
  assert.match(record.statusReason, /closed by the Agents SDK/);
  // A session that ended is the SDK's error, not the model's output.
  await assert.rejects(session.exec({ cmd: "true" }), /has ended|not found|closed/);
  assert.equal(closes, 1, "close, delete: one CloseSession");
});

test("a setup command that fails fails create and closes its session", async () => {
  const before = (await client.client.listSessions()).length;
  await assert.rejects(
    client.create({ options: { setupCommands: ["true", "echo nope >&2; exit 2"] } }),
    /exit 2\): nope/,
  );
  assert.equal((await client.client.listSessions()).length, before);
});

// A Chat Completions endpoint that answers every turn with "done" and no tool call: a
// run of the `chat` agent in a session then only collects and verifies what is there.
async function startDoneChat() {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      const chunk = (delta, finish) =>
        `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "fake", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.end(chunk({ role: "assistant", content: "done" }, null) + chunk({}, "stop") + "data: [DONE]\n\n");
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}/v1`, close: () => new Promise((r) => server.close(r)) };
}

test("the financial analyst, done by a scripted SandboxAgent on sandgate, passes the daemon's checks", async () => {
  const chat = await startDoneChat();
  process.env.SG_AGENTS_TEST_CHAT_KEY = "unused";
  const checked = await startDaemon({
    chat: { base_url: chat.url, api_key_env: "SG_AGENTS_TEST_CHAT_KEY", model: "fake" },
  });
  const analyst = new SandgateSandboxClient({ addr: checked.addr });
  try {
    const { localFile } = await sdk("agents/dist/sandbox/index.mjs");
    const program = readFileSync(
      join(repo, "daemon", "playbooks", "financial_analyst", "reference", "analyze_financials.py"),
      "utf8",
    );
    const diff = program
      .split("\n")
      .slice(0, -1)
      .map((line) => `+${line}\n`)
      .join("");
    const model = new ScriptedModel([
      [
        {
          type: "apply_patch_call",
          callId: "write",
          status: "completed",
          operation: { type: "create_file", path: "analyze_financials.py", diff },
        },
      ],
      [functionCall("exec_command", { cmd: "python3 analyze_financials.py northstar.csv" }, { callId: "analyze" })],
      [functionCall("exec_command", { cmd: "head -c 400 investment_analysis.md" }, { callId: "memo" })],
      [assistantMessage("The memo is in investment_analysis.md.")],
    ]);
    const agent = new SandboxAgent({
      name: "financial analyst",
      instructions: "Analyse the statements in northstar.csv.",
      model,
    });
    // A session of our own (the run does not close it), to verify afterwards.
    const manifest = new Manifest({ entries: { "northstar.csv": localFile({ src: sampleCsv }) } });
    const session = await analyst.create({ manifest });
    try {
      const result = await runner().run(agent, "analyse", { sandbox: { session } });
      const out = toolOutputs(result);
      assert.match(String(out.analyze), /Process exited with code 0/);
      assert.match(String(out.memo), /Northstar/i);
      // The daemon's checks of the playbook, on what the agent left in the session.
      const run = await analyst.client.runAnalysis([{ name: "northstar.csv", content: readFileSync(sampleCsv) }], {
        agent: "chat",
        sessionId: session.state.sessionId,
      });
      const record = await run.wait();
      const failed = record.checks.filter((c) => !c.passed).map((c) => `${c.name}: ${c.detail}`);
      assert.deepEqual(failed, []);
      assert.ok(record.checks.length > 5, `checks ran: ${record.checks.length}`);
      assert.equal(record.status, "RUN_STATUS_SUCCEEDED", record.error?.message);
    } finally {
      await session.close();
    }
  } finally {
    analyst.close();
    await checked.dispose();
    await chat.close();
  }
});

test("a run paused on one replica is resumed through another: the session is reattached by id, its calls forwarded", async () => {
  const postgres = await startPostgres();
  const replicas = [];
  const clients = [];
  try {
    for (const [id, uidBase] of [
      ["replica-a", 330200],
      ["replica-b", 330300],
    ]) {
      replicas.push(
        await startDaemon({
          store: { type: "postgres", dsn: postgres.dsn },
          replica: { id, advertise_address: "self", lease_seconds: 4, renew_seconds: 1 },
          local: { uid_base: uidBase, uid_count: 16 },
        }),
      );
    }
    const [onA, onB] = replicas.map((d) => new SandgateSandboxClient({ addr: d.addr }));
    clients.push(onA, onB);
    const approve = approvalTool("approve");
    const model = new ScriptedModel([
      [functionCall("exec_command", { cmd: "echo from-a > a.txt" }, { callId: "write" })],
      [functionCall("approve", {}, { callId: "ask" })],
      [functionCall("exec_command", { cmd: "cat a.txt; echo more >> a.txt; cat a.txt" }, { callId: "read" })],
      [assistantMessage("done")],
    ]);
    const agent = new SandboxAgent({ name: "travels", instructions: "", model, tools: [approve] });
    const first = await runner().run(agent, "go", { sandbox: { client: onA } });
    assert.equal(first.interruptions.length, 1);
    const [live] = await onB.client.listSessions();
    assert.equal(live.replica, "replica-a");

    const state = await RunState.fromString(agent, first.state.toString());
    state.approve(state.getInterruptions()[0]);
    const resumed = recordResumes(onB);
    const result = await runner().run(agent, state, { sandbox: { client: onB } });
    assert.deepEqual(resumed, [live.id], "replica b's client reattached the session");
    assert.equal(result.finalOutput, "done");
    assert.match(String(toolOutputs(result).read), /from-a\nfrom-a\nmore/);
    const after = (await onB.client.listSessions(true)).find((s) => s.id === live.id);
    assert.equal(after.status, "SESSION_STATUS_CLOSED");
  } finally {
    clients.forEach((c) => c.close());
    for (const d of replicas) await d.dispose();
    await postgres.dispose();
  }
});

test("an agent is paused on one replica and resumed on another from its snapshot; its sessions are gone afterwards", async () => {
  const postgres = await startPostgres();
  const replicas = [];
  const clients = [];
  try {
    for (const [id, uidBase] of [
      ["replica-a", 330600],
      ["replica-b", 330700],
    ]) {
      replicas.push(
        await startDaemon({
          store: { type: "postgres", dsn: postgres.dsn },
          replica: { id, advertise_address: "self", lease_seconds: 4, renew_seconds: 1 },
          local: { uid_base: uidBase, uid_count: 16 },
        }),
      );
    }
    const [onA, onB] = replicas.map((d) => new SandgateSandboxClient({ addr: d.addr }));
    clients.push(onA, onB);
    const approve = approvalTool("approve");
    const model = new ScriptedModel([
      [functionCall("exec_command", { cmd: "mkdir -p notes && echo from-a > notes/a.txt && chmod 0600 notes/a.txt" }, { callId: "write" })],
      [functionCall("approve", {}, { callId: "ask" })],
      [functionCall("exec_command", { cmd: "cat notes/a.txt; stat -c %a notes/a.txt; hostname" }, { callId: "read" })],
      [assistantMessage("done")],
    ]);
    const agent = new SandboxAgent({ name: "travels", instructions: "", model, tools: [approve] });
    const first = await runner().run(agent, "go", { sandbox: { client: onA } });
    assert.equal(first.interruptions.length, 1);

    // Paused: its workspace persisted (a snapshot in the shared store), its session on A closed.
    const [live] = await onA.client.listSessions();
    assert.equal(live.replica, "replica-a");
    const onAHandle = await onA.resume({ manifest: new Manifest(), environment: {}, sessionId: live.id, workdir: live.workdir });
    const saved = await onAHandle.persistWorkspace();
    assert.ok(saved.length <= 4096, "persistWorkspace returns a reference, not the workspace");
    await onAHandle.close();
    await replicas.shift().dispose(); // replica A is gone

    // On B, the bytes hydrate a new session with the workspace.
    const fresh = await onB.create(new Manifest(), { isolation: "namespaces" });
    const empty = fresh.state.sessionId;
    await fresh.hydrateWorkspace(saved);
    assert.notEqual(fresh.state.sessionId, empty);
    assert.equal((await fresh.exec({ cmd: "cat notes/a.txt" })).stdout, "from-a\n");
    await fresh.close();

    // The run goes on on B: its session ended after a snapshot, so it is resumed from it.
    const state = await RunState.fromString(agent, first.state.toString());
    state.approve(state.getInterruptions()[0]);
    const resumed = recordResumes(onB);
    const result = await runner().run(agent, state, { sandbox: { client: onB } });
    assert.deepEqual(resumed, [live.id]);
    assert.equal(result.finalOutput, "done");
    assert.match(String(toolOutputs(result).read), /from-a\n600\n/);

    const sessions = await onB.client.listSessions(true);
    const mine = sessions.filter((s) => s.id === live.id || s.replica === "replica-b");
    assert.ok(mine.length >= 4, JSON.stringify(mine.map((s) => s.id)));
    for (const s of mine) assert.notEqual(s.status, "SESSION_STATUS_ACTIVE", `session ${s.id} is gone`);
    await assert.rejects(
      fresh.hydrateWorkspace(new Uint8Array(1024)),
      SandboxUnsupportedFeatureError,
    );
  } finally {
    clients.forEach((c) => c.close());
    for (const d of replicas) await d.dispose();
    await postgres.dispose();
  }
});

test("a session of another tenant, or none, is not resumed: the SDK gets a provider error", async () => {
  const tenants = await startDaemon({
    tenants: [
      { name: "team", token_sha256: sha256("team-token") },
      { name: "other", token_sha256: sha256("other-token") },
    ],
  });
  const team = new SandgateSandboxClient({ addr: tenants.addr, token: "team-token" });
  const other = new SandgateSandboxClient({ addr: tenants.addr, token: "other-token" });
  try {
    const session = await team.create();
    const saved = await team.serializeSessionState(session.state);
    try {
      const state = await other.deserializeSessionState(saved);
      await assert.rejects(
        other.resume(state),
        (e) => e instanceof SandboxProviderError && /cannot resume sandgate session .*not found/i.test(e.message),
      );
      await other.delete(state); // not its session: nothing happens
      assert.equal(await session.running(), true);
      await assert.rejects(team.resume({ ...state, sessionId: "s-no-such-session" }), SandboxProviderError);
      await assert.rejects(team.deserializeSessionState({ manifest: saved.manifest }), /no sessionId/);
    } finally {
      await session.close();
    }
    await assert.rejects(team.resume(await team.deserializeSessionState(saved)), /no longer active/);
  } finally {
    team.close();
    other.close();
    await tenants.dispose();
  }
});

test("output the daemon no longer held is said once, in the answer that found it missing", async () => {
  const session = await client.create();
  try {
    // 3 MB while nobody reads: more than a process's buffer (1 MiB by default) holds.
    const started = await session.exec({
      cmd: "head -c 3000000 /dev/zero | tr '\\0' a; sleep 1; echo end",
      yieldTimeMs: 0,
    });
    assert.equal(started.sessionId, 1);
    // Until the daemon has dropped some of it (no read is under way meanwhile).
    for (let tries = 0; ; ++tries) {
      const [record] = await session.session.processes();
      if (Number(record.droppedBytes) > 0) break;
      assert.ok(tries < 500, "the daemon dropped nothing of 3 MB in 10 s");
      await new Promise((r) => setTimeout(r, 20));
    }
    const rest = await session.writeStdin({ sessionId: 1, yieldTimeMs: 10000, maxOutputTokens: 100 });
    assert.match(rest, /\[sandgate: \d+ bytes of earlier output were no longer held\]/);
    assert.match(rest, /Process exited with code 0/);
    assert.match(rest, /aend\n?$/, "the end of the output is kept");
    const gone = await session.writeStdin({ sessionId: 1 });
    assert.doesNotMatch(gone, /no longer held/);
  } finally {
    await session.close();
  }
});

test("of more output than one answer holds, the newest is kept, as the local sandbox does", async () => {
  const session = await client.create();
  try {
    const result = await session.exec({ cmd: "head -c 1500000 /dev/zero | tr '\\0' b; echo; echo last line" });
    assert.equal(result.exitCode, 0);
    // What was not kept is said: trimmed here, or (behind a slow reader) dropped by the daemon.
    assert.match(
      result.output,
      /^(\[sandgate: \d+ bytes of earlier output were no longer held\]\n)?\[\.\.\.\d+ bytes truncated from process output\.\.\.\]\n|^\[sandgate: \d+ bytes/,
    );
    assert.match(result.output, /last line\n$/);
    assert.ok(Buffer.byteLength(result.output) <= 1024 * 1024 + 200, "1 MiB and the notes");
  } finally {
    await session.close();
  }
});
