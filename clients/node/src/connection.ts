// The connection (docs/client-contract.md): where (the address), who (the token), how (TLS),
// and the reconnect window a broken event stream is retried in. One channel serves every
// service of the API (Sandgate, Images).
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { channelTarget } from "./address.js";
import type { ProtoGrpcType as SandgateProto } from "./generated/sandgate.js";
import type { ProtoGrpcType as ImagesProto } from "./generated/images.js";

const DEFAULT_ADDR = "unix:/run/sandgate/sandgated.sock";

export interface ClientOptions {
  /** `unix:PATH`, `tcp:HOST:PORT` or `HOST:PORT`, several comma separated; default
   * $SANDGATE_ADDR, else unix:/run/sandgate/sandgated.sock. */
  addr?: string;
  /** The bearer token; default $SANDGATE_TOKEN. */
  token?: string;
  /** PEM files for TLS (tcp only): the CA that signed the daemon's certificate, and a client
   * certificate and key for mutual TLS. Defaults: $SANDGATE_TLS_CA, _CERT, _KEY. */
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  /** How long a broken event stream is retried without word from the daemon, ms; default
   * $SANDGATE_RECONNECT_TIMEOUT seconds, else 60 s (docs/client-contract.md). */
  reconnectTimeoutMs?: number;
}

type Proto = SandgateProto & ImagesProto;

let protoCache: Proto | undefined;
/** The API's services and messages, loaded once from the package's copy of the .proto. */
export function proto(): Proto {
  if (!protoCache) {
    const dir = join(dirname(fileURLToPath(import.meta.url)), "..", "proto");
    const def = protoLoader.loadSync(["sandgate/v1/sandgate.proto", "sandgate/v1/images.proto"], {
      includeDirs: [dir],
      longs: Number,
      enums: String,
      defaults: true,
      oneofs: true,
    });
    protoCache = grpc.loadPackageDefinition(def) as unknown as Proto;
  }
  return protoCache;
}

function readIfSet(path: string | undefined, what: string): Buffer | null {
  if (!path) return null;
  try {
    return readFileSync(path);
  } catch (e) {
    throw new Error(`${what} ${path}: ${(e as Error).message}`);
  }
}

function reconnectWindowMs(): number {
  const seconds = Number(process.env.SANDGATE_RECONNECT_TIMEOUT ?? "");
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 60_000;
}

/** What a Client is made of: its channel, its token and its reconnect window. */
export interface Connection {
  channel: grpc.Channel;
  token: string;
  reconnectTimeoutMs: number;
}

/** Reads the options (and their environment defaults) and makes the channel; an address or
 * TLS file that is wrong throws here, naming it. Connecting itself is lazy. */
export function connect(options: ClientOptions): Connection {
  const ca = readIfSet(options.tlsCa ?? process.env.SANDGATE_TLS_CA, "tlsCa");
  const cert = readIfSet(options.tlsCert ?? process.env.SANDGATE_TLS_CERT, "tlsCert");
  const key = readIfSet(options.tlsKey ?? process.env.SANDGATE_TLS_KEY, "tlsKey");
  const tls = { ca, cert, key };
  const addr = options.addr ?? process.env.SANDGATE_ADDR ?? DEFAULT_ADDR;
  const { target, several } = channelTarget(addr);
  const useTls = tls.ca !== null || tls.cert !== null || tls.key !== null;
  if (useTls && target.startsWith("unix:")) throw new Error("TLS is for tcp: addresses only");
  if ((tls.cert === null) !== (tls.key === null)) {
    throw new Error("a client certificate needs both tlsCert and tlsKey");
  }
  const creds = useTls
    ? grpc.credentials.createSsl(tls.ca, tls.key, tls.cert)
    : grpc.credentials.createInsecure();
  const channelOptions: grpc.ChannelOptions = {};
  if (several) {
    channelOptions["grpc.service_config"] = JSON.stringify({
      loadBalancingConfig: [{ round_robin: {} }],
    });
  }
  return {
    channel: new grpc.Channel(target, creds, channelOptions),
    token: options.token ?? process.env.SANDGATE_TOKEN ?? "",
    reconnectTimeoutMs: options.reconnectTimeoutMs ?? reconnectWindowMs(),
  };
}
