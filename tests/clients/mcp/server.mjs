// The MCP server (clients/mcp) for a test: started on stdio by the official MCP client
// (@modelcontextprotocol/sdk, as the MCP package installed it) with only the daemon's address
// and a token in its environment.
import { createRequire } from "node:module";
import { join } from "node:path";

import { repo } from "../node/daemon.mjs";

const mcpPackage = createRequire(join(repo, "clients", "mcp", "package.json"));
const { Client } = await import(mcpPackage.resolve("@modelcontextprotocol/sdk/client/index.js"));
const { StdioClientTransport } = await import(mcpPackage.resolve("@modelcontextprotocol/sdk/client/stdio.js"));

// A connected MCP client, and its transport (whose child process is the server).
export async function connectMcp(addr, token) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [join(repo, "clients", "mcp", "dist", "server.js")],
    env: { PATH: process.env.PATH, SANDGATE_ADDR: addr, SANDGATE_TOKEN: token },
    stderr: "pipe",
  });
  const client = new Client({ name: "sandgate-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}
