// Runs: a run's record, its event log followed with resume after a broken stream
// (docs/client-contract.md, "Resume after a broken stream"), and its artifacts.
//
//   const run = await client.runAnalysis("statements.csv");
//   for await (const event of run.events()) console.log(event.seq, event.type);
//   console.log((await run.wait()).status);
//   await run.download("out/");                        // every artifact, sha256 checked
import * as grpc from "@grpc/grpc-js";
import { promises as fs } from "node:fs";
import { join } from "node:path";

import type { Client } from "./client.js";
import { SandgateError, toError } from "./errors.js";
import { isPlainFileName, receive, sha256Hex } from "./files.js";
import type { Event__Output } from "./generated/sandgate/v1/Event.js";
import type { Run__Output } from "./generated/sandgate/v1/Run.js";

const TERMINAL_STATUSES = new Set([
  "RUN_STATUS_SUCCEEDED",
  "RUN_STATUS_FAILED",
  "RUN_STATUS_CANCELLED",
  "RUN_STATUS_TIMED_OUT",
]);

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
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
