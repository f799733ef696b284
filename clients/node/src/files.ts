// Files a session reads and writes, checked end to end by sha256 (uploads by the daemon,
// downloads here), and the download sink runs share with them: a download is written under a
// temporary name beside its final one and renamed into place only when it matches.
import type * as grpc from "@grpc/grpc-js";
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, promises as fs } from "node:fs";

import type { Client } from "./client.js";
import { toError } from "./errors.js";
import type { FileInfo__Output } from "./generated/sandgate/v1/FileInfo.js";
import type { UploadFileRequest } from "./generated/sandgate/v1/UploadFileRequest.js";

/** Whether the daemon named a plain file (no directory, no "..", no NUL). */
export function isPlainFileName(name: string): boolean {
  return name !== "" && name !== "." && name !== ".." && !name.includes("/") && !name.includes("\0");
}

export function sha256Hex(data: Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

// Receives a download (ArtifactChunk or FileChunk stream) into a temporary file next to
// `path`, hashing as it goes, so no file is held in memory whole. keep() renames it into place
// (`path` then holds the whole file), drop() removes it.
export async function receive(
  call: AsyncIterable<unknown>,
  path: string,
): Promise<{ actual: string; sent: string; keep: () => Promise<string>; drop: () => Promise<void> }> {
  const tmp = `${path}.${randomBytes(4).toString("hex")}.part`;
  const file = await fs.open(tmp, "wx", 0o600);
  const hash = createHash("sha256");
  let sent = "";
  try {
    for await (const chunk of call as AsyncIterable<{ data: Buffer; sha256: string }>) {
      hash.update(chunk.data);
      await file.write(chunk.data);
      if (chunk.sha256) sent = chunk.sha256;
    }
  } catch (e) {
    await file.close();
    await fs.rm(tmp, { force: true });
    throw toError(e);
  }
  await file.close();
  return {
    actual: hash.digest("hex"),
    sent,
    keep: async () => {
      await fs.rename(tmp, path);
      return path;
    },
    drop: () => fs.rm(tmp, { force: true }),
  };
}

/** Uploads a local file to `remote` in session `sessionId`'s workspace. */
export async function uploadFile(
  client: Client,
  sessionId: string,
  local: string,
  remote: string,
  mode: number,
): Promise<FileInfo__Output> {
  // Two passes over the file, never all of it in memory: its size and sha256 for the
  // header, then the bytes.
  const hash = createHash("sha256");
  let size = 0;
  for await (const piece of createReadStream(local)) {
    hash.update(piece as Buffer);
    size += (piece as Buffer).length;
  }
  const header = { sessionId, path: remote, mode, sizeBytes: size, sha256: hash.digest("hex") };
  return send(client, header, createReadStream(local, { highWaterMark: 1 << 20 }));
}

/** Writes `data` to `remote` in session `sessionId`'s workspace (made or replaced whole). */
export async function writeFile(
  client: Client,
  sessionId: string,
  remote: string,
  data: Buffer | string,
  mode: number,
): Promise<FileInfo__Output> {
  const bytes = Buffer.from(data);
  const pieces = [];
  for (let at = 0; at < bytes.length; at += 1 << 20) pieces.push(bytes.subarray(at, at + (1 << 20)));
  const header = { sessionId, path: remote, mode, sizeBytes: bytes.length, sha256: sha256Hex(bytes) };
  return send(client, header, pieces);
}

// UploadFile: the header with the size and sha256 the daemon checks, then the pieces, as
// fast as the stream takes them.
async function send(
  client: Client,
  header: { sessionId: string; path: string; mode: number; sizeBytes: number; sha256: string },
  pieces: AsyncIterable<unknown> | Iterable<unknown>,
): Promise<FileInfo__Output> {
  let call!: grpc.ClientWritableStream<UploadFileRequest>;
  const answer = new Promise<FileInfo__Output>((resolve, reject) => {
    call = client.stub.UploadFile(client.metadata(), (e, info) => (e ? reject(toError(e)) : resolve(info!)));
  });
  call.write({ header });
  try {
    for await (const piece of pieces) {
      if (!call.write({ data: piece as Buffer })) await new Promise((r) => call.once("drain", r));
    }
  } catch (e) {
    call.cancel();
    await answer.catch(() => {});
    throw e;
  }
  call.end();
  return answer;
}

/** Reads a workspace file into memory (at most `maxBytes`, 0: the daemon's limit), checked
 * against the sha256 the daemon sends. */
export async function readFile(client: Client, sessionId: string, remote: string, maxBytes: number): Promise<Buffer> {
  const pieces: Buffer[] = [];
  let sent = "";
  const call = client.stub.DownloadFile({ sessionId, path: remote, maxBytes }, client.metadata());
  try {
    for await (const chunk of call as AsyncIterable<{ data: Buffer; sha256: string }>) {
      pieces.push(chunk.data);
      if (chunk.sha256) sent = chunk.sha256;
    }
  } catch (e) {
    throw toError(e);
  }
  const data = Buffer.concat(pieces);
  if (sent === "" || sha256Hex(data) !== sent) {
    throw new Error(`${remote}: what arrived does not match the sha256 the daemon sent`);
  }
  return data;
}

/** Downloads a workspace file to `local`; nothing is left there when it does not match the
 * sha256 the daemon sends. */
export async function downloadFile(client: Client, sessionId: string, remote: string, local: string): Promise<string> {
  const got = await receive(client.stub.DownloadFile({ sessionId, path: remote }, client.metadata()), local);
  if (got.sent === "" || got.actual !== got.sent) {
    await got.drop();
    throw new Error(`${remote}: the download does not match the sha256 the daemon sent; not saved`);
  }
  return got.keep();
}
