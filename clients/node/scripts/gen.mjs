// Build step: copies the API's .proto files (the one source of truth, ../../proto) into the
// package and generates TypeScript types for their messages and services with
// proto-loader-gen-types (@grpc/proto-loader). Both outputs are build products, not checked in.
import { cpSync, mkdirSync, rmSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const files = ["sandgate.proto", "images.proto"];
const protoDir = join(here, "proto", "sandgate", "v1");
mkdirSync(protoDir, { recursive: true });
for (const f of files) cpSync(join(here, "..", "..", "proto", "sandgate", "v1", f), join(protoDir, f));

const out = join(here, "src", "generated");
rmSync(out, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [
    join(here, "node_modules", "@grpc", "proto-loader", "build", "bin", "proto-loader-gen-types.js"),
    // The files first: --includeDirs is an array option and would take them as directories.
    ...files.map((f) => `sandgate/v1/${f}`),
    "--longs=Number",
    "--enums=String",
    "--defaults",
    "--oneofs",
    "--grpcLib=@grpc/grpc-js",
    "--includeComments",
    "--importFileExtension=.js",
    `--outDir=${out}`,
    `--includeDirs=${join(here, "proto")}`,
  ],
  { stdio: "inherit" },
);
