// A server stream read as it arrives (Exec's output, BuildImage's progress): its items
// queued for iteration, and its last message (how it ended) as a promise.
import * as grpc from "@grpc/grpc-js";

import { SandgateError, toError } from "./errors.js";

/** What one message of the stream carries: an item to iterate, or the ending (or neither). */
export interface Taken<Item, Last> {
  item?: Item;
  last?: Last;
}

/**
 * Iterate it for the items (a loop left early may be taken up again; once the stream ended,
 * a new loop ends at once, or throws its error); `result` is the last message, or the
 * stream's error, or UNKNOWN with the message `missing` when the stream ended without one.
 */
export class Streamed<Message, Item, Last> implements AsyncIterable<Item> {
  readonly result: Promise<Last>;
  private readonly queue: Array<Item | null> = [];
  private wake: (() => void) | null = null;
  private failure: Error | null = null;

  constructor(
    private readonly call: grpc.ClientReadableStream<Message>,
    take: (message: Message) => Taken<Item, Last>,
    missing: string,
  ) {
    let last: Last | undefined;
    this.result = new Promise((resolve, reject) => {
      call.on("data", (message: Message) => {
        const taken = take(message);
        if (taken.item !== undefined) this.push(taken.item);
        if (taken.last !== undefined) last = taken.last;
      });
      // Settles once: grpc-js emits "error" (the daemon's status) and then "end", which must
      // not replace it.
      let settled = false;
      const settle = (failure: Error | null) => {
        if (settled) return;
        settled = true;
        this.failure = failure;
        this.push(null);
        if (failure) reject(failure);
        else resolve(last!);
      };
      call.on("error", (e) => settle(toError(e)));
      call.on("end", () =>
        settle(last !== undefined ? null : new SandgateError(grpc.status.UNKNOWN, missing)),
      );
    });
    this.result.catch(() => {}); // also reported through iteration
  }

  private push(item: Item | null): void {
    this.queue.push(item);
    this.wake?.();
    this.wake = null;
  }

  /** Ends the call. */
  cancel(): void {
    this.call.cancel();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Item> {
    for (;;) {
      while (this.queue.length === 0) await new Promise<void>((r) => (this.wake = r));
      const item = this.queue[0];
      if (item === null) {
        if (this.failure) throw this.failure;
        return;
      }
      this.queue.shift();
      yield item;
    }
  }
}
