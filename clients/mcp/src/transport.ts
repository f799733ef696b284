// The MCP stdio transport with a bound on one request that does not end the server: the SDK's
// StdioServerTransport buffers a request whole and, past its 10 MiB, closes itself, so the
// server died silently and left its sessions to the idle reaper. Here a line over the limit is
// skipped as it streams by (never held whole), and the caller answers it: a tool error naming
// the limit when the request's id can be seen in its first or last bytes, where JSON-RPC
// clients put it.
//
//   const transport = new LineTransport(10 << 20, (o) => refusal(o));
//   await server.connect(transport);
//
// Not thread safe (node has one thread); one instance reads one stdin.
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { deserializeMessage, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

// What is kept of a line over the limit to find its id, method and tool: its start and end.
const HEAD_BYTES = 64 << 10;
const TAIL_BYTES = 4 << 10;

/** A request line over the limit, as far as its kept start and end tell. */
export interface Oversized {
  bytes: number;
  id: string | number | null; // null when neither end shows it
  method: string | null;
  tool: string | null; // params.name of a tools/call
}

const ID = String.raw`"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")`;

// The top-level id of a JSON-RPC message from its start (`{"jsonrpc":"2.0","id":…` or
// `{"id":…`) or its end (`…,"id":7}`, as the SDK's client writes it).
function findId(head: string, tail: string): string | number | null {
  const m =
    new RegExp(String.raw`${ID}\s*\}\s*$`).exec(tail) ??
    new RegExp(String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?${ID}`).exec(head);
  if (!m) return null;
  try {
    return JSON.parse(m[1]) as string | number;
  } catch {
    return null;
  }
}

export function describeOversized(head: Buffer, tail: Buffer, bytes: number): Oversized {
  const h = head.toString("utf8");
  const method = /"method"\s*:\s*"([^"\\]*)"/.exec(h)?.[1] ?? null;
  const params = h.indexOf('"params"');
  const tool =
    method === "tools/call" && params >= 0 ? (/"name"\s*:\s*"([^"\\]*)"/.exec(h.slice(params))?.[1] ?? null) : null;
  return { bytes, id: findId(h, tail.toString("utf8")), method, tool };
}

export class LineTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private pending: Buffer[] = []; // the current line, while it is within the limit
  private size = 0;
  private over: { head: Buffer; tail: Buffer; bytes: number } | null = null;
  private closed = false;

  /** `answer` gets each request over `maxLineBytes` and returns what to send back, if any. */
  constructor(
    readonly maxLineBytes: number,
    private readonly answer: (o: Oversized) => JSONRPCMessage | null,
    private readonly stdin: NodeJS.ReadableStream = process.stdin,
    private readonly stdout: NodeJS.WritableStream = process.stdout,
  ) {}

  async start(): Promise<void> {
    this.stdin.on("data", this.onData);
    this.stdin.on("error", this.onStreamError);
    this.stdout.on("error", this.onStreamError);
    this.stdin.on("end", this.onEnd);
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return;
    const json = serializeMessage(message);
    if (!this.stdout.write(json)) await new Promise<void>((r) => this.stdout.once("drain", () => r()));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stdin.off("data", this.onData);
    this.stdin.off("end", this.onEnd);
    this.stdin.pause();
    this.pending = [];
    this.over = null;
    this.onclose?.();
  }

  private readonly onEnd = () => void this.close();

  // A broken stdin or stdout (the client went away: EPIPE) ends the connection.
  private readonly onStreamError = (e: Error) => {
    this.onerror?.(e);
    void this.close();
  };

  private readonly onData = (chunk: Buffer | string) => {
    const data = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    for (let start = 0; start <= data.length; ) {
      const nl = data.indexOf(10, start);
      this.add(data.subarray(start, nl === -1 ? data.length : nl));
      if (nl === -1) break;
      this.endLine();
      start = nl + 1;
    }
  };

  private add(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.over) {
      this.over.bytes += piece.length;
      if (this.over.head.length < HEAD_BYTES) {
        this.over.head = Buffer.concat([this.over.head, piece.subarray(0, HEAD_BYTES - this.over.head.length)]);
      }
      this.over.tail = Buffer.concat([this.over.tail, piece]).subarray(-TAIL_BYTES);
      return;
    }
    if (this.size + piece.length <= this.maxLineBytes) {
      this.pending.push(piece);
      this.size += piece.length;
      return;
    }
    const line = Buffer.concat([...this.pending, piece]);
    this.over = {
      head: Buffer.from(line.subarray(0, HEAD_BYTES)),
      tail: Buffer.from(line.subarray(-TAIL_BYTES)),
      bytes: line.length,
    };
    this.pending = [];
    this.size = 0;
  }

  private endLine(): void {
    if (this.over) {
      const { head, tail, bytes } = this.over;
      this.over = null;
      const reply = this.answer(describeOversized(head, tail, bytes));
      if (reply) void this.send(reply).catch((e) => this.onerror?.(e as Error));
      return;
    }
    const line = Buffer.concat(this.pending).toString("utf8").replace(/\r$/, "");
    this.pending = [];
    this.size = 0;
    if (line.trim() === "") return;
    let message: JSONRPCMessage;
    try {
      message = deserializeMessage(line);
    } catch (e) {
      this.onerror?.(e as Error);
      return;
    }
    this.onmessage?.(message);
  }
}
