// The README's TypeScript example, run verbatim against the real daemon, so it cannot rot.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, symlinkSync, writeFileSync, cpSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";

import { repo, startDaemon } from "./daemon.mjs";

test("the README's example works as written", async () => {
  const readme = readFileSync(join(repo, "README.md"), "utf8");
  const m = readme.match(/<!-- node-example[^>]*-->\n```js\n([\s\S]*?)```/);
  assert.ok(m, "README has the node example");
  const daemon = await startDaemon();
  try {
    // A project that installed the package: node_modules/sandgate is this package.
    const dir = mkdtempSync(join(tmpdir(), "sg-node-readme-"));
    mkdirSync(join(dir, "node_modules"));
    symlinkSync(join(repo, "clients", "node"), join(dir, "node_modules", "sandgate"));
    mkdirSync(join(dir, "examples"));
    cpSync(join(repo, "examples", "northstar_cloud_financial_statements.csv"),
      join(dir, "examples", "northstar_cloud_financial_statements.csv"));
    writeFileSync(join(dir, "example.mjs"), m[1]);
    const { stdout } = await promisify(execFile)(process.execPath, ["example.mjs"], {
      cwd: dir,
      env: { ...process.env, SANDGATE_ADDR: daemon.addr, SANDGATE_TOKEN: "" },
    });
    assert.match(stdout, /run\.finished/);
    assert.match(stdout, /RUN_STATUS_SUCCEEDED/);
    assert.match(stdout, /^0 Python 3/m);
    assert.match(stdout, /1\n2\n3\n/);
    assert.ok(readdirSync(join(dir, "results")).length > 0);
  } finally {
    await daemon.dispose();
  }
});

test("the package README's example works as written", async () => {
  const readme = readFileSync(join(repo, "clients", "node", "README.md"), "utf8");
  const m = readme.match(/<!-- node-package-example[^>]*-->\n```js\n([\s\S]*?)```/);
  assert.ok(m, "clients/node/README.md has its tested example");
  const daemon = await startDaemon();
  try {
    const dir = mkdtempSync(join(tmpdir(), "sg-node-pkg-readme-"));
    mkdirSync(join(dir, "node_modules"));
    symlinkSync(join(repo, "clients", "node"), join(dir, "node_modules", "sandgate"));
    cpSync(join(repo, "examples", "northstar_cloud_financial_statements.csv"), join(dir, "statements.csv"));
    writeFileSync(join(dir, "example.mjs"), m[1]);
    const { stdout } = await promisify(execFile)(process.execPath, ["example.mjs"], {
      cwd: dir,
      env: { ...process.env, SANDGATE_ADDR: daemon.addr, SANDGATE_TOKEN: "" },
    });
    assert.match(stdout, /^exit 0 printed 42$/m);
    assert.match(stdout, /^1 run\.queued$/m);
    assert.match(stdout, /run\.finished\nRUN_STATUS_SUCCEEDED\n/);
    assert.match(stdout, /^NOT_FOUND .*r-does-not-exist/m);
  } finally {
    await daemon.dispose();
  }
});
