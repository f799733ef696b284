#!/usr/bin/env node
// sandgate-mcp: an MCP server on stdio (the official @modelcontextprotocol/sdk) that gives any
// MCP-speaking agent sandgate's sandboxes: sessions with a shell and files, and the verified
// analysis. It talks to sandgated through the TypeScript client (clients/node), reading
// SANDGATE_ADDR / SANDGATE_TOKEN / SANDGATE_TLS_* like the CLI.
//
//   { "mcpServers": { "sandgate": { "command": "sandgate-mcp",
//                                   "env": { "SANDGATE_ADDR": "unix:/run/sandgate/sandgated.sock" } } } }
//
// Every session it creates is kept alive while the MCP client is connected and closed when the
// client goes away (stdin ends, SIGTERM, SIGINT); if this process is killed outright, the
// daemon's idle timeout reaps them.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { Client, SandgateError, Session } from "sandgate";
import { z } from "zod";

import { describeRun, outputText } from "./render.js";

const VERSION = "0.1.0";
// What one tool answer carries of a command's output or a file, so an agent's context is not
// flooded; the rest is cut with a note saying so.
const MAX_TEXT = 64 << 10;

const client = new Client();
const sessions = new Map<string, Session>(); // the sessions this server made, by id

// A tool's answer: text for the model, and the same as structured content.
function answer(text: string, structured?: Record<string, unknown>): CallToolResult {
  return { content: [{ type: "text", text }], ...(structured ? { structuredContent: structured } : {}) };
}

// Runs a tool; a daemon error becomes a tool error naming its code and the daemon's words,
// so the model can correct itself, rather than a protocol error.
async function tool(fn: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await fn();
  } catch (e) {
    const text = e instanceof SandgateError ? `${e.codeName}: ${e.message}` : (e as Error).message;
    return { isError: true, content: [{ type: "text", text }] };
  }
}

// A session by id: one this server made, else any of the caller's (the daemon checks).
async function session(id: string): Promise<Session> {
  const known = sessions.get(id);
  if (known) return known;
  const record = await client.unary<Session["record"]>("GetSession", { sessionId: id });
  return new Session(client, record, { keepAlive: false });
}

const server = new McpServer({ name: "sandgate", version: VERSION });

server.registerTool(
  "create_session",
  {
    title: "Create a sandbox session",
    description:
      "Creates an isolated Linux sandbox with a shell and a workspace directory. The network is " +
      "off unless asked for. Returns the session_id the other tools take. Close it when done.",
    inputSchema: {
      network: z.enum(["disabled", "restricted", "enabled"]).optional().describe("default disabled"),
      allowed_domains: z.array(z.string()).optional().describe("with network 'restricted'"),
      env: z.record(z.string(), z.string()).optional().describe("environment of every command"),
      setup_commands: z.array(z.string()).optional().describe("run once, in order, before anything else"),
      memory_mib: z.number().int().positive().optional(),
      idle_timeout_seconds: z.number().int().positive().optional(),
    },
  },
  (args) =>
    tool(async () => {
      const modes = { disabled: "MODE_DISABLED", restricted: "MODE_RESTRICTED", enabled: "MODE_ENABLED" } as const;
      const s = await client.createSession({
        sandbox: {
          network: args.network
            ? { mode: modes[args.network], allowedDomains: args.allowed_domains ?? [] }
            : undefined,
          env: args.env ?? {},
          setupCommands: args.setup_commands ?? [],
          memoryBytes: args.memory_mib ? args.memory_mib * 1024 * 1024 : 0,
          idleTimeout: args.idle_timeout_seconds ? { seconds: args.idle_timeout_seconds } : undefined,
        },
        labels: { via: "mcp" },
      });
      sessions.set(s.id, s);
      const r = s.record;
      return answer(`session ${s.id} is ready; commands run in ${r.workdir}`, {
        session_id: s.id,
        workdir: r.workdir,
        unenforced: r.unenforced,
      });
    }),
);

server.registerTool(
  "exec",
  {
    title: "Run a shell command in a session",
    description:
      "Runs `sh -c COMMAND` in the session's workspace and returns its exit code, stdout and " +
      "stderr (each cut at 64 KiB). A non-zero exit is a result, not an error.",
    inputSchema: {
      session_id: z.string(),
      command: z.string().min(1),
      cwd: z.string().optional().describe("relative to the workspace"),
      timeout_seconds: z.number().int().positive().optional(),
    },
  },
  (args) =>
    tool(async () => {
      const s = await session(args.session_id);
      const r = await s.run(args.command, { cwd: args.cwd, timeoutSeconds: args.timeout_seconds });
      const f = r.finished;
      return answer(outputText(r, MAX_TEXT), {
        exit_code: f.exitCode,
        signal: f.signal,
        timed_out: f.timedOut,
        oom_killed: f.oomKilled,
        stdout: r.stdout.slice(0, MAX_TEXT),
        stderr: r.stderr.slice(0, MAX_TEXT),
      });
    }),
);

server.registerTool(
  "write_file",
  {
    title: "Write a file in a session",
    description: "Writes (or replaces) a file in the session's workspace.",
    inputSchema: {
      session_id: z.string(),
      path: z.string().min(1).describe("relative to the workspace"),
      content: z.string(),
      encoding: z.enum(["utf8", "base64"]).optional().describe("of content; default utf8"),
    },
  },
  (args) =>
    tool(async () => {
      const s = await session(args.session_id);
      const data = Buffer.from(args.content, args.encoding === "base64" ? "base64" : "utf8");
      const info = await s.write(args.path, data);
      return answer(`wrote ${info.path} (${info.sizeBytes} bytes, sha256 ${info.sha256})`, {
        path: info.path,
        size_bytes: info.sizeBytes,
        sha256: info.sha256,
      });
    }),
);

server.registerTool(
  "read_file",
  {
    title: "Read a file from a session",
    description:
      "Reads a file of the session's workspace: as text when it is UTF-8, else as base64 " +
      "(at most 64 KiB are returned; the size says how big it is).",
    inputSchema: { session_id: z.string(), path: z.string().min(1) },
  },
  (args) =>
    tool(async () => {
      const s = await session(args.session_id);
      const data = await s.read(args.path);
      const head = data.subarray(0, MAX_TEXT);
      const text = new TextDecoder("utf-8", { fatal: true });
      let content: string;
      let encoding: "utf8" | "base64";
      try {
        content = text.decode(head);
        encoding = "utf8";
      } catch {
        content = head.toString("base64");
        encoding = "base64";
      }
      const cut = data.length > head.length ? `\n[cut: the file has ${data.length} bytes]` : "";
      return answer(encoding === "utf8" ? content + cut : `base64: ${content}${cut}`, {
        path: args.path,
        size_bytes: data.length,
        encoding,
        content,
        truncated: data.length > head.length,
      });
    }),
);

server.registerTool(
  "list_files",
  {
    title: "List files in a session",
    description: "Lists the session's workspace, or a directory in it (paths relative to the workspace).",
    inputSchema: { session_id: z.string(), dir: z.string().optional() },
  },
  (args) =>
    tool(async () => {
      const s = await session(args.session_id);
      const files = await s.ls(args.dir ?? "");
      const kinds: Record<string, string> = { TYPE_DIRECTORY: "dir", TYPE_SYMLINK: "link", TYPE_REGULAR: "file" };
      const list = files.map((f) => ({ path: f.path, type: kinds[f.type] ?? "other", size_bytes: f.sizeBytes }));
      const text = list.map((f) => `${f.type}\t${f.size_bytes}\t${JSON.stringify(f.path)}`).join("\n");
      return answer(text || "(empty)", { files: list });
    }),
);

server.registerTool(
  "close_session",
  {
    title: "Close a session",
    description: "Closes the session and deletes its sandbox and workspace.",
    inputSchema: { session_id: z.string(), reason: z.string().optional() },
  },
  (args) =>
    tool(async () => {
      const s = await session(args.session_id);
      const r = await s.close(args.reason ?? "closed by the MCP client");
      sessions.delete(args.session_id);
      return answer(`session ${r.id} is ${r.status.replace("SESSION_STATUS_", "").toLowerCase()}`, {
        session_id: r.id,
        status: r.status,
      });
    }),
);

server.registerTool(
  "run_analysis",
  {
    title: "Run a verified analysis",
    description:
      "Runs one of the daemon's playbooks (default: the financial analyst) on an input file in " +
      "a fresh sandbox; sandgate recomputes and checks every figure. Returns the status, the " +
      "summary, every check with its detail, and the artifacts (name, size, sha256).",
    inputSchema: {
      input_name: z.string().min(1).describe("file name, e.g. statements.csv"),
      input_content: z.string().describe("the file's contents (utf8)"),
      playbook: z.string().optional(),
      agent: z.string().optional(),
      provider: z.string().optional(),
      model: z.string().optional(),
    },
  },
  (args) =>
    tool(async () => {
      const run = await client.runAnalysis(
        { name: args.input_name, content: args.input_content },
        { playbook: args.playbook, agent: args.agent, provider: args.provider, model: args.model, labels: { via: "mcp" } },
      );
      const final = await run.wait();
      const described = describeRun(final);
      return { ...answer(described.text, described.structured), isError: final.status !== "RUN_STATUS_SUCCEEDED" };
    }),
);

// Closes every session this server made, once; then the process may end.
let closing: Promise<void> | null = null;
function closeAll(why: string): Promise<void> {
  closing ??= (async () => {
    await Promise.allSettled([...sessions.values()].map((s) => s.close(why)));
    sessions.clear();
    client.close();
  })();
  return closing;
}

const transport = new StdioServerTransport();
const quit = (why: string) => void closeAll(why).finally(() => process.exit(0));
process.stdin.on("end", () => quit("the MCP client disconnected"));
process.on("SIGTERM", () => quit("the MCP server was stopped (SIGTERM)"));
process.on("SIGINT", () => quit("the MCP server was stopped (SIGINT)"));
await server.connect(transport);
