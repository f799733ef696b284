// The conformance suite's MCP adapter (test_conformance.py):
//   node adapter_mcp.mjs OP ARGS_JSON
// starts the MCP server (clients/mcp) on stdio with the environment the driver set
// (SANDGATE_ADDR, SANDGATE_TOKEN, SANDGATE_TLS_*), performs one operation through the official
// MCP client, and prints one JSON line: {"ok": {...}} or {"error": {"code", "message"}}, the
// code read from the tool error's text ("CODE: message", docs/client-contract.md).
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = join(fileURLToPath(import.meta.url), "..", "..", "..", "..");
const mcpPackage = createRequire(join(repo, "clients", "mcp", "package.json"));
const { Client } = await import(mcpPackage.resolve("@modelcontextprotocol/sdk/client/index.js"));
const { StdioClientTransport } = await import(mcpPackage.resolve("@modelcontextprotocol/sdk/client/stdio.js"));

const [op, argsText] = process.argv.slice(2);
const args = JSON.parse(argsText ?? "{}");

class ToolError extends Error {}

const env = {};
for (const [k, v] of Object.entries(process.env)) if (k === "PATH" || k.startsWith("SANDGATE_")) env[k] = v;
const transport = new StdioClientTransport({
  command: process.execPath,
  args: [join(repo, "clients", "mcp", "dist", "server.js")],
  env,
  stderr: "pipe",
});
const mcp = new Client({ name: "sandgate-conformance", version: "1.0.0" });

async function call(name, callArgs) {
  const r = await mcp.callTool({ name, arguments: callArgs });
  const text = r.content.map((c) => c.text ?? "").join("");
  if (r.isError) throw new ToolError(text);
  return r.structuredContent ?? JSON.parse(text);
}

async function perform() {
  switch (op) {
    case "exec": {
      const { session_id } = await call("create_session", {});
      try {
        const r = await call("exec", { session_id, command: "echo conform" });
        return { exit_code: r.exit_code, stdout: r.stdout };
      } finally {
        await call("close_session", { session_id });
      }
    }
    case "get_run": // MCP has no run lookup of its own: an artifact of the run is the nearest
      await call("read_artifact", { run_id: args.id, name: "memo.md" });
      return {};
    case "exec_in":
      return { exit_code: (await call("exec", { session_id: args.id, command: "true" })).exit_code };
    case "usage": {
      const u = await call("session_usage", { session_id: args.id });
      return { session_id: u.session_id, memory_bytes: u.memory_bytes, unmeasured: u.unmeasured };
    }
    case "ports":
      return { ports: (await call("list_ports", { session_id: args.id })).ports.map((p) => p.port) };
    default:
      throw new Error(`unknown op ${op}`);
  }
}

let answer;
try {
  await mcp.connect(transport);
  answer = { ok: await perform() };
} catch (e) {
  const m = e instanceof ToolError ? /^([A-Z_]+): ([\s\S]*)$/.exec(e.message) : null;
  answer = m ? { error: { code: m[1], message: m[2] } } : { error: { code: "CLIENT", message: String(e?.message ?? e) } };
}
await mcp.close().catch(() => {});
console.log(JSON.stringify(answer));
process.exit(0);
