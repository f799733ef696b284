// The published Codex CLI (npm @openai/codex, pinned in package-lock.json: codex-cli 0.169.0)
// running its commands and file edits in a sandgate session through the daemon's exec-server
// route (GET /v1/sessions/{id}/codex, a WebSocket), driven offline by the project's fake
// OpenAI server as a scripted model: no key, no network.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { get as httpGet } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { OTHER, codexUrl, createSession, execText, rest, startFakeOpenAI, startRestDaemon } from "./harness.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const codexBin = join(here, "node_modules", ".bin", "codex");

let daemon;
let model;
let scratch;
before(async () => {
  daemon = await startRestDaemon();
  model = await startFakeOpenAI();
  scratch = mkdtempSync(join(tmpdir(), "sg-codex-"));
});
after(async () => {
  await model?.stop();
  await daemon?.dispose();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

// `codex exec PROMPT` with the fake model as its provider and the session as its executor;
// resolves with {code, stdout, stderr}.
function codexExec(url, prompt, args = []) {
  const home = join(scratch, "home");
  mkdirSync(home, { recursive: true });
  writeFileSync(
    join(home, "config.toml"),
    [
      'model = "fake-model"',
      'model_provider = "fake"',
      "[model_providers.fake]",
      'name = "fake"',
      `base_url = "${model.base}/v1"`,
      'wire_api = "responses"',
      'env_key = "FAKE_KEY"',
      "",
    ].join("\n"),
  );
  const child = spawn(
    codexBin,
    ["exec", "--skip-git-repo-check", "-s", "danger-full-access", "-C", "/work", ...args, prompt],
    {
      cwd: scratch,
      env: { ...process.env, CODEX_HOME: home, CODEX_EXEC_SERVER_URL: url, FAKE_KEY: "test-key" },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  const timer = setTimeout(() => child.kill("SIGKILL"), 90_000);
  return new Promise((resolve) =>
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}

const shellCall = (cmd) => ({ function: { name: "exec_command", arguments: JSON.stringify({ cmd }) } });

test("codex exec runs its commands and its file edit inside the sandgate session", async () => {
  const session = await createSession(daemon);
  await rest(daemon, "PUT", `/v1/sessions/${session.id}/files/notes.txt`, { body: "only-in-the-session\n", raw: true });
  const sandboxHost = (await execText(daemon, session.id, "hostname")).trim();
  const sandboxKernel = (await execText(daemon, session.id, "uname -a")).trim();
  await model.scenario([
    shellCall("cat notes.txt > seen.txt; hostname > host.txt; uname -a > uname.txt; pwd > pwd.txt; echo echo-from-the-sandbox"),
    // Codex applies a patch itself, reading and writing through the executor's fs/* calls.
    shellCall(
      "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: patched.txt\n+written by codex's apply_patch\n*** End Patch\nEOF",
    ),
    { message: "done" },
  ]);
  const run = await codexExec(codexUrl(daemon, session.id), "look at notes.txt");
  const read = (name) => rest(daemon, "GET", `/v1/sessions/${session.id}/files/${name}`);
  assert.equal(run.code, 0, `codex exec failed:\n${run.stdout}\n${run.stderr}`);
  // Codex ran the two calls (the model's turns) and the daemon saw them.
  assert.doesNotMatch(run.stderr, /No usable execution environment/, run.stderr);
  assert.match(run.stdout, /done/);
  // What the command printed came back to Codex (pushed process/output notifications).
  assert.match(run.stderr, /echo-from-the-sandbox/, run.stderr);
  // The command saw the session's own files, its host and kernel, its workspace.
  assert.equal(await read("seen.txt"), "only-in-the-session\n");
  assert.equal((await read("host.txt")).trim(), sandboxHost);
  assert.equal((await read("uname.txt")).trim(), sandboxKernel);
  assert.equal((await read("pwd.txt")).trim(), session.workdir);
  // The edit is in the session, seen through sandgate's file API.
  assert.equal(await read("patched.txt"), "written by codex's apply_patch\n");
  await rest(daemon, "POST", `/v1/sessions/${session.id}:close`, { body: {} });
});

// The answer to a GET of `url` (ws:// as http://): its status and body, or 101.
function get(url, headers) {
  return new Promise((resolve, reject) => {
    const req = httpGet(url.replace(/^ws/, "http"), { headers }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode, body }));
    });
    req.on("upgrade", (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode, body: "" });
    });
    req.on("error", reject);
  });
}

test("the route refuses a missing token, another tenant's session and a plain GET", async () => {
  const session = await createSession(daemon);
  const url = codexUrl(daemon, session.id);
  const upgrade = { connection: "Upgrade", upgrade: "websocket", "sec-websocket-version": "13", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==" };
  assert.equal((await get(url, upgrade)).status, 101);
  assert.equal((await get(url.replace(/\?.*$/, ""), upgrade)).status, 401);
  assert.equal((await get(codexUrl(daemon, session.id, OTHER), upgrade)).status, 404);
  assert.equal((await get(codexUrl(daemon, "s-unknown"), upgrade)).status, 404);
  const plain = await get(url, {});
  assert.equal(plain.status, 400);
  assert.match(plain.body, /Upgrade: websocket/);
  const oldVersion = await get(url, { ...upgrade, "sec-websocket-version": "8" });
  assert.equal(oldVersion.status, 400);
  assert.match(oldVersion.body, /Sec-WebSocket-Version must be 13/);
  await rest(daemon, "POST", `/v1/sessions/${session.id}:close`, { body: {} });
});
