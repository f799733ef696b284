// Errors: every failed call is a SandgateError with the gRPC code and the daemon's message
// (docs/client-contract.md, "Errors").
import * as grpc from "@grpc/grpc-js";

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

/** A grpc-js error as a SandgateError; anything else as it was thrown. */
export function toError(e: unknown): Error {
  if (e instanceof SandgateError) return e;
  const s = e as Partial<grpc.ServiceError>;
  if (typeof s?.code === "number") return new SandgateError(s.code, s.details ?? s.message ?? "");
  return e instanceof Error ? e : new Error(String(e));
}
