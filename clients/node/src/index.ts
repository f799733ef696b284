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
//
// The package's modules, like the Python client's: connection (address, token, TLS), errors,
// client, runs (events with resume, artifacts), sessions, exec, processes, files, ports,
// snapshots and images. This file only says what the package exports.
export { channelTarget, parseAddress } from "./address.js";
export { Client, type InputContent, type RunOptions } from "./client.js";
export type { ClientOptions } from "./connection.js";
export { SandgateError } from "./errors.js";
export { Execution, type OutputPiece } from "./exec.js";
export { ImageBuild, type ImageRecord } from "./images.js";
export { Process, type ProcessResult } from "./processes.js";
export { Run } from "./runs.js";
export { Session } from "./sessions.js";
export type { SnapshotRecord } from "./snapshots.js";
/** gRPC status codes, to compare with SandgateError.code. */
export { status } from "@grpc/grpc-js";
export type { Event__Output as Event } from "./generated/sandgate/v1/Event.js";
export type { Run__Output as RunRecord } from "./generated/sandgate/v1/Run.js";
export type { Session__Output as SessionRecord } from "./generated/sandgate/v1/Session.js";
export type { FileInfo__Output as FileInfo } from "./generated/sandgate/v1/FileInfo.js";
export type { CommandFinished__Output as CommandFinished } from "./generated/sandgate/v1/CommandFinished.js";
export type { SandboxSpec } from "./generated/sandgate/v1/SandboxSpec.js";
export type { Process__Output as ProcessRecord } from "./generated/sandgate/v1/Process.js";
export type { SessionUsage__Output as SessionUsage } from "./generated/sandgate/v1/SessionUsage.js";
export type { ExposedPort } from "./ports.js";
