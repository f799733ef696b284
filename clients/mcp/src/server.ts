#!/usr/bin/env node
// sandgate-mcp: an MCP server on stdio (the official @modelcontextprotocol/sdk) that gives any
// MCP-speaking agent sandgate's sandboxes: sessions with a shell and files, and the verified
// analysis. It talks to sandgated through the TypeScript client (clients/node), reading
// SANDGATE_ADDR / SANDGATE_TOKEN / SANDGATE_TLS_* like the CLI.
//
//   { "mcpServers": { "sandgate": { "command": "sandgate-mcp",
//                                   "env": { "SANDGATE_ADDR": "unix:/run/sandgate/sandgated.sock" } } } }
//
// Every session it creates is kept alive while the MCP client is connected and closed on every
// way out: stdin ends, SIGTERM, SIGINT, the connection breaks, an uncaught error; only if this
// process is killed outright does the daemon's idle timeout reap them.
//
// A request over MAX_REQUEST_BYTES (10 MiB: a file's content, an input) is refused with a tool
// error naming the limit, and the server goes on. Unknown argument names are refused too.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult, JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { Client, SandgateError, Session, type ExposedPort } from "sandgate";
import { z } from "zod";

import { artifactContent, describeRun, outputText } from "./render.js";
import { LineTransport, type Oversized } from "./transport.js";

const VERSION = "0.1.0";
// What one tool answer carries of a command's output or a file, so an agent's context is not
// flooded; the rest is cut with a note saying so.
const MAX_TEXT = 64 << 10;
// The largest request (one JSON-RPC line) taken; what is over it is skipped unread.
const MAX_REQUEST_BYTES = 10 << 20;
// The largest image read_artifact returns as image content.
const MAX_IMAGE = 1 << 20;
// How long closing the sessions may take on the way out (the daemon may be gone).
const CLOSE_TIMEOUT_MS = 5000;

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
  return client.getSession(id, { keepAlive: false });
}

// A tool's arguments: exactly these (an unknown name is a tool error naming it, as the
// schema's additionalProperties: false says).
const exactly = <T extends z.ZodRawShape>(shape: T) => z.object(shape).strict();

const server = new McpServer({ name: "sandgate", version: VERSION });

server.registerTool(
  "create_session",
  {
    title: "Create a sandbox session",
    description:
      "Creates an isolated Linux sandbox with a shell and a workspace directory. The network is " +
      "off unless asked for. Returns the session_id the other tools take. Close it when done.",
    inputSchema: exactly({
      network: z.enum(["disabled", "restricted", "enabled"]).optional().describe("default disabled"),
      allowed_domains: z.array(z.string()).optional().describe("with network 'restricted'"),
      env: z.record(z.string(), z.string()).optional().describe("environment of every command"),
      setup_commands: z.array(z.string()).optional().describe("run once, in order, before anything else"),
      memory_mib: z.number().int().positive().optional(),
      idle_timeout_seconds: z.number().int().positive().optional(),
    }),
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
    inputSchema: exactly({
      session_id: z.string(),
      command: z.string().min(1),
      cwd: z.string().optional().describe("relative to the workspace"),
      timeout_seconds: z.number().int().positive().optional(),
    }),
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
    inputSchema: exactly({
      session_id: z.string(),
      path: z.string().min(1).describe("relative to the workspace"),
      content: z.string(),
      encoding: z.enum(["utf8", "base64"]).optional().describe("of content; default utf8"),
    }),
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
    inputSchema: exactly({ session_id: z.string(), path: z.string().min(1) }),
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
    inputSchema: exactly({ session_id: z.string(), dir: z.string().optional() }),
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

const KINDS: Record<string, string> = { TYPE_DIRECTORY: "dir", TYPE_SYMLINK: "link", TYPE_REGULAR: "file" };
// A file as a tool answers it.
function fileAnswer(verb: string, f: { path: string; type: string; sizeBytes: number }): CallToolResult {
  const kind = KINDS[f.type] ?? "other";
  return answer(`${verb} ${kind} ${JSON.stringify(f.path || ".")} (${f.sizeBytes} bytes)`, {
    path: f.path,
    type: kind,
    size_bytes: f.sizeBytes,
  });
}

server.registerTool(
  "stat_file",
  {
    title: "What a path is",
    description: "Says whether a path in the session's workspace is a file, a directory or a link, and its size (links are not followed).",
    inputSchema: exactly({ session_id: z.string(), path: z.string() }),
  },
  (args) => tool(async () => fileAnswer("", await (await session(args.session_id)).stat(args.path))),
);

server.registerTool(
  "delete_file",
  {
    title: "Delete a file",
    description: "Deletes a file, a link or an empty directory of the session's workspace; recursive: a directory with everything in it.",
    inputSchema: exactly({ session_id: z.string(), path: z.string().min(1), recursive: z.boolean().optional() }),
  },
  (args) =>
    tool(async () => {
      await (await session(args.session_id)).remove(args.path, { recursive: args.recursive ?? false });
      return answer(`deleted ${JSON.stringify(args.path)}`, { path: args.path, deleted: true });
    }),
);

server.registerTool(
  "move_file",
  {
    title: "Rename or move a file",
    description: "Renames a file or directory within the session's workspace (missing parents are made); overwrite replaces an existing target.",
    inputSchema: exactly({ session_id: z.string(), from: z.string().min(1), to: z.string().min(1), overwrite: z.boolean().optional() }),
  },
  (args) =>
    tool(async () =>
      fileAnswer("moved to", await (await session(args.session_id)).rename(args.from, args.to, { overwrite: args.overwrite ?? false })),
    ),
);

server.registerTool(
  "make_directory",
  {
    title: "Make a directory",
    description: "Makes a directory in the session's workspace, with its missing parents.",
    inputSchema: exactly({ session_id: z.string(), path: z.string().min(1) }),
  },
  (args) => tool(async () => fileAnswer("made", await (await session(args.session_id)).mkdir(args.path, { parents: true }))),
);

server.registerTool(
  "session_usage",
  {
    title: "What a session uses",
    description:
      "The session's memory (and its limit), the CPU time its processes used since it started, " +
      "and how many processes it has, as its cgroups say now. Figures the host cannot give are " +
      "named in `unmeasured`. Two calls' cpu_seconds over the time between them is its CPU share.",
    inputSchema: exactly({ session_id: z.string() }),
  },
  (args) =>
    tool(async () => {
      const u = await (await session(args.session_id)).usage();
      const cpu = Number(u.cpuTime?.seconds ?? 0) + (u.cpuTime?.nanos ?? 0) / 1e9;
      const mib = (n: number) => `${(n / 1048576).toFixed(1)} MiB`;
      const limit = u.memoryLimitBytes ? ` of ${mib(u.memoryLimitBytes)}` : " (no limit)";
      const unmeasured = u.unmeasured.map((why) => `\nnot measured: ${why}`).join("");
      return answer(
        `session ${u.sessionId}: memory ${mib(u.memoryBytes)}${limit}, cpu ${cpu.toFixed(3)} s, ` +
          `${u.processes} processes${unmeasured}`,
        {
          session_id: u.sessionId,
          memory_bytes: u.memoryBytes,
          memory_limit_bytes: u.memoryLimitBytes,
          cpu_seconds: cpu,
          processes: u.processes,
          unmeasured: u.unmeasured,
        },
      );
    }),
);

// An exposed port as a tool answers it.
function portFields(p: ExposedPort): Record<string, unknown> {
  return {
    port: p.port,
    url: p.url,
    ...(p.signedUrl ? { signed_url: p.signedUrl, signed_expires_at: p.signedExpiresAt?.seconds } : {}),
    open_connections: p.openConnections,
  };
}
const port = z.number().int().min(1).max(65535);

server.registerTool(
  "expose_port",
  {
    title: "Expose a session's port",
    description:
      "Makes a port that the session's code listens on at 127.0.0.1 in the sandbox reachable " +
      "through the daemon's REST port (HTTP and WebSocket): `url` needs the caller's token; with " +
      "signed, `signed_url` needs none until it expires (ttl_seconds, default the daemon's, 1 h).",
    inputSchema: exactly({
      session_id: z.string(),
      port,
      signed: z.boolean().optional(),
      ttl_seconds: z.number().int().positive().optional().describe("with signed"),
    }),
  },
  (args) =>
    tool(async () => {
      if (args.ttl_seconds !== undefined && !args.signed) throw new Error("ttl_seconds: only with signed: true");
      const s = await session(args.session_id);
      const p = await s.expose(args.port, { signed: args.signed ?? false, ttlSeconds: args.ttl_seconds });
      return answer(`port ${p.port} of session ${s.id}: ${args.signed ? p.signedUrl : p.url}`, portFields(p));
    }),
);

server.registerTool(
  "unexpose_port",
  {
    title: "Close an exposed port",
    description: "Closes a port expose_port opened: its URLs and open connections end.",
    inputSchema: exactly({ session_id: z.string(), port }),
  },
  (args) =>
    tool(async () => {
      await (await session(args.session_id)).unexpose(args.port);
      return answer(`port ${args.port} of session ${args.session_id} is closed`, { port: args.port, exposed: false });
    }),
);

server.registerTool(
  "list_ports",
  {
    title: "List a session's exposed ports",
    description: "The session's exposed ports, their URLs and open connections.",
    inputSchema: exactly({ session_id: z.string() }),
  },
  (args) =>
    tool(async () => {
      const ports = await (await session(args.session_id)).ports();
      const text = ports.map((p) => `${p.port}\t${p.openConnections}\t${p.url}`).join("\n");
      return answer(text || "(no exposed ports)", { ports: ports.map(portFields) });
    }),
);

server.registerTool(
  "close_session",
  {
    title: "Close a session",
    description: "Closes the session and deletes its sandbox and workspace.",
    inputSchema: exactly({ session_id: z.string(), reason: z.string().optional() }),
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
  "snapshot_session",
  {
    title: "Snapshot a session's workspace",
    description:
      "Saves the session's workspace (files, directories, links, modes) as a snapshot that " +
      "restore_snapshot brings back in a new session, on any replica. With close, the session " +
      "is closed once the snapshot is stored (a pause).",
    inputSchema: exactly({ session_id: z.string(), close: z.boolean().optional() }),
  },
  (args) =>
    tool(async () => {
      const s = await session(args.session_id);
      const snap = args.close ? await s.pause() : await s.snapshot();
      if (args.close) sessions.delete(args.session_id);
      return answer(`snapshot ${snap.id} of session ${snap.sessionId}: ${snap.files} entries`, {
        snapshot_id: snap.id,
        session_id: snap.sessionId,
        size_bytes: snap.sizeBytes,
        entries: snap.files,
      });
    }),
);

server.registerTool(
  "restore_snapshot",
  {
    title: "Restore a snapshot into a new session",
    description:
      "Creates a session with the snapshot's sandbox and its workspace restored; returns the " +
      "new session's id (close it with close_session).",
    inputSchema: exactly({ snapshot_id: z.string() }),
  },
  (args) =>
    tool(async () => {
      const s = await client.resume(args.snapshot_id);
      sessions.set(s.id, s);
      return answer(`session ${s.id} from snapshot ${args.snapshot_id}`, { session_id: s.id });
    }),
);

server.registerTool(
  "run_analysis",
  {
    title: "Run a verified analysis",
    description:
      "Runs one of the daemon's playbooks (default: the financial analyst) on an input file in " +
      "a fresh sandbox; sandgate recomputes and checks every figure. Returns the status, the " +
      "summary with its figures and flags, every check with its detail, and the artifacts " +
      "(name, size, sha256), which read_artifact reads.",
    inputSchema: exactly({
      input_name: z.string().min(1).describe("file name, e.g. statements.csv"),
      input_content: z.string().describe("the file's contents (utf8)"),
      playbook: z.string().optional(),
      agent: z.string().optional(),
      provider: z.string().optional(),
      model: z.string().optional(),
    }),
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

server.registerTool(
  "read_artifact",
  {
    title: "Read an artifact of a run",
    description:
      "Reads a file a run produced (e.g. the memo), by the run_id and artifact name run_analysis " +
      "returned: text as text (at most 64 KiB are returned; the size says how big it is), a " +
      "PNG, JPEG, GIF or WebP image up to 1 MiB as an image. Other files are refused, naming " +
      "how to download them.",
    inputSchema: exactly({ run_id: z.string().min(1), name: z.string().min(1) }),
  },
  (args) =>
    tool(async () => {
      // The daemon answers only the caller's own runs (another tenant's is NOT_FOUND).
      const run = await client.getRun(args.run_id);
      const artifact = run.record.artifacts.find((a) => a.name === args.name);
      if (!artifact) {
        const names = run.record.artifacts.map((a) => a.name).join(", ") || "none";
        throw new Error(`run ${run.id} has no artifact named "${args.name}"; its artifacts: ${names}`);
      }
      const data = await run.readArtifact(artifact.name, Math.max(MAX_TEXT, MAX_IMAGE));
      return artifactContent(run.id, artifact, data, { maxText: MAX_TEXT, maxImage: MAX_IMAGE });
    }),
);

// Closes every session this server made, once (bounded: the daemon may be gone); then the
// process may end.
let closing: Promise<void> | null = null;
function closeAll(why: string): Promise<void> {
  closing ??= (async () => {
    const closed = Promise.allSettled([...sessions.values()].map((s) => s.close(why)));
    await Promise.race([closed, new Promise((r) => setTimeout(r, CLOSE_TIMEOUT_MS).unref())]);
    sessions.clear();
    client.close();
  })();
  return closing;
}

// A request over the limit: a tool error for a tool call, a JSON-RPC error for anything else
// (both name the limit); one whose id cannot be seen is reported on stderr only.
function refuse(o: Oversized): JSONRPCMessage | null {
  const what = o.tool ? `the ${o.tool} call` : o.method ? `the ${o.method} request` : "a request";
  const text =
    `${what} is ${o.bytes} bytes; sandgate-mcp takes requests of at most ${MAX_REQUEST_BYTES} bytes ` +
    `(10 MiB). Write a large file in parts (several write_file calls joined with exec: ` +
    `cat part1 part2 > file), or upload it with the CLI (sandgate session upload) or a client library.`;
  if (o.id === null) {
    process.stderr.write(`sandgate-mcp: refused ${text}\n`);
    return null;
  }
  if (o.method === "tools/call") {
    return { jsonrpc: "2.0", id: o.id, result: { isError: true, content: [{ type: "text", text }] } };
  }
  return { jsonrpc: "2.0", id: o.id, error: { code: -32600, message: text } };
}

const quit = (why: string, code = 0) => void closeAll(why).finally(() => process.exit(code));
const failed = (e: unknown) => {
  process.stderr.write(`sandgate-mcp: ${(e as Error)?.stack ?? String(e)}\n`);
  quit(`the MCP server failed: ${(e as Error)?.message ?? String(e)}`, 1);
};
process.on("SIGTERM", () => quit("the MCP server was stopped (SIGTERM)"));
process.on("SIGINT", () => quit("the MCP server was stopped (SIGINT)"));
process.on("uncaughtException", failed);
process.on("unhandledRejection", failed);
const transport = new LineTransport(MAX_REQUEST_BYTES, refuse);
// stdin's end, or a broken stdin or stdout, closes the transport, and with it the server.
server.server.onclose = () => quit("the MCP client disconnected");
transport.onerror = (e) => process.stderr.write(`sandgate-mcp: ${e.message}\n`);
await server.connect(transport);
