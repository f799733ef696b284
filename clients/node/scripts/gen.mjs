// Build step: copies the API's .proto (the one source of truth, ../../proto) into the package
// and generates TypeScript types for its messages and service with proto-loader-gen-types
// (@grpc/proto-loader). Both outputs are build products, not checked in.
import { cpSync, mkdirSync, rmSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const source = join(here, "..", "..", "proto", "sandgate", "v1", "sandgate.proto");
const protoDir = join(here, "proto", "sandgate", "v1");
mkdirSync(protoDir, { recursive: true });
cpSync(source, join(protoDir, "sandgate.proto"));

const out = join(here, "src", "generated");
rmSync(out, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [
    join(here, "node_modules", "@grpc", "proto-loader", "build", "bin", "proto-loader-gen-types.js"),
    // The file first: --includeDirs is an array option and would take it as a directory.
    "sandgate/v1/sandgate.proto",
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
