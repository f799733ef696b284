// Runs the real sandgated for a test: its own temp directory, state and Unix socket, the
// config given (listen and state_dir filled in), killed when the test is done. The binary
// comes from $SANDGATED (ctest sets it), else the repo's build/.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { createConnection, createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const sampleCsv = join(repo, "examples", "northstar_cloud_financial_statements.csv");
const binary = process.env.SANDGATED ?? join(repo, "build", "bin", "sandgated");

export const sha256 = (data) => createHash("sha256").update(data).digest("hex");

// `beforeStart(stateDir)` prepares the state directory before the daemon first reads it.
export async function startDaemon(config = {}, { beforeStart } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "sg-node-"));
  const socket = join(dir, "sandgated.sock");
  const full = {
    listen: `unix:${socket}`,
    state_dir: join(dir, "state"),
    // A uid range of its own, apart from the C++ integration tests' (they may run at once).
    local: { uid_base: 330100, uid_count: 16 },
    ...config,
  };
  // A replica that advertises "self" is reached at its own socket (as the C++ harness does).
  if (full.replica?.advertise_address === "self") full.replica = { ...full.replica, advertise_address: `unix:${socket}` };
  writeFileSync(join(dir, "config.json"), JSON.stringify(full));
  const daemon = {
    dir,
    addr: `unix:${socket}`,
    child: null,
    log: () => (existsSync(join(dir, "log")) ? readFileSync(join(dir, "log"), "utf8") : ""),
    async start() {
      const { openSync } = await import("node:fs");
      const out = openSync(join(dir, "log"), "a");
      this.child = spawn(binary, ["--config", join(dir, "config.json")], { stdio: ["ignore", out, out] });
      const exited = new Promise((r) => this.child.once("exit", r));
      for (let i = 0; i < 200; ++i) {
        if (existsSync(socket) && (await canConnect(socket))) return;
        if (this.child.exitCode !== null) break;
        await Promise.race([exited, new Promise((r) => setTimeout(r, 50))]);
      }
      throw new Error(`sandgated did not start:\n${this.log()}`);
    },
    async stop(signal = "SIGTERM") {
      if (!this.child || this.child.exitCode !== null) return;
      const exited = new Promise((r) => this.child.once("exit", r));
      this.child.kill(signal);
      await exited;
    },
    async dispose() {
      await this.stop("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await beforeStart?.(full.state_dir);
  await daemon.start();
  return daemon;
}

function canConnect(socket) {
  return new Promise((resolve) => {
    const c = createConnection(socket, () => {
      c.destroy();
      resolve(true);
    });
    c.on("error", () => resolve(false));
  });
}

// A TCP proxy in front of the daemon's socket that can cut every connection, as a network
// does: the client sees its streams break (UNAVAILABLE) and must resume.
export async function startProxy(socket) {
  const conns = new Set();
  let accepted = 0;
  const server = createServer((client) => {
    accepted += 1;
    const upstream = createConnection(socket);
    client.pipe(upstream).pipe(client);
    const pair = { client, upstream };
    conns.add(pair);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      conns.delete(pair);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    addr: `tcp:127.0.0.1:${server.address().port}`,
    accepted: () => accepted,
    cutAll() {
      for (const { client, upstream } of conns) {
        client.resetAndDestroy();
        upstream.destroy();
      }
      conns.clear();
    },
    close: () => {
      for (const { client, upstream } of conns) {
        client.destroy();
        upstream.destroy();
      }
      return new Promise((r) => server.close(r));
    },
  };
}

// The config of a daemon with two tenants, "team" and "other", holding these tokens.
export function twoTenants(team, other) {
  return {
    tenants: [
      { name: "team", token_sha256: sha256(team) },
      { name: "other", token_sha256: sha256(other) },
    ],
  };
}
