// Exposed ports (docs/sessions.md, "Exposed ports"): a port the session's code listens on at
// 127.0.0.1 in the sandbox, reached through the daemon's REST port. Session.expose(),
// unexpose() and ports() are the usual way in; these are the calls underneath.
//
//   const p = await session.expose(8000, { signed: true });   // p.url, p.signedUrl
//   for (const q of await session.ports()) console.log(q.port, q.url);
//   await session.unexpose(8000);
import type { ExposedPort__Output } from "./generated/sandgate/v1/ExposedPort.js";
import type { UnaryCaller } from "./snapshots.js";

export type ExposedPort = ExposedPort__Output;

/** `signed`: also a URL that needs no token until it expires (`ttlSeconds`: default the
 * daemon's, 1 h). */
export function exposePort(
  client: UnaryCaller,
  sessionId: string,
  port: number,
  options: { signed?: boolean; ttlSeconds?: number } = {},
): Promise<ExposedPort> {
  return client.unary<ExposedPort>("ExposePort", {
    sessionId,
    port,
    signedUrl: options.signed ?? false,
    signedTtl: options.ttlSeconds ? { seconds: options.ttlSeconds } : undefined,
  });
}

export async function unexposePort(client: UnaryCaller, sessionId: string, port: number): Promise<void> {
  await client.unary("UnexposePort", { sessionId, port });
}

/** The session's exposed ports, by port. */
export async function listPorts(client: UnaryCaller, sessionId: string): Promise<ExposedPort[]> {
  const res = await client.unary<{ ports: ExposedPort[] }>("ListPorts", { sessionId });
  return res.ports;
}
