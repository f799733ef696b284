// What the Codex tests share: the real daemon with its REST port and two tenants, the REST
// calls they make, and the project's fake OpenAI server (tests/fakes/openai) as the model.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { join } from "node:path";

import { repo, sha256, startDaemon } from "../node/daemon.mjs";

export const TOKEN = "codex-test-token";
export const OTHER = "codex-other-token";

// The daemon, serving REST on a free loopback port; `http` is its base URL.
export async function startRestDaemon(config = {}) {
  const daemon = await startDaemon({
    // A uid range of its own: clients.typescript's daemons (daemon.mjs's default) may run at once.
    local: { uid_base: 331200, uid_count: 16 },
    ...config,
    http_listen: "127.0.0.1:0",
    allow_plaintext_tokens: true,
    tenants: [
      { name: "team", token_sha256: sha256(TOKEN) },
      { name: "other", token_sha256: sha256(OTHER) },
    ],
  });
  for (let i = 0; i < 100 && !/daemon\.http/.test(daemon.log()); ++i) {
    await new Promise((r) => setTimeout(r, 50));
  }
  const url = /"event":"daemon\.http".*?"url":"([^"]+)"/.exec(daemon.log())?.[1] ??
    /daemon\.http.*?(http:\/\/[0-9.:]+)/.exec(daemon.log())?.[1];
  if (!url) throw new Error(`no daemon.http in the log:\n${daemon.log()}`);
  daemon.http = url.replace(/\/$/, "");
  return daemon;
}

// A REST call; the parsed JSON answer (or the text), throwing on an HTTP error.
export async function rest(daemon, method, path, { token = TOKEN, body, raw = false } = {}) {
  const res = await fetch(`${daemon.http}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined && !raw ? { "content-type": "application/json" } : {}) },
    body: body === undefined ? undefined : raw ? body : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return res.headers.get("content-type")?.startsWith("application/json") ? JSON.parse(text) : text;
}

export const createSession = (daemon, token = TOKEN) =>
  rest(daemon, "POST", "/v1/sessions", { token, body: { sandbox: { idleTimeout: "600s" } } });

// A command to its end through REST Exec: its stdout.
export async function execText(daemon, id, command) {
  const lines = (await rest(daemon, "POST", `/v1/sessions/${id}:exec`, { body: { command } })).trim().split("\n");
  let out = "";
  for (const line of lines) {
    const m = JSON.parse(line);
    if (m.output?.data) out += Buffer.from(m.output.data, "base64").toString();
  }
  return out;
}

// The exec-server URL of a session, with the token in the query (Codex sends no headers).
export const codexUrl = (daemon, id, token = TOKEN) =>
  `${daemon.http.replace(/^http/, "ws")}/v1/sessions/${id}/codex?token=${encodeURIComponent(token)}`;

// The fake OpenAI server on a free port, key "test-key"; `scenario(turns)` scripts the model.
export async function startFakeOpenAI() {
  const child = spawn("python3", [join(repo, "tests", "fakes", "openai", "fake_openai.py"), "--port", "0", "--api-key", "test-key"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const lines = createInterface({ input: child.stdout });
  const [line] = await Promise.race([
    once(lines, "line"),
    once(child, "exit").then(() => {
      throw new Error(`fake_openai.py exited:\n${stderr}`);
    }),
  ]);
  const base = /listening on (http:\/\/\S+)/.exec(line)[1];
  return {
    base,
    stderr: () => stderr,
    async scenario(turns) {
      const res = await fetch(`${base}/_fake/scenario`, { method: "POST", body: JSON.stringify({ turns }) });
      if (!res.ok) throw new Error(`scenario: ${res.status} ${await res.text()}`);
    },
    async state() {
      return (await fetch(`${base}/_fake/state`)).json();
    },
    async stop() {
      child.kill("SIGTERM");
      await once(child, "exit");
    },
  };
}
