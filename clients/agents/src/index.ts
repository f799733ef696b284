// SandgateSandboxClient: a sandgate session as the sandbox of the OpenAI Agents SDK's
// SandboxAgent. Commands run as sandgate processes (so a command still running after its
// yield is a process the model talks to with write_stdin), files go through the daemon's file
// calls, and the session is closed exactly once when the SDK lets it go.
import { readdir } from "node:fs/promises";
import { posix } from "node:path";
import { join } from "node:path";

import { applyDiff, type Editor } from "@openai/agents-core";
import {
  Manifest,
  SandboxLifecycleError,
  SandboxProviderError,
  SandboxUnsupportedFeatureError,
  SandboxWorkspaceReadNotFoundError,
  normalizeSandboxClientCreateArgs,
  type Entry,
  type ExecCommandArgs,
  type ListDirectoryArgs,
  type MaterializeEntryArgs,
  type ReadFileArgs,
  type SandboxClient,
  type SandboxClientCreateArgs,
  type SandboxDirectoryEntry,
  type SandboxExecResult,
  type SandboxSession,
  type SandboxSessionState,
  type ViewImageArgs,
  type WriteStdinArgs,
} from "@openai/agents-core/sandbox";
import {
  MAX_VIEW_IMAGE_BYTES,
  assertViewImageByteLength,
  deserializeManifest,
  elapsedSeconds,
  formatExecResponse,
  imageOutputFromBytes,
  serializeManifest,
  truncateOutput,
} from "@openai/agents-core/sandbox/internal";
import {
  Client,
  SandgateError,
  status,
  type ClientOptions,
  type OutputPiece,
  type Process,
  type Session,
} from "sandgate";

import { snapshotOfReference, snapshotReference } from "./workspace_ref.js";

export type NetworkMode = "disabled" | "restricted" | "enabled";

/** What a sandgate session is made with. Everything is optional: the daemon's defaults. */
export interface SandgateSandboxOptions {
  [key: string]: unknown;
  /** The sandbox provider of the daemon ("local" by default). */
  provider?: string;
  /** disabled: loopback only; restricted: to `allowedDomains` only, through the daemon's
   * proxy; enabled: to any public destination, through the proxy. */
  network?: NetworkMode;
  /** For `restricted`: exact host names and `*.suffix` patterns. */
  allowedDomains?: string[];
  memoryBytes?: number;
  maxProcesses?: number;
  workspaceBytes?: number;
  /** Each command is killed after this long (daemon default otherwise). */
  commandTimeoutSeconds?: number;
  /** The session is reaped after this long with nothing in flight; this client keeps it
   * alive while the SDK holds it. */
  idleTimeoutSeconds?: number;
  maxLifetimeSeconds?: number;
  /** Given to every command, after the manifest's environment. */
  env?: Record<string, string>;
  /** `sh -c` each, in order, after the manifest's entries are in place; one that fails
   * fails create (and the session is closed). */
  setupCommands?: string[];
  labels?: Record<string, string>;
  /** How the sandbox is walled off: "namespaces" or "gvisor" (the daemon's
   * docs/isolation-levels.md); the tenant's default, else the daemon's, when left out. */
  isolation?: string;
  /** The sandbox's root file system: a sandgate image the daemon built from Debian packages
   * (`sandgate image build NAME --packages …`, docs/images.md), or "host" (the default). An
   * image the daemon does not have fails create, naming it. */
  image?: string;
}

const OPTION_KEYS = new Set([
  "provider",
  "network",
  "allowedDomains",
  "memoryBytes",
  "maxProcesses",
  "workspaceBytes",
  "commandTimeoutSeconds",
  "idleTimeoutSeconds",
  "maxLifetimeSeconds",
  "env",
  "setupCommands",
  "labels",
  "isolation",
  "image",
]);

export interface SandgateSandboxSessionState extends SandboxSessionState {
  sessionId: string;
  /** Where the daemon keeps the workspace inside the sandbox (the manifest root links there). */
  workdir: string;
}

const DEFAULT_EXEC_YIELD_MS = 10_000;
const DEFAULT_WRITE_STDIN_YIELD_MS = 250;
// What one answer holds of a command's output before it is truncated for the model, as the
// local sandbox.
const MAX_HELD_OUTPUT_BYTES = 1024 * 1024;
// The daemon's longest wait of one read (processes.max_read_wait_seconds, default 30).
const MAX_READ_WAIT_SECONDS = 30;
// The most one read asks for (the daemon's limit): fewer round trips behind a fast writer.
const MAX_READ_BYTES = 1024 * 1024;
const MAX_EDIT_BYTES = 10 * 1024 * 1024;
// One line per entry of directory $1, hidden ones too: its type (d, f, o), a slash, its name.
const LIST_DIR_SCRIPT = [
  'cd "$1" || exit',
  'for f in * .*; do case "$f" in .|..) continue;; esac',
  '  [ -e "$f" ] || [ -L "$f" ] || continue',
  '  if [ -d "$f" ]; then echo "d/$f"; elif [ -f "$f" ]; then echo "f/$f"; else echo "o/$f"; fi',
  "done",
].join("\n");

/**
 * The sandbox client: `new SandgateSandboxClient({ addr, token })` (or `{ client }` with a
 * sandgate Client of your own), then `run(agent, input, { sandbox: { client, options } })`.
 */
export class SandgateSandboxClient implements SandboxClient<SandgateSandboxOptions, SandgateSandboxSessionState> {
  readonly backendId = "sandgate";
  readonly client: Client;
  private readonly ownsClient: boolean;
  // Where the daemon keeps a session's workspace (its sessions' `workdir`), as last seen.
  private workdir = DAEMON_WORKDIR;

  constructor(options: ClientOptions & { client?: Client } = {}) {
    this.ownsClient = !options.client;
    this.client = options.client ?? new Client(options);
  }

  /** Closes the connection to the daemon (when this client made it). */
  close(): void {
    if (this.ownsClient) this.client.close();
  }

  async create(
    args?: SandboxClientCreateArgs<SandgateSandboxOptions> | Manifest,
    manifestOptions?: SandgateSandboxOptions,
  ): Promise<SandgateSandboxSession> {
    const created = normalizeSandboxClientCreateArgs(args, manifestOptions);
    const manifest = created.manifest;
    const options = created.options ?? {};
    refuseUnsupported(manifest, options, created.snapshot);
    const environment = { ...(await manifest.resolveEnvironment()), ...(options.env ?? {}) };
    const session = await this.client.createSession({
      provider: options.provider,
      labels: options.labels,
      sandbox: {
        memoryBytes: options.memoryBytes ?? 0,
        maxProcesses: options.maxProcesses ?? 0,
        workspaceBytes: options.workspaceBytes ?? 0,
        network: networkPolicy(options),
        env: environment,
        commandTimeout: seconds(options.commandTimeoutSeconds),
        idleTimeout: seconds(options.idleTimeoutSeconds),
        maxLifetime: seconds(options.maxLifetimeSeconds),
        isolation: options.isolation ?? "",
        image: options.image ?? "",
      },
    });
    const workdir = (this.workdir = session.record.workdir);
    const sandbox = new SandgateSandboxSession(
      { manifest: rooted(manifest, workdir), environment, sessionId: session.id, workdir, workspaceReady: true },
      session,
    );
    try {
      await sandbox.applyManifest(sandbox.state.manifest);
      for (const command of options.setupCommands ?? []) {
        const result = await session.run(command);
        if (result.exitCode !== 0 || result.finished.timedOut || result.finished.signal) {
          throw new SandboxLifecycleError(
            `setup command ${JSON.stringify(command)} failed (exit ${result.exitCode}): ${result.stderr.slice(-2000)}`,
            { sessionId: session.id },
          );
        }
      }
    } catch (error) {
      await sandbox.close().catch(() => {});
      throw error;
    }
    return sandbox;
  }

  /** The manifest a paused run is resumed with, rooted where its session keeps the workspace. */
  resolveTrustedManifestForResume(manifest: Manifest): Manifest {
    return manifest.root === SDK_DEFAULT_ROOT ? rooted(manifest, this.workdir) : manifest;
  }

  /** Reattaches to the session by id, on whichever replica holds it. A session that ended
   * after a snapshot of it was taken (persistWorkspace, a pause; its replica may be gone) is
   * resumed from its newest snapshot, in a new session of its sandbox. */
  async resume(state: SandgateSandboxSessionState): Promise<SandgateSandboxSession> {
    const session = await this.client.getSession(state.sessionId).catch((error) => {
      throw providerError(`cannot resume sandgate session ${state.sessionId}`, error);
    });
    if (session.record.status !== "SESSION_STATUS_ACTIVE") {
      await session.close().catch(() => {});
      const [newest] = await this.client.listSnapshots(state.sessionId).catch(() => []);
      if (newest) {
        const restored = await restoreSession(session, newest.id);
        return new SandgateSandboxSession({ ...state, sessionId: restored.id, workdir: restored.record.workdir }, restored);
      }
      throw new SandboxProviderError(
        `sandgate session ${state.sessionId} is no longer active (${session.record.status}: ${session.record.statusReason})`,
        { sessionId: state.sessionId },
      );
    }
    return new SandgateSandboxSession(state, session);
  }

  /** What a paused run keeps: the session id and the manifest. Not the environment: the
   * session holds it already, and a saved run state is no place for the secrets it may carry. */
  async serializeSessionState(state: SandgateSandboxSessionState): Promise<Record<string, unknown>> {
    return {
      manifest: serializeManifest(state.manifest),
      sessionId: state.sessionId,
      workdir: state.workdir,
      workspaceReady: state.workspaceReady ?? true,
    };
  }

  async deserializeSessionState(state: Record<string, unknown>): Promise<SandgateSandboxSessionState> {
    if (typeof state.sessionId !== "string" || state.sessionId === "") {
      throw new SandboxProviderError("sandgate session state has no sessionId", {});
    }
    return {
      manifest: deserializeManifest(state.manifest as Record<string, unknown> | undefined),
      environment: {},
      sessionId: state.sessionId,
      workdir: typeof state.workdir === "string" ? state.workdir : DAEMON_WORKDIR,
      workspaceReady: state.workspaceReady !== false,
    };
  }

  /** Closes the session a state names (the runner's cleanup of a session it no longer holds). */
  async delete(state: SandgateSandboxSessionState): Promise<void> {
    const session = await this.client.getSession(state.sessionId, { keepAlive: false }).catch(() => null);
    await session?.close("deleted by the Agents SDK");
  }
}

/** What one answer read of a process: its output, and how much of it the daemon had dropped. */
interface Collected {
  stdout: string;
  stderr: string;
  output: string;
  /** Bytes read but not kept (older than what the answer holds). */
  trimmed: number;
  /** Bytes the daemon no longer held when they were asked for. */
  dropped: number;
}

/** One process the model started that was still running at its yield. */
interface Running {
  process: Process;
  tty: boolean;
}

export class SandgateSandboxSession implements SandboxSession<SandgateSandboxSessionState> {
  private readonly processes = new Map<number, Running>();
  private nextProcessId = 1;
  private closing: Promise<void> | null = null;

  constructor(
    public state: SandgateSandboxSessionState,
    // Replaced by hydrateWorkspace: the session restored from the snapshot.
    public session: Session,
  ) {}

  get root(): string {
    return this.state.manifest.root;
  }

  supportsPty(): boolean {
    return true;
  }

  /** The SDK asks before start(); the session runs from create on. */
  async running(): Promise<boolean> {
    if (this.closing) return false;
    const record = await this.session.refresh().catch(() => null);
    return record?.status === "SESSION_STATUS_ACTIVE";
  }

  // ---- shell ----

  async execCommand(args: ExecCommandArgs): Promise<string> {
    return formatExecResponse(await this.exec(args));
  }

  async exec(args: ExecCommandArgs): Promise<SandboxExecResult> {
    const start = Date.now();
    const shell = args.shell || "/bin/sh";
    const argv = [shell, args.login === false ? "-c" : "-lc", args.cmd];
    const cwd = args.workdir ? this.resolve(args.workdir) : this.root;
    let process: Process;
    try {
      process = await this.session.start(["/bin/sh", "-c", 'cd "$1" && shift && exec "$@"', "cd", cwd, ...argv], {
        stdin: true,
        timeoutSeconds: Number(this.session.record.sandbox?.commandTimeout?.seconds ?? 0) || undefined,
        pty: args.tty ? { rows: 24, cols: 80 } : undefined,
      });
    } catch (error) {
      this.assertAlive(error);
      if (error instanceof SandgateError && error.code === status.FAILED_PRECONDITION && !(await this.running())) {
        throw providerError(`sandgate session ${this.state.sessionId} has ended`, error);
      }
      return {
        output: `sandgate could not start the command: ${message(error)}`,
        stdout: "",
        stderr: "",
        wallTimeSeconds: elapsedSeconds(start),
        exitCode: 1,
      };
    }
    const collected = await this.collect(process, args.yieldTimeMs ?? DEFAULT_EXEC_YIELD_MS);
    return this.answer(process, collected, start, args.maxOutputTokens, () => {
      const id = this.nextProcessId++;
      this.processes.set(id, { process, tty: Boolean(args.tty) });
      return id;
    });
  }

  async writeStdin(args: WriteStdinArgs): Promise<string> {
    const start = Date.now();
    const entry = this.processes.get(args.sessionId);
    if (!entry) {
      return formatExecResponse({
        output: `write_stdin failed: session not found: ${args.sessionId}`,
        wallTimeSeconds: 0,
        exitCode: 1,
      });
    }
    const { process, tty } = entry;
    let chars = args.chars ?? "";
    try {
      // Without a terminal there is nothing to turn ^C into SIGINT: send it, as the local sandbox.
      if (!tty && chars.includes("\u0003")) {
        await process.signal("SIGINT");
        chars = chars.split("\u0003").join("");
      }
      if (chars.length > 0 && process.running) await process.write(chars);
    } catch (error) {
      this.assertAlive(error);
      if (!(error instanceof SandgateError && error.code === status.FAILED_PRECONDITION)) throw error;
      // It ended meanwhile: its output and exit status follow.
    }
    const collected = await this.collect(process, args.yieldTimeMs ?? DEFAULT_WRITE_STDIN_YIELD_MS);
    const text = this.answer(process, collected, start, args.maxOutputTokens, () => args.sessionId);
    if (!process.running) this.processes.delete(args.sessionId);
    return formatExecResponse(text);
  }

  // Reads a process's output until it ended or `yieldMs` passed; of more than the model's
  // answer holds, the newest part is kept (the end of a command says most), as the local sandbox.
  private async collect(process: Process, yieldMs: number): Promise<Collected> {
    const deadline = Date.now() + yieldMs;
    const droppedBefore = process.droppedBytes;
    const kept: OutputPiece[] = [];
    let held = 0;
    let trimmed = 0;
    for (;;) {
      const left = (deadline - Date.now()) / 1000;
      const pieces = await process.read({
        waitSeconds: Math.min(Math.max(left, 0), MAX_READ_WAIT_SECONDS),
        maxBytes: MAX_READ_BYTES,
      });
      for (const piece of pieces) {
        kept.push(piece);
        held += piece.data.length;
        while (held > MAX_HELD_OUTPUT_BYTES && kept.length > 1) {
          const old = kept.shift()!;
          held -= old.data.length;
          trimmed += old.data.length;
        }
      }
      if (!process.running && pieces.length === 0) break;
      if (process.running && Date.now() >= deadline) break;
    }
    const text = (stream?: string) =>
      Buffer.concat(kept.filter((p) => !stream || p.stream === stream).map((p) => p.data)).toString("utf8");
    return {
      stdout: text("stdout"),
      stderr: text("stderr"),
      output: text(),
      trimmed,
      dropped: process.droppedBytes - droppedBefore,
    };
  }

  private answer(
    process: Process,
    collected: Collected,
    start: number,
    maxOutputTokens: number | undefined,
    keep: () => number,
  ): SandboxExecResult {
    let output = collected.output;
    let exitCode: number | null = null;
    let sessionId: number | undefined;
    if (process.running) {
      sessionId = keep();
    } else {
      const finished = process.record.finished;
      if (finished?.timedOut) output += "\n[sandgate: the command was killed at its time limit]";
      if (finished?.oomKilled) output += "\n[sandgate: the command was killed: out of memory]";
      if (process.record.error) output += `\n[sandgate: ${process.record.error}]`;
      exitCode = finished ? (finished.signal ? 128 + finished.signal : finished.exitCode) : 1;
    }
    if (collected.trimmed > 0) {
      output = `[...${collected.trimmed} bytes truncated from process output...]\n${output}`;
    }
    if (collected.dropped > 0) {
      output = `[sandgate: ${collected.dropped} bytes of earlier output were no longer held]\n${output}`;
    }
    const truncated = truncateOutput(output, maxOutputTokens);
    return {
      output: truncated.text,
      stdout: collected.stdout,
      stderr: collected.stderr,
      wallTimeSeconds: elapsedSeconds(start),
      exitCode,
      ...(sessionId !== undefined ? { sessionId } : {}),
      ...(truncated.originalTokenCount !== undefined ? { originalTokenCount: truncated.originalTokenCount } : {}),
    };
  }

  // ---- files ----

  /** An absolute sandbox path: relative paths are under the manifest root. */
  private resolve(path: string): string {
    return posix.normalize(posix.isAbsolute(path) ? path : posix.join(this.root, path));
  }

  /** The workspace-relative path of `path`, or null when it is outside the workspace. */
  private relative(path: string): string | null {
    const absolute = this.resolve(path);
    for (const base of [this.root, this.state.workdir]) {
      if (absolute === base) return "";
      if (absolute.startsWith(base + "/")) return absolute.slice(base.length + 1);
    }
    return null;
  }

  async readFile(args: ReadFileArgs): Promise<Uint8Array> {
    const relative = this.relative(args.path);
    if (relative !== null && relative !== "") {
      return this.session.read(relative, args.maxBytes ?? 0).catch((error) => {
        if (
          error instanceof SandgateError &&
          error.code === status.NOT_FOUND &&
          error.message.startsWith("file not found")
        ) {
          throw new SandboxWorkspaceReadNotFoundError(`${args.path}: no such file`, { path: args.path });
        }
        throw providerError(`cannot read ${args.path}`, error);
      });
    }
    // Outside the workspace: through the sandbox, as base64.
    const result = await this.session.run(["/bin/sh", "-c", 'base64 -w0 < "$1"', "read", this.resolve(args.path)]);
    if (result.exitCode !== 0)
      throw new SandboxProviderError(`cannot read ${args.path}: ${result.stderr.trim()}`, { path: args.path });
    const bytes = Buffer.from(result.stdout, "base64");
    return args.maxBytes ? bytes.subarray(0, args.maxBytes) : bytes;
  }

  async listDir(args: ListDirectoryArgs): Promise<SandboxDirectoryEntry[]> {
    const dir = this.resolve(args.path);
    const result = await this.session.run(["/bin/sh", "-c", LIST_DIR_SCRIPT, "ls", dir]);
    if (result.exitCode !== 0)
      throw new SandboxProviderError(`cannot list ${args.path}: ${result.stderr.trim()}`, { path: args.path });
    const types = { d: "dir", f: "file", o: "other" } as const;
    return result.stdout
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => {
        const name = line.slice(2);
        return { name, path: posix.join(dir, name), type: types[line[0] as keyof typeof types] };
      })
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  async pathExists(path: string): Promise<boolean> {
    return this.test("-e", path);
  }

  async directoryExists(path: string): Promise<boolean> {
    return this.test("-d", path);
  }

  private async test(flag: string, path: string): Promise<boolean> {
    const result = await this.session.run(["test", flag, this.resolve(path)]);
    return result.exitCode === 0;
  }

  async viewImage(args: ViewImageArgs) {
    const bytes = await this.readFile({ path: args.path, maxBytes: MAX_VIEW_IMAGE_BYTES + 1 });
    assertViewImageByteLength(args.path, bytes.byteLength);
    return imageOutputFromBytes(args.path, bytes);
  }

  /** Writes a whole file: in the workspace through the daemon (which makes its parents). */
  async writeFile(path: string, content: string | Uint8Array, mode = 0): Promise<void> {
    const relative = this.relative(path);
    if (relative === null || relative === "") {
      throw new SandboxUnsupportedFeatureError(
        `${path} is outside the sandgate workspace (${this.root}); files are written there only`,
        { path },
      );
    }
    await this.session.write(relative, Buffer.from(content), mode).catch((error) => {
      throw providerError(`cannot write ${path}`, error);
    });
  }

  /** Removes a file (sandgate's file calls have no delete yet: `rm` in the sandbox). */
  async removeFile(path: string): Promise<void> {
    const result = await this.session.run(["rm", "-f", "--", this.resolve(path)]);
    if (result.exitCode !== 0)
      throw new SandboxProviderError(`cannot delete ${path}: ${result.stderr.trim()}`, { path });
  }

  createEditor(): Editor {
    const read = async (path: string) => {
      const bytes = await this.readFile({ path, maxBytes: MAX_EDIT_BYTES });
      return Buffer.from(bytes).toString("utf8");
    };
    return {
      createFile: async (operation) => {
        await this.writeFile(operation.path, applyDiff("", operation.diff, "create"));
        return {};
      },
      updateFile: async (operation) => {
        const next = applyDiff(await read(operation.path), operation.diff);
        const destination = operation.moveTo ?? operation.path;
        await this.writeFile(destination, next);
        if (this.resolve(destination) !== this.resolve(operation.path)) await this.removeFile(operation.path);
        return {};
      },
      deleteFile: async (operation) => {
        await this.removeFile(operation.path);
        return {};
      },
    };
  }

  // ---- manifest ----

  async applyManifest(manifest: Manifest): Promise<void> {
    for (const { absolutePath, entry } of manifest.iterEntries()) await this.materialize(absolutePath, entry, false);
  }

  async materializeEntry(args: MaterializeEntryArgs): Promise<void> {
    await this.materialize(this.resolve(args.path), args.entry, true);
  }

  // iterEntries walks into a directory's children itself; a single entry brings its own.
  private async materialize(path: string, entry: Entry, withChildren: boolean): Promise<void> {
    refuseEntry(path, entry);
    switch (entry.type) {
      case "file":
        await this.writeFile(path, entry.content);
        return;
      case "dir": {
        const result = await this.session.run(["mkdir", "-p", "--", path]);
        if (result.exitCode !== 0)
          throw new SandboxProviderError(`cannot make ${path}: ${result.stderr.trim()}`, { path });
        if (withChildren) {
          for (const [name, child] of Object.entries(entry.children ?? {}))
            await this.materialize(posix.join(path, name), child, true);
        }
        return;
      }
      case "local_file":
        await this.upload(entry.src, path);
        return;
      case "local_dir":
        await this.uploadDir(entry.src, path);
        return;
    }
  }

  private async upload(local: string, path: string): Promise<void> {
    const relative = this.relative(path);
    if (relative === null || relative === "") {
      throw new SandboxUnsupportedFeatureError(`${path} is outside the sandgate workspace (${this.root})`, { path });
    }
    await this.session.upload(local, relative).catch((error) => {
      throw providerError(`cannot upload ${local} to ${path}`, error);
    });
  }

  private async uploadDir(local: string, path: string): Promise<void> {
    for (const item of await readdir(local, { withFileTypes: true })) {
      const from = join(local, item.name);
      const to = posix.join(path, item.name);
      if (item.isDirectory()) await this.uploadDir(from, to);
      else if (item.isFile()) await this.upload(from, to);
      else throw new SandboxUnsupportedFeatureError(`${from}: only files and directories are uploaded`, { path: from });
    }
  }

  // ---- snapshots ----

  /** Saves the workspace as a sandgate snapshot (files, directories, links, modes; in the
   * daemon's store, so any replica restores it) and returns a small tar that names it
   * (workspace_ref.ts): hydrateWorkspace of those bytes, on any replica, brings it back. */
  async persistWorkspace(): Promise<Uint8Array> {
    const snapshot = await this.session.snapshot({ labels: { by: "agents-sdk" } }).catch((error) => {
      throw providerError(`cannot snapshot sandgate session ${this.state.sessionId}`, error);
    });
    return snapshotReference(snapshot.id);
  }

  /** Restores what persistWorkspace returned: a session of this one's sandbox is made from the
   * snapshot (on whichever replica answers) and takes this one's place; this one is closed.
   * Processes the model left running here are ended. Bytes that are not a sandgate snapshot's
   * reference (a tar of another provider) are refused. */
  async hydrateWorkspace(data: Uint8Array): Promise<void> {
    const snapshotId = snapshotOfReference(data);
    if (!snapshotId) {
      throw new SandboxUnsupportedFeatureError(
        "hydrateWorkspace takes what persistWorkspace of a sandgate session returned (a reference to a sandgate snapshot), not another provider's archive",
        { sessionId: this.state.sessionId },
      );
    }
    const restored = await restoreSession(this.session, snapshotId);
    const previous = this.session;
    await this.stop();
    this.session = restored;
    this.state.sessionId = restored.id;
    this.state.workdir = restored.record.workdir;
    await previous.close(`replaced by session ${restored.id}, restored from snapshot ${snapshotId}`).catch(() => {});
  }

  // ---- lifecycle ----

  /** Ends the processes the model left running; the session stays. */
  async stop(): Promise<void> {
    const left = [...this.processes.values()];
    this.processes.clear();
    await Promise.all(left.map(({ process }) => (process.running ? process.kill().catch(() => {}) : undefined)));
  }

  async shutdown(): Promise<void> {
    await this.close();
  }

  async delete(): Promise<void> {
    await this.close();
  }

  /** Closes the sandgate session (its sandbox is deleted); once, however often it is called. */
  async close(): Promise<void> {
    this.closing ??= (async () => {
      this.processes.clear();
      await this.session.close("closed by the Agents SDK");
    })();
    await this.closing;
  }

  // A call that failed because the session is gone is the SDK's to know, not output.
  private assertAlive(error: unknown): void {
    if (error instanceof SandgateError && (error.code === status.NOT_FOUND || error.code === status.UNAVAILABLE)) {
      throw providerError(`sandgate session ${this.state.sessionId}`, error);
    }
  }
}

// A new session made like `like` (its provider, labels and sandbox, without its files and
// setup commands: the workspace holds their result), with snapshot `snapshotId` restored.
async function restoreSession(like: Session, snapshotId: string): Promise<Session> {
  const sandbox = { ...(like.record.sandbox ?? {}), files: [], setupCommands: [] };
  return like.client
    .createSession({ provider: like.record.provider, labels: like.record.labels, sandbox, fromSnapshot: snapshotId })
    .catch((error) => {
      throw providerError(`cannot restore sandgate snapshot ${snapshotId}`, error);
    });
}

function refuseUnsupported(manifest: Manifest, options: SandgateSandboxOptions, snapshot: unknown): void {
  const unknown = Object.keys(options).filter((key) => !OPTION_KEYS.has(key) && options[key] !== undefined);
  if (unknown.length > 0) {
    throw new SandboxUnsupportedFeatureError(
      `the sandgate sandbox has no option ${unknown.join(", ")}`,
      { options: unknown },
    );
  }
  if (snapshot && (snapshot as { type?: string }).type !== "noop") {
    throw new SandboxUnsupportedFeatureError("workspace snapshots are not supported yet by the sandgate client", {});
  }
  if (manifest.users.length > 0 || manifest.groups.length > 0) {
    throw new SandboxUnsupportedFeatureError(
      "the sandgate sandbox runs everything as its one sandbox user: manifest users and groups cannot be made",
      {},
    );
  }
  if (manifest.extraPathGrants.length > 0) {
    throw new SandboxUnsupportedFeatureError("the sandgate sandbox grants no host paths (extraPathGrants)", {});
  }
  if (manifest.root !== SDK_DEFAULT_ROOT) {
    throw new SandboxUnsupportedFeatureError(
      `a sandgate session's workspace is where the daemon keeps it (its root file system is read-only): leave the manifest root at its default, not ${manifest.root}`,
      { root: manifest.root },
    );
  }
  for (const { absolutePath, entry } of manifest.iterEntries()) refuseEntry(absolutePath, entry);
  if (options.allowedDomains?.length && options.network !== "restricted") {
    throw new SandboxUnsupportedFeatureError('allowedDomains needs network: "restricted"', {});
  }
}

function refuseEntry(path: string, entry: Entry): void {
  const why =
    entry.type === "git_repo"
      ? "git repositories are not cloned by the sandgate client (clone it in a setup command with network allowed)"
      : entry.type === "mount" || !["file", "dir", "local_file", "local_dir"].includes(entry.type)
        ? `${entry.type} entries (mounts) cannot be made in a sandgate sandbox`
        : entry.group
          ? "entry groups: the sandgate sandbox has one user"
          : entry.permissions
            ? "entry permissions are not set by the sandgate client"
            : null;
  if (why) throw new SandboxUnsupportedFeatureError(`${path}: ${why}`, { path, type: entry.type });
}

// The SDK's default manifest root: a sandgate session's workspace is the daemon's (/work),
// so the manifest is rooted there, and the model is told so.
const SDK_DEFAULT_ROOT = "/workspace";
const DAEMON_WORKDIR = "/work";

function rooted(manifest: Manifest, workdir: string): Manifest {
  if (manifest.root === workdir) return manifest;
  return deserializeManifest({ ...(serializeManifest(manifest) as unknown as Record<string, unknown>), root: workdir });
}

function networkPolicy(options: SandgateSandboxOptions) {
  const modes = { disabled: "MODE_DISABLED", restricted: "MODE_RESTRICTED", enabled: "MODE_ENABLED" } as const;
  if (options.network === undefined) return undefined;
  const mode = modes[options.network];
  if (!mode)
    throw new SandboxUnsupportedFeatureError(
      `network must be disabled, restricted or enabled, not ${String(options.network)}`,
      {},
    );
  return { mode, allowedDomains: options.allowedDomains ?? [] };
}

function seconds(value: number | undefined) {
  return value ? { seconds: Math.floor(value), nanos: Math.round((value % 1) * 1e9) } : undefined;
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function providerError(what: string, error: unknown): SandboxProviderError {
  return new SandboxProviderError(`${what}: ${message(error)}`, {
    code: error instanceof SandgateError ? error.code : undefined,
  });
}
