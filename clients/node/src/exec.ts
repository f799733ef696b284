// A command a session runs to its end (Session.exec, Session.run): its output streamed as it
// arrives, and how it finished.
import type * as grpc from "@grpc/grpc-js";

import type { CommandFinished__Output } from "./generated/sandgate/v1/CommandFinished.js";
import type { ExecResponse__Output } from "./generated/sandgate/v1/ExecResponse.js";
import { Streamed } from "./streamed.js";

/** One command's output as it arrives. */
export interface OutputPiece {
  stream: "stdout" | "stderr";
  data: Buffer;
}

/** A command running in a session: iterate its output; `result` is how it ended; cancel()
 * stops it (the daemon kills it). */
export class Execution extends Streamed<ExecResponse__Output, OutputPiece, CommandFinished__Output> {
  constructor(call: grpc.ClientReadableStream<ExecResponse__Output>) {
    super(
      call,
      (r) => {
        if (r.output) {
          const stream = r.output.stream === "STREAM_STDERR" ? "stderr" : "stdout";
          return { item: { stream, data: r.output.data } };
        }
        return r.finished ? { last: r.finished } : {};
      },
      "the command's stream ended without saying how the command finished",
    );
  }
}
