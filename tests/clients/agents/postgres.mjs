// A throwaway PostgreSQL for tests that run several replicas of the daemon on one store: its
// own directory and Unix socket, no TCP, run as `nobody` when the tests run as root (as
// tests/fakes/postgres_server.cc does for the C++ tests).
import { execFileSync, spawn } from "node:child_process";
import { chownSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

function binDir() {
  const versions = readdirSync("/usr/lib/postgresql").sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0) throw new Error("postgres: /usr/lib/postgresql has no version");
  return join("/usr/lib/postgresql", versions[0], "bin");
}

export async function startPostgres() {
  const dir = mkdtempSync(join(tmpdir(), "sg-agents-pg-"));
  const as = {};
  if (process.getuid() === 0) {
    const nobody = Number(execFileSync("id", ["-u", "nobody"]).toString());
    const group = Number(execFileSync("id", ["-g", "nobody"]).toString());
    Object.assign(as, { uid: nobody, gid: group });
    chownSync(dir, nobody, group);
  }
  const data = join(dir, "data");
  execFileSync(
    join(binDir(), "initdb"),
    ["-D", data, "-U", "sandgate", "--auth-local=trust", "--auth-host=reject", "-E", "UTF8", "--no-sync"],
    { ...as, stdio: "ignore" },
  );
  writeFileSync(join(data, "pg_hba.conf"), "local all all trust\n");
  const child = spawn(
    join(binDir(), "postgres"),
    ["-D", data, "-k", dir, "-c", "listen_addresses=", "-c", "fsync=off"],
    { ...as, stdio: "ignore" },
  );
  const dsn = `host=${dir} user=sandgate dbname=postgres`;
  for (let i = 0; i < 300; ++i) {
    try {
      execFileSync(join(binDir(), "pg_isready"), ["-h", dir, "-U", "sandgate", "-q"]);
      return {
        dsn,
        async dispose() {
          const exited = new Promise((r) => child.once("exit", r));
          child.kill("SIGQUIT");
          await exited;
          rmSync(dir, { recursive: true, force: true });
        },
      };
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  child.kill("SIGKILL");
  throw new Error(`postgres did not start in ${dir}`);
}
