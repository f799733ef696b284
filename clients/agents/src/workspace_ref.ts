// What persistWorkspace returns and hydrateWorkspace takes: a tar archive, as the SDK's
// interface says, holding one file, `.sandgate-snapshot`, that names a sandgate snapshot. The
// workspace itself stays in the daemon's store (any replica restores it; only its tenant
// can), so the bytes a program keeps are small and carry no file of the workspace.
const NAME = ".sandgate-snapshot";
const BLOCK = 512;

/** A ustar archive with `.sandgate-snapshot` = {"snapshot": id}. */
export function snapshotReference(snapshotId: string): Uint8Array {
  const body = Buffer.from(JSON.stringify({ snapshot: snapshotId }) + "\n");
  const header = Buffer.alloc(BLOCK);
  header.write(NAME, 0, "utf8");
  header.write("0000644\0", 100, "ascii");
  header.write("0000000\0", 108, "ascii");
  header.write("0000000\0", 116, "ascii");
  header.write(body.length.toString(8).padStart(11, "0") + "\0", 124, "ascii");
  header.write("00000000000\0", 136, "ascii");
  header.write("0", 156, "ascii");
  header.write("ustar\u000000", 257, "binary");
  header.fill(" ", 148, 156);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, "ascii");
  const padding = Buffer.alloc((BLOCK - (body.length % BLOCK)) % BLOCK);
  return new Uint8Array(Buffer.concat([header, body, padding, Buffer.alloc(2 * BLOCK)]));
}

/** The snapshot id a reference names, or null when `data` is not one. */
export function snapshotOfReference(data: Uint8Array): string | null {
  const bytes = Buffer.from(data);
  if (bytes.length < BLOCK) return null;
  const name = bytes.subarray(0, 100).toString("utf8").replace(/\0.*$/s, "");
  if (name !== NAME && name !== `./${NAME}`) return null;
  const size = parseInt(bytes.subarray(124, 136).toString("ascii").replace(/\0.*$/s, "").trim(), 8);
  if (!Number.isFinite(size) || size > 4096 || bytes.length < BLOCK + size) return null;
  try {
    const parsed = JSON.parse(bytes.subarray(BLOCK, BLOCK + size).toString("utf8"));
    return typeof parsed.snapshot === "string" && parsed.snapshot !== "" ? parsed.snapshot : null;
  } catch {
    return null;
  }
}
