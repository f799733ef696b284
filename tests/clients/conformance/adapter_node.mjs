// The conformance suite's TypeScript adapter (tests/clients/conformance/test_conformance.py):
//   node adapter_node.mjs OP ARGS_JSON
// runs one operation with the TypeScript client (clients/node) configured only by the
// environment (SANDGATE_ADDR, SANDGATE_TOKEN, SANDGATE_TLS_*, SANDGATE_RECONNECT_TIMEOUT) and
// prints one JSON line: {"ok": {...}} or {"error": {"code": "NOT_FOUND", "message": "..."}}.
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = join(fileURLToPath(import.meta.url), "..", "..", "..", "..");
const { Client, SandgateError } = await import(join(repo, "clients", "node", "dist", "index.js"));

const [op, argsText] = process.argv.slice(2);
const args = JSON.parse(argsText ?? "{}");

async function perform(client) {
  switch (op) {
    case "exec": {
      const session = await client.createSession();
      try {
        const r = await session.run("echo conform");
        return { exit_code: r.exitCode, stdout: r.stdout.toString() };
      } finally {
        await session.close();
      }
    }
    case "get_run":
      return { status: (await client.getRun(args.id)).status };
    case "exec_in": {
      const session = await client.getSession(args.id, { keepAlive: false });
      const r = await session.run("true");
      return { exit_code: r.exitCode };
    }
    case "usage": {
      const u = await (await client.getSession(args.id, { keepAlive: false })).usage();
      return { session_id: u.sessionId, memory_bytes: Number(u.memoryBytes), unmeasured: u.unmeasured };
    }
    case "ports":
      return { ports: (await (await client.getSession(args.id, { keepAlive: false })).ports()).map((p) => p.port) };
    case "follow": {
      const run = await client.getRun(args.id);
      const events = [];
      for await (const e of run.events()) {
        events.push({ seq: Number(e.seq), type: e.type });
        console.log(JSON.stringify({ event: events.at(-1) })); // progress, for the driver
      }
      return { events };
    }
    default:
      throw new Error(`unknown op ${op}`);
  }
}

let answer;
try {
  const client = new Client();
  try {
    answer = { ok: await perform(client) };
  } finally {
    client.close();
  }
} catch (e) {
  answer =
    e instanceof SandgateError
      ? { error: { code: e.codeName, message: e.message } }
      : { error: { code: "CLIENT", message: String(e?.message ?? e) } };
}
console.log(JSON.stringify(answer));
process.exit(0);
