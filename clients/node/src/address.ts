// Addresses in the daemon's own syntax, as the CLI takes them (client/connection.h):
// `unix:PATH`, `tcp:HOST:PORT` or `HOST:PORT`, several replicas' comma separated.

export interface Address {
  unix?: string; // socket path
  host?: string; // as typed: a name, an IPv4 literal or a bracketed IPv6 one
  port?: number;
}

function bad(text: string, why: string): Error {
  return new Error(`expected unix:PATH, tcp:HOST:PORT or HOST:PORT, got '${text}' (${why})`);
}

export function parseAddress(text: string): Address {
  if (text.startsWith("unix:")) {
    const path = text.slice(5);
    if (path === "") throw bad(text, "no socket path");
    return { unix: path };
  }
  const rest = text.startsWith("tcp:") ? text.slice(4) : text;
  const colon = rest.lastIndexOf(":");
  if (colon < 0) throw bad(text, "no port");
  const host = rest.slice(0, colon);
  const portText = rest.slice(colon + 1);
  if (host === "") throw bad(text, "no host");
  const bracketed = host.startsWith("[") && host.endsWith("]");
  if (!bracketed && host.includes(":")) throw bad(text, "an IPv6 host needs brackets: [::1]:PORT");
  if (host.includes("/")) throw bad(text, "a host name has no '/'");
  const port = Number(portText);
  if (!/^[0-9]+$/.test(portText) || port > 65535) {
    throw bad(text, "the port must be a number from 0 to 65535");
  }
  return { host, port };
}

function family(host: string): 4 | 6 | 0 {
  if (host.startsWith("[") && host.endsWith("]")) return 6;
  return /^[0-9]{1,3}(\.[0-9]{1,3}){3}$/.test(host) ? 4 : 0;
}

/**
 * The gRPC target for a comma-separated list: `unix:PATH`, `HOST:PORT`, or
 * `ipv4:A:P,B:P` / `ipv6:[A]:P,[B]:P` for several replicas (then round robin over them).
 */
export function channelTarget(text: string): { target: string; several: boolean } {
  const parts = text.split(",").map((s) => s.trim());
  if (parts.some((p) => p === "")) throw new Error(`an empty address in '${text}'`);
  const addrs = parts.map(parseAddress);
  if (addrs.length === 1) {
    const a = addrs[0];
    return { target: a.unix !== undefined ? `unix:${a.unix}` : `${a.host}:${a.port}`, several: false };
  }
  const fam = addrs[0].host !== undefined ? family(addrs[0].host) : 0;
  for (const a of addrs) {
    if (a.host === undefined || family(a.host) === 0 || family(a.host) !== fam) {
      throw new Error(
        `several addresses must all be tcp: IPv4 addresses, or all [IPv6] ones, got '${text}' ` +
          "(a host name that resolves to several replicas works alone)",
      );
    }
  }
  const list = addrs.map((a) => `${a.host}:${a.port}`).join(",");
  return { target: `ipv${fam}:${list}`, several: true };
}
