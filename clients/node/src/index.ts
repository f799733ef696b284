// sandgate's TypeScript client: runs, their resumable event logs and artifacts, and kept
// sessions (exec, files, keep-alive), over gRPC (@grpc/grpc-js) with the API's own .proto.
//
//   import { Client } from "sandgate";
//   const client = new Client();                       // SANDGATE_ADDR, SANDGATE_TOKEN
//   const run = await client.runAnalysis("statements.csv");
//   for await (const event of run.events()) console.log(event.seq, event.type);
//   console.log((await run.wait()).status);
//   await run.download("out/");                        // every artifact, sha256 checked
//
//   await client.withSession({}, async (s) => {
//     const { exitCode, stdout } = await s.run("echo hi");
//   });                                                // closed on the way out
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, promises as fs, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { channelTarget } from "./address.js";
import type { ProtoGrpcType } from "./generated/sandgate.js";
import type { Event__Output } from "./generated/sandgate/v1/Event.js";
import type { CommandFinished__Output } from "./generated/sandgate/v1/CommandFinished.js";
import type { ExecResponse__Output } from "./generated/sandgate/v1/ExecResponse.js";
import type { ExposedPort__Output } from "./generated/sandgate/v1/ExposedPort.js";
import type { FileInfo__Output } from "./generated/sandgate/v1/FileInfo.js";
import type { Run__Output } from "./generated/sandgate/v1/Run.js";
import type { SandboxSpec } from "./generated/sandgate/v1/SandboxSpec.js";
import type { UploadFileRequest } from "./generated/sandgate/v1/UploadFileRequest.js";
import type { SandgateClient } from "./generated/sandgate/v1/Sandgate.js";
import type { Session__Output } from "./generated/sandgate/v1/Session.js";
import type { Process__Output } from "./generated/sandgate/v1/Process.js";
import type { ProcessOutput__Output } from "./generated/sandgate/v1/ProcessOutput.js";
import type { WriteProcessInputResponse__Output } from "./generated/sandgate/v1/WriteProcessInputResponse.js";

export { channelTarget, parseAddress } from "./address.js";
export type { SnapshotRecord } from "./snapshots.js";
import * as snapshots from "./snapshots.js";
/** gRPC status codes, to compare with SandgateError.code. */
export { status } from "@grpc/grpc-js";
export type { Event__Output as Event } from "./generated/sandgate/v1/Event.js";
export type { Run__Output as RunRecord } from "./generated/sandgate/v1/Run.js";
export type { Session__Output as SessionRecord } from "./generated/sandgate/v1/Session.js";
export type { FileInfo__Output as FileInfo } from "./generated/sandgate/v1/FileInfo.js";
export type { CommandFinished__Output as CommandFinished } from "./generated/sandgate/v1/CommandFinished.js";
export type { SandboxSpec } from "./generated/sandgate/v1/SandboxSpec.js";
export type { Process__Output as ProcessRecord } from "./generated/sandgate/v1/Process.js";

const DEFAULT_ADDR = "unix:/run/sandgate/sandgated.sock";
const TERMINAL_STATUSES = new Set([
  "RUN_STATUS_SUCCEEDED",
  "RUN_STATUS_FAILED",
  "RUN_STATUS_CANCELLED",
  "RUN_STATUS_TIMED_OUT",
]);

/** A call the daemon (or the connection) answered with an error: its gRPC code and message. */
export class SandgateError extends Error {
  /** The gRPC status code (grpc.status.NOT_FOUND, ...). */
  readonly code: grpc.status;
  /** Its name: "NOT_FOUND", "INVALID_ARGUMENT", ... */
  readonly codeName: string;
  constructor(code: grpc.status, message: string) {
    super(message);
    this.name = "SandgateError";
    this.code = code;
    this.codeName = grpc.status[code] ?? String(code);
  }
}

function toError(e: unknown): Error {
  if (e instanceof SandgateError) return e;
  const s = e as Partial<grpc.ServiceError>;
  if (typeof s?.code === "number") return new SandgateError(s.code, s.details ?? s.message ?? "");
  return e instanceof Error ? e : new Error(String(e));
}

export interface ClientOptions {
  /** `unix:PATH`, `tcp:HOST:PORT` or `HOST:PORT`, several comma separated; default
   * $SANDGATE_ADDR, else unix:/run/sandgate/sandgated.sock. */
  addr?: string;
  /** The bearer token; default $SANDGATE_TOKEN. */
  token?: string;
  /** PEM files for TLS (tcp only): the CA that signed the daemon's certificate, and a client
   * certificate and key for mutual TLS. Defaults: $SANDGATE_TLS_CA, _CERT, _KEY. */
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  /** How long a broken event stream is retried without word from the daemon, ms; default
   * $SANDGATE_RECONNECT_TIMEOUT seconds, else 60 s (docs/client-contract.md). */
  reconnectTimeoutMs?: number;
}

export interface RunOptions {
  playbook?: string;
  agent?: string;
  provider?: string;
  model?: string;
  /** A retry with the same key returns the same run. */
  idempotencyKey?: string;
  labels?: Record<string, string>;
  /** Run in this kept session (no sandbox options then). */
  sessionId?: string;
  sandbox?: SandboxSpec;
  runTimeoutSeconds?: number;
  maxTurns?: number;
}

/** An input given by its contents rather than a path. */
export interface InputContent {
  name: string;
  content: Buffer | string;
}

let protoCache: ProtoGrpcType | undefined;
function proto(): ProtoGrpcType {
  if (!protoCache) {
    const dir = join(dirname(fileURLToPath(import.meta.url)), "..", "proto");
    const def = protoLoader.loadSync("sandgate/v1/sandgate.proto", {
      includeDirs: [dir],
      longs: Number,
      enums: String,
      defaults: true,
      oneofs: true,
    });
    protoCache = grpc.loadPackageDefinition(def) as unknown as ProtoGrpcType;
  }
  return protoCache;
}

function readIfSet(path: string | undefined, what: string): Buffer | null {
  if (!path) return null;
  try {
    return readFileSync(path);
  } catch (e) {
    throw new Error(`${what} ${path}: ${(e as Error).message}`);
  }
}

function isPlainFileName(name: string): boolean {
  return name !== "" && name !== "." && name !== ".." && !name.includes("/") && !name.includes("\0");
}

function sha256Hex(data: Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

// Receives a download (ArtifactChunk or FileChunk stream) into a temporary file next to
// `path`, hashing as it goes, so no file is held in memory whole. keep() renames it into place
// (`path` then holds the whole file), drop() removes it.
async function receive(
  call: AsyncIterable<unknown>,
  path: string,
): Promise<{ actual: string; sent: string; keep: () => Promise<string>; drop: () => Promise<void> }> {
  const tmp = `${path}.${randomBytes(4).toString("hex")}.part`;
  const file = await fs.open(tmp, "wx", 0o600);
  const hash = createHash("sha256");
  let sent = "";
  try {
    for await (const chunk of call as AsyncIterable<{ data: Buffer; sha256: string }>) {
      hash.update(chunk.data);
      await file.write(chunk.data);
      if (chunk.sha256) sent = chunk.sha256;
    }
  } catch (e) {
    await file.close();
    await fs.rm(tmp, { force: true });
    throw toError(e);
  }
  await file.close();
  return {
    actual: hash.digest("hex"),
    sent,
    keep: async () => {
      await fs.rename(tmp, path);
      return path;
    },
    drop: () => fs.rm(tmp, { force: true }),
  };
}

function reconnectWindowMs(): number {
  const seconds = Number(process.env.SANDGATE_RECONNECT_TIMEOUT ?? "");
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 60_000;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export class Client {
  /** The generated stub, for calls this class does not wrap. */
  readonly stub: SandgateClient;
  private readonly token: string;
  readonly reconnectTimeoutMs: number;

  /** Connects lazily: the first call opens the channel. TLS files are read at once; an
   * address or file that is wrong throws here, naming it. */
  constructor(options: ClientOptions = {}) {
    const ca = readIfSet(options.tlsCa ?? process.env.SANDGATE_TLS_CA, "tlsCa");
    const cert = readIfSet(options.tlsCert ?? process.env.SANDGATE_TLS_CERT, "tlsCert");
    const key = readIfSet(options.tlsKey ?? process.env.SANDGATE_TLS_KEY, "tlsKey");
    const tls = { ca, cert, key };
    const addr = options.addr ?? process.env.SANDGATE_ADDR ?? DEFAULT_ADDR;
    const { target, several } = channelTarget(addr);
    const useTls = tls.ca !== null || tls.cert !== null || tls.key !== null;
    if (useTls && target.startsWith("unix:")) throw new Error("TLS is for tcp: addresses only");
    if ((tls.cert === null) !== (tls.key === null)) {
      throw new Error("a client certificate needs both tlsCert and tlsKey");
    }
    const creds = useTls
      ? grpc.credentials.createSsl(tls.ca, tls.key, tls.cert)
      : grpc.credentials.createInsecure();
    const channelOptions: grpc.ChannelOptions = {};
    if (several) {
      channelOptions["grpc.service_config"] = JSON.stringify({
        loadBalancingConfig: [{ round_robin: {} }],
      });
    }
    this.stub = new (proto().sandgate.v1.Sandgate)(target, creds, channelOptions);
    this.token = options.token ?? process.env.SANDGATE_TOKEN ?? "";
    this.reconnectTimeoutMs = options.reconnectTimeoutMs ?? reconnectWindowMs();
  }

  /** The call metadata: the bearer token, when there is one. */
  metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.token) md.set("authorization", `Bearer ${this.token}`);
    return md;
  }

  /** Calls a unary RPC of the stub by name; errors as SandgateError. */
  unary<Res>(method: string, request: object): Promise<Res> {
    return new Promise((resolve, reject) => {
      const fn = (this.stub as unknown as Record<string, Function>)[method];
      fn.call(this.stub, request, this.metadata(), (err: grpc.ServiceError | null, res: Res) =>
        err ? reject(toError(err)) : resolve(res),
      );
    });
  }

  close(): void {
    this.stub.close();
  }

  /** Starts a run on the given inputs (paths, or {name, content}); returns at once. */
  async runAnalysis(
    inputs: string | InputContent | Array<string | InputContent>,
    options: RunOptions = {},
  ): Promise<Run> {
    const list = Array.isArray(inputs) ? inputs : [inputs];
    const files = await Promise.all(
      list.map(async (i) =>
        typeof i === "string"
          ? { name: basename(i), content: await fs.readFile(i) }
          : { name: i.name, content: Buffer.from(i.content) },
      ),
    );
    const record = await this.unary<Run__Output>("RunAnalysis", {
      playbook: options.playbook ?? "",
      agent: options.agent ?? "",
      provider: options.provider ?? "",
      model: options.model ?? "",
      inputs: files,
      sandbox: options.sandbox,
      sessionId: options.sessionId ?? "",
      idempotencyKey: options.idempotencyKey ?? "",
      labels: options.labels ?? {},
      runTimeout: options.runTimeoutSeconds ? { seconds: options.runTimeoutSeconds } : undefined,
      maxTurns: options.maxTurns ?? 0,
    });
    return new Run(this, record);
  }

  /** A handle on an existing run. */
  async getRun(runId: string): Promise<Run> {
    return new Run(this, await this.unary<Run__Output>("GetRun", { runId }));
  }

  /** Your runs, newest first, every page. */
  async listRuns(): Promise<Run__Output[]> {
    const runs: Run__Output[] = [];
    let pageToken = "";
    do {
      const page = await this.unary<{ runs: Run__Output[]; nextPageToken: string }>("ListRuns", {
        pageSize: 500,
        pageToken,
      });
      runs.push(...page.runs);
      pageToken = page.nextPageToken;
    } while (pageToken);
    return runs;
  }

  /** Creates a kept session. Close it (or use withSession). `fromSnapshot` restores a
   * snapshot's workspace into it (with no `sandbox`, in the snapshot's sandbox). */
  async createSession(
    options: {
      provider?: string;
      sandbox?: SandboxSpec;
      idempotencyKey?: string;
      labels?: Record<string, string>;
      fromSnapshot?: string;
    } = {},
  ): Promise<Session> {
    const record = await this.unary<Session__Output>("CreateSession", {
      provider: options.provider ?? "",
      sandbox: options.sandbox,
      idempotencyKey: options.idempotencyKey ?? "",
      labels: options.labels ?? {},
      fromSnapshot: options.fromSnapshot ?? "",
    });
    return new Session(this, record);
  }

  /** A new session with the snapshot's sandbox and workspace, on whichever replica answers. */
  async resume(snapshotId: string): Promise<Session> {
    return this.createSession({ fromSnapshot: snapshotId });
  }

  getSnapshot(snapshotId: string): Promise<snapshots.SnapshotRecord> {
    return snapshots.getSnapshot(this, snapshotId);
  }

  listSnapshots(sessionId = ""): Promise<snapshots.SnapshotRecord[]> {
    return snapshots.listSnapshots(this, sessionId);
  }

  deleteSnapshot(snapshotId: string): Promise<void> {
    return snapshots.deleteSnapshot(this, snapshotId);
  }

  /** Runs `fn` with a new session, kept alive meanwhile and closed afterwards (also when
   * `fn` throws). */
  async withSession<T>(
    options: Parameters<Client["createSession"]>[0],
    fn: (session: Session) => Promise<T>,
  ): Promise<T> {
    const session = await this.createSession(options);
    try {
      return await fn(session);
    } finally {
      await session.close();
    }
  }

  /** Reattaches to an existing session of this tenant by id (NOT_FOUND otherwise): a live
   * Session, as createSession returns, that can exec, read and write files, keep alive and
   * close. `keepAlive` (default true) keeps it alive in the background until close(). */
  async getSession(sessionId: string, options: { keepAlive?: boolean } = {}): Promise<Session> {
    const record = await this.unary<Session__Output>("GetSession", { sessionId });
    return new Session(this, record, options);
  }

  async listSessions(includeClosed = false): Promise<Session__Output[]> {
    const res = await this.unary<{ sessions: Session__Output[] }>("ListSessions", { includeClosed });
    return res.sessions;
  }
}

/** A run: its record as last seen, its event log, its artifacts. */
export class Run {
  constructor(
    readonly client: Client,
    public record: Run__Output,
  ) {}

  get id(): string {
    return this.record.id;
  }
  get status(): string {
    return this.record.status;
  }

  /** Fetches the record again. */
  async refresh(): Promise<Run__Output> {
    this.record = await this.client.unary<Run__Output>("GetRun", { runId: this.id });
    return this.record;
  }

  /**
   * The run's events from after `afterSeq`, in order, each once (heartbeats left out). With
   * `follow` (the default) it goes on until the terminal `run.finished` (none when `afterSeq`
   * is at or past it: it ends at once), reopening a broken stream from the last seq it
   * yielded (the daemon restarted, a replica went away).
   */
  async *events(options: { afterSeq?: number; follow?: boolean } = {}): AsyncGenerator<Event__Output> {
    const follow = options.follow ?? true;
    let last = options.afterSeq ?? 0;
    // docs/client-contract.md: reopen from the last seq until nothing has come from the daemon
    // for the reconnect window, pausing 0.1 s doubling to 1 s.
    let heard = Date.now();
    let pause = 100;
    for (;;) {
      const call = this.client.stub.StreamEvents({ runId: this.id, afterSeq: last, follow }, this.client.metadata());
      try {
        for await (const event of call as AsyncIterable<Event__Output>) {
          heard = Date.now();
          pause = 100;
          if (event.seq === 0 || event.seq <= last) continue; // a heartbeat, or seen already
          last = event.seq;
          yield event;
          if (event.type === "run.finished") return;
        }
        // An OK end: the replay (without follow), or the log's end, which the daemon reports
        // at once when afterSeq is at or past run.finished.
        return;
      } catch (e) {
        const err = toError(e);
        const broken =
          err instanceof SandgateError &&
          (err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.CANCELLED);
        if (!broken || !follow) throw err;
        if (Date.now() - heard >= this.client.reconnectTimeoutMs) {
          throw new SandgateError(
            grpc.status.UNAVAILABLE,
            `run ${this.id}: the event stream broke (${err.message}) and did not resume within ` +
              `${this.client.reconnectTimeoutMs / 1000} s`,
          );
        }
      } finally {
        call.cancel();
      }
      await sleep(pause);
      pause = Math.min(pause * 2, 1000);
    }
  }

  /** Waits for the run to end (following its events) and returns its final record. */
  async wait(): Promise<Run__Output> {
    if (!TERMINAL_STATUSES.has(this.record.status)) {
      for await (const _ of this.events({ afterSeq: 0 })) {
        // drained: the terminal event has been seen
      }
    }
    return this.refresh();
  }

  async cancel(reason = ""): Promise<Run__Output> {
    this.record = await this.client.unary<Run__Output>("CancelRun", { runId: this.id, reason });
    return this.record;
  }

  /**
   * Reads artifact `name` into memory, checked against the sha256 the daemon sends. With
   * `maxBytes`, reading stops there: a larger artifact gives its first `maxBytes` bytes (not
   * checked then; compare the length with its record's sizeBytes).
   */
  async readArtifact(name: string, maxBytes = 0): Promise<Buffer> {
    const call = this.client.stub.DownloadArtifact({ runId: this.id, name }, this.client.metadata());
    const pieces: Buffer[] = [];
    let size = 0;
    let sent = "";
    try {
      for await (const chunk of call as AsyncIterable<{ data: Buffer; sha256: string }>) {
        pieces.push(chunk.data);
        size += chunk.data.length;
        if (chunk.sha256) sent = chunk.sha256;
        if (maxBytes > 0 && size > maxBytes) return Buffer.concat(pieces).subarray(0, maxBytes);
      }
    } catch (e) {
      throw toError(e);
    } finally {
      call.cancel();
    }
    const data = Buffer.concat(pieces);
    if (sent === "" || sha256Hex(data) !== sent) {
      throw new SandgateError(grpc.status.DATA_LOSS, `artifact ${name}: what arrived does not match the sha256 the daemon sent`);
    }
    return data;
  }

  /**
   * Downloads every artifact into `dir` (made if missing), streamed to disk and checked
   * against the sha256 of the run's record and of the last chunk; a file that does not match
   * is not saved and the call fails. Returns the paths written.
   */
  async download(dir: string): Promise<string[]> {
    const record = TERMINAL_STATUSES.has(this.record.status) ? this.record : await this.refresh();
    await fs.mkdir(dir, { recursive: true });
    const written: string[] = [];
    for (const artifact of record.artifacts) {
      if (!isPlainFileName(artifact.name)) {
        throw new Error(`the daemon named an artifact '${artifact.name}'; not a file name`);
      }
      const got = await receive(
        this.client.stub.DownloadArtifact({ runId: this.id, name: artifact.name }, this.client.metadata()),
        join(dir, artifact.name),
      );
      const actual = got.actual;
      if (actual !== artifact.sha256 || (got.sent !== "" && got.sent !== actual)) {
        await got.drop();
        throw new Error(
          `artifact ${artifact.name}: sha256 ${actual} does not match the run's ${artifact.sha256}; not saved`,
        );
      }
      written.push(await got.keep());
    }
    return written;
  }
}

/** One command's output as it arrives. */
export interface OutputPiece {
  stream: "stdout" | "stderr";
  data: Buffer;
}

/** A command running in a session: iterate its output; `result` is how it ended. */
export class Execution implements AsyncIterable<OutputPiece> {
  /** How the command ended (exitCode, signal, timedOut, oomKilled, ...). */
  readonly result: Promise<CommandFinished__Output>;
  private readonly queue: Array<OutputPiece | null> = [];
  private wake: (() => void) | null = null;
  private failure: Error | null = null;

  constructor(private readonly call: grpc.ClientReadableStream<ExecResponse__Output>) {
    let finished: CommandFinished__Output | null = null;
    this.result = new Promise((resolve, reject) => {
      call.on("data", (r: ExecResponse__Output) => {
        if (r.output) {
          const stream = r.output.stream === "STREAM_STDERR" ? "stderr" : "stdout";
          this.push({ stream, data: r.output.data });
        } else if (r.finished) {
          finished = r.finished;
        }
      });
      // Settles once: grpc-js emits "error" (the daemon's status: NOT_FOUND for a missing
      // session, FAILED_PRECONDITION for a closed one) and then "end", which must not
      // replace it.
      let settled = false;
      const settle = (failure: Error | null) => {
        if (settled) return;
        settled = true;
        this.failure = failure;
        this.push(null);
        if (failure) reject(failure);
        else resolve(finished!);
      };
      call.on("error", (e) => settle(toError(e)));
      call.on("end", () =>
        settle(
          finished
            ? null
            : new SandgateError(grpc.status.UNKNOWN, "the command's stream ended without saying how the command finished"),
        ),
      );
    });
    this.result.catch(() => {}); // also reported through iteration
  }

  private push(piece: OutputPiece | null): void {
    this.queue.push(piece);
    this.wake?.();
    this.wake = null;
  }

  /** Stops the command (the daemon kills it). */
  cancel(): void {
    this.call.cancel();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<OutputPiece> {
    for (;;) {
      while (this.queue.length === 0) await new Promise<void>((r) => (this.wake = r));
      const piece = this.queue.shift()!;
      if (piece === null) {
        if (this.failure) throw this.failure;
        return;
      }
      yield piece;
    }
  }
}

/** How a process ended, with the output its wait() read. */
export interface ProcessResult {
  /** -1 when a signal ended it (`record.finished.signal` says which). */
  exitCode: number;
  stdout: string;
  stderr: string;
  record: Process__Output;
}

/**
 * A process of a session you talk to (Session.start): its output is read from `offset`
 * (every read advances it; `droppedBytes` counts what the daemon's bounded buffer no longer
 * held), its stdin written, its group signalled, its terminal resized.
 */
export class Process {
  offset = 0;
  droppedBytes = 0;

  constructor(
    readonly client: Client,
    public record: Process__Output,
  ) {}

  get id(): string {
    return this.record.id;
  }
  get sessionId(): string {
    return this.record.sessionId;
  }
  get running(): boolean {
    return this.record.state === "STATE_RUNNING";
  }

  /** The output after `offset`, waiting up to `waitSeconds` for some while it runs; with
   * `untilExit`, for its end (or maxBytes of output) instead, as an agent's yieldTimeMs. Empty
   * once it ended and all was read. */
  async read(options: { waitSeconds?: number; maxBytes?: number; untilExit?: boolean } = {}): Promise<OutputPiece[]> {
    const out = await this.client.unary<ProcessOutput__Output>("ReadProcessOutput", {
      sessionId: this.sessionId,
      processId: this.id,
      offset: this.offset,
      maxBytes: options.maxBytes ?? 0,
      untilExit: options.untilExit ?? false,
      wait: options.waitSeconds ? { seconds: Math.floor(options.waitSeconds), nanos: Math.round((options.waitSeconds % 1) * 1e9) } : undefined,
    });
    this.record = out.process!;
    this.offset = Number(out.nextOffset);
    this.droppedBytes += Number(out.droppedBytes);
    return out.chunks.map((c) => ({ stream: c.stream === "STREAM_STDERR" ? "stderr" : "stdout", data: c.data }));
  }

  private async input(fields: object): Promise<WriteProcessInputResponse__Output> {
    const res = await this.client.unary<WriteProcessInputResponse__Output>("WriteProcessInput", {
      sessionId: this.sessionId,
      processId: this.id,
      ...fields,
    });
    this.record = res.process!;
    return res;
  }

  /** Writes all of `data` to its stdin (a terminal takes raw bytes: "\x03" is Ctrl-C). */
  async write(data: Buffer | string): Promise<void> {
    let rest = Buffer.from(data);
    while (rest.length > 0) {
      const res = await this.input({ data: rest.subarray(0, 1 << 20) });
      rest = rest.subarray(Number(res.writtenBytes));
    }
  }
  /** EOF on its stdin (on a terminal: ^D). */
  async closeStdin(): Promise<void> {
    await this.input({ closeStdin: true });
  }
  /** SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGKILL, SIGUSR1 or SIGUSR2 to its process group. */
  async signal(name = "SIGTERM"): Promise<void> {
    await this.input({ signal: name });
  }
  async kill(): Promise<void> {
    await this.signal("SIGKILL");
  }
  /** The size of its terminal (a process started with `pty`). */
  async resize(rows: number, cols: number): Promise<void> {
    await this.input({ resize: { rows, cols } });
  }
  /** Reads the rest of its output until it ended. */
  async wait(): Promise<ProcessResult> {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    for (;;) {
      const pieces = await this.read({ waitSeconds: 10 });
      for (const p of pieces) (p.stream === "stdout" ? out : err).push(p.data);
      if (!this.running && pieces.length === 0) break;
    }
    return {
      exitCode: this.record.finished ? this.record.finished.exitCode : -1,
      stdout: Buffer.concat(out).toString(),
      stderr: Buffer.concat(err).toString(),
      record: this.record,
    };
  }
}

/** A kept session. While it is open here, a keep-alive runs in the background. */
export class Session {
  private keeper: NodeJS.Timeout | null = null;
  private closed = false;

  /** `keepAlive`: whether this handle keeps the session alive in the background (a handle on
   * a session someone else keeps alive need not). */
  constructor(
    readonly client: Client,
    public record: Session__Output,
    options: { keepAlive?: boolean } = {},
  ) {
    const idle = Number(record.idleTimeout?.seconds ?? 0);
    // A third of the idle timeout: two keep-alives may be lost before the session idles out.
    if (idle > 0 && (options.keepAlive ?? true) && record.status === "SESSION_STATUS_ACTIVE") {
      this.keeper = setInterval(() => void this.keepAlive().catch(() => {}), (idle * 1000) / 3);
      this.keeper.unref();
    }
  }

  get id(): string {
    return this.record.id;
  }

  /** Starts a command (`sh -c` for a string, exact argv for an array). */
  exec(
    command: string | string[],
    options: { env?: Record<string, string>; cwd?: string; timeoutSeconds?: number } = {},
  ): Execution {
    const request = {
      sessionId: this.id,
      ...(Array.isArray(command) ? { argv: command } : { command }),
      env: options.env ?? {},
      cwd: options.cwd ?? "",
      timeout: options.timeoutSeconds ? { seconds: options.timeoutSeconds } : undefined,
    };
    return new Execution(this.client.stub.Exec(request, this.client.metadata()));
  }

  /** Starts a process in the background and returns it at once: `stdin` keeps its stdin open
   * for write(), `pty` runs it on a terminal of that size. No timeout unless given: it runs
   * until it ends, is killed, or the session ends; while it runs the session does not idle. */
  async start(
    command: string | string[],
    options: {
      env?: Record<string, string>;
      cwd?: string;
      timeoutSeconds?: number;
      stdin?: boolean;
      pty?: { rows: number; cols: number };
    } = {},
  ): Promise<Process> {
    const record = await this.client.unary<Process__Output>("StartProcess", {
      sessionId: this.id,
      ...(Array.isArray(command) ? { argv: command } : { command }),
      env: options.env ?? {},
      cwd: options.cwd ?? "",
      timeout: options.timeoutSeconds ? { seconds: options.timeoutSeconds } : undefined,
      stdin: options.stdin ?? false,
      pty: options.pty,
    });
    return new Process(this.client, record);
  }

  /** The session's processes, running and ended, oldest first. */
  async processes(): Promise<Process__Output[]> {
    const res = await this.client.unary<{ processes: Process__Output[] }>("ListProcesses", { sessionId: this.id });
    return res.processes;
  }

  /** A handle on one of its processes, by id. */
  async process(processId: string): Promise<Process> {
    const record = (await this.processes()).find((p) => p.id === processId);
    if (!record) throw new SandgateError(grpc.status.NOT_FOUND, `process not found: ${processId}`);
    return new Process(this.client, record);
  }

  /** Runs a command to its end: its exit code and its whole stdout and stderr. */
  async run(
    command: string | string[],
    options: Parameters<Session["exec"]>[1] = {},
  ): Promise<{ exitCode: number; stdout: string; stderr: string; finished: CommandFinished__Output }> {
    const execution = this.exec(command, options);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    for await (const piece of execution) (piece.stream === "stdout" ? out : err).push(piece.data);
    const finished = await execution.result;
    return {
      exitCode: finished.exitCode,
      stdout: Buffer.concat(out).toString(),
      stderr: Buffer.concat(err).toString(),
      finished,
    };
  }

  /** Uploads a local file to `remote` (default: its name) in the workspace; the daemon checks
   * its size and sha256 before the file appears. */
  async upload(local: string, remote = basename(local), mode = 0): Promise<FileInfo__Output> {
    // Two passes over the file, never all of it in memory: its size and sha256 for the
    // header, then the bytes.
    const hash = createHash("sha256");
    let size = 0;
    for await (const piece of createReadStream(local)) {
      hash.update(piece as Buffer);
      size += (piece as Buffer).length;
    }
    return this.send(remote, mode, size, hash.digest("hex"), createReadStream(local, { highWaterMark: 1 << 20 }));
  }

  /** Writes `data` to `remote` in the workspace (made or replaced whole), like upload. */
  async write(remote: string, data: Buffer | string, mode = 0): Promise<FileInfo__Output> {
    const bytes = Buffer.from(data);
    const pieces = [];
    for (let at = 0; at < bytes.length; at += 1 << 20) pieces.push(bytes.subarray(at, at + (1 << 20)));
    return this.send(remote, mode, bytes.length, sha256Hex(bytes), pieces);
  }

  // UploadFile: the header with the size and sha256 the daemon checks, then the pieces, as
  // fast as the stream takes them.
  private async send(
    remote: string,
    mode: number,
    size: number,
    sha256: string,
    pieces: AsyncIterable<unknown> | Iterable<unknown>,
  ): Promise<FileInfo__Output> {
    let call!: grpc.ClientWritableStream<UploadFileRequest>;
    const answer = new Promise<FileInfo__Output>((resolve, reject) => {
      call = this.client.stub.UploadFile(this.client.metadata(), (e, info) =>
        e ? reject(toError(e)) : resolve(info!),
      );
    });
    call.write({ header: { sessionId: this.id, path: remote, mode, sizeBytes: size, sha256 } });
    try {
      for await (const piece of pieces) {
        if (!call.write({ data: piece as Buffer })) await new Promise((r) => call.once("drain", r));
      }
    } catch (e) {
      call.cancel();
      await answer.catch(() => {});
      throw e;
    }
    call.end();
    return answer;
  }

  /** Reads a workspace file into memory (at most `maxBytes`, default the daemon's limit),
   * checked against the sha256 the daemon sends. */
  async read(remote: string, maxBytes = 0): Promise<Buffer> {
    const pieces: Buffer[] = [];
    let sent = "";
    const call = this.client.stub.DownloadFile({ sessionId: this.id, path: remote, maxBytes }, this.client.metadata());
    try {
      for await (const chunk of call as AsyncIterable<{ data: Buffer; sha256: string }>) {
        pieces.push(chunk.data);
        if (chunk.sha256) sent = chunk.sha256;
      }
    } catch (e) {
      throw toError(e);
    }
    const data = Buffer.concat(pieces);
    if (sent === "" || sha256Hex(data) !== sent) {
      throw new Error(`${remote}: what arrived does not match the sha256 the daemon sent`);
    }
    return data;
  }

  /** Downloads a workspace file to `local` (default: its name here), checked against the
   * sha256 the daemon sends; nothing is left at `local` when it does not match. */
  async download(remote: string, local = basename(remote)): Promise<string> {
    const got = await receive(
      this.client.stub.DownloadFile({ sessionId: this.id, path: remote }, this.client.metadata()),
      local,
    );
    if (got.sent === "" || got.actual !== got.sent) {
      await got.drop();
      throw new Error(`${remote}: the download does not match the sha256 the daemon sent; not saved`);
    }
    return got.keep();
  }

  /** Lists the workspace (or `dir` in it); paths are relative to the workspace. */
  async ls(dir = ""): Promise<FileInfo__Output[]> {
    const res = await this.client.unary<{ files: FileInfo__Output[] }>("ListFiles", { sessionId: this.id, dir });
    return res.files;
  }

  async keepAlive(): Promise<Session__Output> {
    this.record = await this.client.unary<Session__Output>("KeepAlive", { sessionId: this.id });
    return this.record;
  }

  async refresh(): Promise<Session__Output> {
    this.record = await this.client.unary<Session__Output>("GetSession", { sessionId: this.id });
    return this.record;
  }

  /** What `path` is ("" = the workspace); a link is not followed. */
  async stat(path = ""): Promise<FileInfo__Output> {
    return this.client.unary<FileInfo__Output>("StatFile", { sessionId: this.id, path });
  }

  /** Deletes a file, a link or an empty directory; `recursive`: a whole directory. */
  async remove(path: string, options: { recursive?: boolean } = {}): Promise<void> {
    await this.client.unary("DeleteFile", { sessionId: this.id, path, recursive: options.recursive ?? false });
  }

  /** Renames within the workspace (missing parents made; an existing target is ALREADY_EXISTS
   * unless `overwrite`); what `to` is now. */
  async rename(from: string, to: string, options: { overwrite?: boolean } = {}): Promise<FileInfo__Output> {
    return this.client.unary<FileInfo__Output>("RenameFile", { sessionId: this.id, from, to, overwrite: options.overwrite ?? false });
  }

  /** Makes a directory (`parents`: missing parents too, and an existing one is fine). */
  async mkdir(path: string, options: { parents?: boolean } = {}): Promise<FileInfo__Output> {
    return this.client.unary<FileInfo__Output>("MakeDirectory", { sessionId: this.id, path, parents: options.parents ?? false });
  }

  /** Makes `port`, which the session's code listens on at 127.0.0.1 in the sandbox, reachable
   * through the daemon's REST port (HTTP and WebSocket): `url` with this client's token; with
   * `signed`, also `signedUrl`, which needs no token until `signedExpiresAt` (`ttlSeconds`:
   * default the daemon's, 1 h). */
  async expose(port: number, options: { signed?: boolean; ttlSeconds?: number } = {}): Promise<ExposedPort__Output> {
    return this.client.unary<ExposedPort__Output>("ExposePort", {
      sessionId: this.id,
      port,
      signedUrl: options.signed ?? false,
      signedTtl: options.ttlSeconds ? { seconds: options.ttlSeconds } : undefined,
    });
  }

  /** Closes an exposed port: its URLs and open connections end. */
  async unexpose(port: number): Promise<void> {
    await this.client.unary("UnexposePort", { sessionId: this.id, port });
  }

  /** The session's exposed ports, by port. */
  async ports(): Promise<ExposedPort__Output[]> {
    const res = await this.client.unary<{ ports: ExposedPort__Output[] }>("ListPorts", { sessionId: this.id });
    return res.ports;
  }

  /** Saves the workspace (files, directories, links, modes) as a snapshot any replica
   * restores (Client.resume). */
  snapshot(options: { labels?: Record<string, string> } = {}): Promise<snapshots.SnapshotRecord> {
    return snapshots.takeSnapshot(this.client, this.id, options);
  }

  /** snapshot(), then the session is closed; resume it with Client.resume(snapshot.id). */
  async pause(): Promise<snapshots.SnapshotRecord> {
    if (this.keeper) clearInterval(this.keeper);
    this.keeper = null;
    const snapshot = await snapshots.takeSnapshot(this.client, this.id, { close: true });
    this.closed = true;
    await this.refresh();
    return snapshot;
  }

  /** Closes the session and deletes its sandbox. Idempotent. */
  async close(reason = ""): Promise<Session__Output> {
    if (this.keeper) clearInterval(this.keeper);
    this.keeper = null;
    if (!this.closed) {
      this.record = await this.client.unary<Session__Output>("CloseSession", { sessionId: this.id, reason });
      this.closed = true;
    }
    return this.record;
  }
}
