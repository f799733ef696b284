// Kept sessions: a sandbox that stays for several commands, its files, processes, exposed
// ports and snapshots. While a handle is open here it keeps the session alive.
//
//   await client.withSession({}, async (s) => {
//     const { exitCode, stdout } = await s.run("echo hi");
//     await s.write("notes.md", "# notes\n");
//   });                                                // closed on the way out
import * as grpc from "@grpc/grpc-js";
import { basename } from "node:path";

import type { Client } from "./client.js";
import { SandgateError } from "./errors.js";
import { Execution } from "./exec.js";
import * as files from "./files.js";
import type { CommandFinished__Output } from "./generated/sandgate/v1/CommandFinished.js";
import type { FileInfo__Output } from "./generated/sandgate/v1/FileInfo.js";
import type { Process__Output } from "./generated/sandgate/v1/Process.js";
import type { Session__Output } from "./generated/sandgate/v1/Session.js";
import type { SessionUsage__Output } from "./generated/sandgate/v1/SessionUsage.js";
import { exposePort, listPorts, unexposePort, type ExposedPort } from "./ports.js";
import { listProcesses, Process, startProcess, type StartOptions } from "./processes.js";
import * as snapshots from "./snapshots.js";

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
  start(command: string | string[], options: StartOptions = {}): Promise<Process> {
    return startProcess(this.client, this.id, command, options);
  }

  /** The session's processes, running and ended, oldest first. */
  processes(): Promise<Process__Output[]> {
    return listProcesses(this.client, this.id);
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
  upload(local: string, remote = basename(local), mode = 0): Promise<FileInfo__Output> {
    return files.uploadFile(this.client, this.id, local, remote, mode);
  }

  /** Writes `data` to `remote` in the workspace (made or replaced whole), like upload. */
  write(remote: string, data: Buffer | string, mode = 0): Promise<FileInfo__Output> {
    return files.writeFile(this.client, this.id, remote, data, mode);
  }

  /** Reads a workspace file into memory (at most `maxBytes`, default the daemon's limit),
   * checked against the sha256 the daemon sends. */
  read(remote: string, maxBytes = 0): Promise<Buffer> {
    return files.readFile(this.client, this.id, remote, maxBytes);
  }

  /** Downloads a workspace file to `local` (default: its name here), checked against the
   * sha256 the daemon sends; nothing is left at `local` when it does not match. */
  download(remote: string, local = basename(remote)): Promise<string> {
    return files.downloadFile(this.client, this.id, remote, local);
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
  expose(port: number, options: { signed?: boolean; ttlSeconds?: number } = {}): Promise<ExposedPort> {
    return exposePort(this.client, this.id, port, options);
  }

  /** Closes an exposed port: its URLs and open connections end. */
  unexpose(port: number): Promise<void> {
    return unexposePort(this.client, this.id, port);
  }

  /** The session's exposed ports, by port. */
  ports(): Promise<ExposedPort[]> {
    return listPorts(this.client, this.id);
  }

  /** What the session uses now, from its cgroups: memoryBytes (and memoryLimitBytes, 0 for
   * none), cpuTime since it started, processes, and in `unmeasured` the figures this host
   * cannot give (they are 0) and why. The CPU share is the growth of cpuTime between two calls
   * over the time between their sampledAt. */
  usage(): Promise<SessionUsage__Output> {
    return this.client.unary<SessionUsage__Output>("GetSessionUsage", { sessionId: this.id });
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
