// Processes a session runs in the background (Session.start): output read from an offset,
// stdin written, the group signalled, the terminal resized (docs/sessions.md).
import type { Client } from "./client.js";
import type { OutputPiece } from "./exec.js";
import type { Process__Output } from "./generated/sandgate/v1/Process.js";
import type { ProcessOutput__Output } from "./generated/sandgate/v1/ProcessOutput.js";
import type { WriteProcessInputResponse__Output } from "./generated/sandgate/v1/WriteProcessInputResponse.js";

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


/** What Session.start takes besides the command. */
export interface StartOptions {
  env?: Record<string, string>;
  cwd?: string;
  timeoutSeconds?: number;
  stdin?: boolean;
  pty?: { rows: number; cols: number };
}

/** StartProcess: `sh -c` for a string, exact argv for an array. */
export async function startProcess(
  client: Client,
  sessionId: string,
  command: string | string[],
  options: StartOptions,
): Promise<Process> {
  const record = await client.unary<Process__Output>("StartProcess", {
    sessionId,
    ...(Array.isArray(command) ? { argv: command } : { command }),
    env: options.env ?? {},
    cwd: options.cwd ?? "",
    timeout: options.timeoutSeconds ? { seconds: options.timeoutSeconds } : undefined,
    stdin: options.stdin ?? false,
    pty: options.pty,
  });
  return new Process(client, record);
}

/** The session's processes, running and ended, oldest first. */
export async function listProcesses(client: Client, sessionId: string): Promise<Process__Output[]> {
  const res = await client.unary<{ processes: Process__Output[] }>("ListProcesses", { sessionId });
  return res.processes;
}
