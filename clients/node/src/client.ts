// The client: one channel to the daemon (or its replicas) with the tenant's token, and the
// calls that make or find runs, sessions and snapshots.
//
//   const client = new Client();                       // SANDGATE_ADDR, SANDGATE_TOKEN
//   const run = await client.runAnalysis("statements.csv");
//   const session = await client.createSession();
import * as grpc from "@grpc/grpc-js";
import { promises as fs } from "node:fs";
import { basename } from "node:path";

import { connect, proto, type ClientOptions } from "./connection.js";
import { toError } from "./errors.js";
import type { ImagesClient } from "./generated/sandgate/v1/Images.js";
import type { Run__Output } from "./generated/sandgate/v1/Run.js";
import type { SandboxSpec } from "./generated/sandgate/v1/SandboxSpec.js";
import type { SandgateClient } from "./generated/sandgate/v1/Sandgate.js";
import type { Session__Output } from "./generated/sandgate/v1/Session.js";
import * as images from "./images.js";
import { Run } from "./runs.js";
import { Session } from "./sessions.js";
import * as snapshots from "./snapshots.js";

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
  /** The sandbox's image (docs/images.md), as sandbox.image. */
  image?: string;
  runTimeoutSeconds?: number;
  maxTurns?: number;
}

/** An input given by its contents rather than a path. */
export interface InputContent {
  name: string;
  content: Buffer | string;
}
// `sandbox` with `image` set in it, when one is given.
function withImage(sandbox: SandboxSpec | undefined, image: string | undefined): SandboxSpec | undefined {
  return image ? { ...sandbox, image } : sandbox;
}

export class Client {
  /** The generated stubs, for calls this class does not wrap: Sandgate's and Images'. */
  readonly stub: SandgateClient;
  readonly images: ImagesClient;
  private readonly token: string;
  readonly reconnectTimeoutMs: number;

  /** Connects lazily: the first call opens the channel. TLS files are read at once; an
   * address or file that is wrong throws here, naming it. */
  constructor(options: ClientOptions = {}) {
    const connection = connect(options);
    // Both stubs on the one channel (the target and credentials are the channel's).
    const shared = { channelOverride: connection.channel };
    this.stub = new (proto().sandgate.v1.Sandgate)("", grpc.credentials.createInsecure(), shared);
    this.images = new (proto().sandgate.v1.Images)("", grpc.credentials.createInsecure(), shared);
    this.token = connection.token;
    this.reconnectTimeoutMs = connection.reconnectTimeoutMs;
  }

  /** The call metadata: the bearer token, when there is one. */
  metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.token) md.set("authorization", `Bearer ${this.token}`);
    return md;
  }

  /** Calls a unary RPC of the stub (or of `stub`: this.images) by name; errors as
   * SandgateError. */
  unary<Res>(method: string, request: object, stub: grpc.Client = this.stub): Promise<Res> {
    return new Promise((resolve, reject) => {
      const fn = (stub as unknown as Record<string, Function>)[method];
      fn.call(stub, request, this.metadata(), (err: grpc.ServiceError | null, res: Res) =>
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
      sandbox: withImage(options.sandbox, options.image),
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
   * snapshot's workspace into it (with no `sandbox`, in the snapshot's sandbox). `image` is the
   * sandbox's image (docs/images.md), as sandbox.image. */
  async createSession(
    options: {
      provider?: string;
      sandbox?: SandboxSpec;
      idempotencyKey?: string;
      labels?: Record<string, string>;
      fromSnapshot?: string;
      image?: string;
    } = {},
  ): Promise<Session> {
    const record = await this.unary<Session__Output>("CreateSession", {
      provider: options.provider ?? "",
      sandbox: withImage(options.sandbox, options.image),
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

  /** Starts building image `name` from Debian `packages`: iterate the answer for its progress,
   * or wait() for the image. Ending the call (cancel(), or this process) cancels the build
   * unless `detach`. */
  buildImage(name: string, packages: string[], options: { detach?: boolean } = {}): images.ImageBuild {
    return images.buildImage(this, name, packages, options.detach ?? false);
  }

  /** The image `name`, built or building (then its last progress line). */
  getImage(name: string): Promise<images.ImageRecord> {
    return images.getImage(this, name);
  }

  /** Every image, built and building, that this tenant may use. */
  listImages(): Promise<images.ImageRecord[]> {
    return images.listImages(this);
  }

  /** Removes a built image (FAILED_PRECONDITION while a live session uses it), or cancels its
   * build. */
  deleteImage(name: string): Promise<images.ImageRecord> {
    return images.deleteImage(this, name);
  }
}
