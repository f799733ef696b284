// A command a session runs to its end (Session.exec, Session.run): its output streamed as it
// arrives, and how it finished.
import * as grpc from "@grpc/grpc-js";

import { SandgateError, toError } from "./errors.js";
import type { CommandFinished__Output } from "./generated/sandgate/v1/CommandFinished.js";
import type { ExecResponse__Output } from "./generated/sandgate/v1/ExecResponse.js";

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
