// docs/agent-runtimes.md's SandboxAgent program, run verbatim (scripted model: no key, no
// network) against the real daemon, in a project that installed the packages.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";

import { repo, sampleCsv, startDaemon } from "../node/daemon.mjs";

test("docs/agent-runtimes.md's financial analyst program works as written", async () => {
  const doc = readFileSync(join(repo, "docs", "agent-runtimes.md"), "utf8");
  const m = doc.match(/<!-- agents-example[^>]*-->\n```js\n([\s\S]*?)```/);
  assert.ok(m, "docs/agent-runtimes.md has the example");
  const daemon = await startDaemon();
  const dir = mkdtempSync(join(tmpdir(), "sg-agents-example-"));
  try {
    const modules = join(dir, "node_modules");
    mkdirSync(modules);
    symlinkSync(join(repo, "clients", "agents"), join(modules, "sandgate-agents"));
    symlinkSync(join(repo, "clients", "agents", "node_modules", "@openai"), join(modules, "@openai"));
    mkdirSync(join(dir, "examples"));
    cpSync(sampleCsv, join(dir, "examples", "northstar_cloud_financial_statements.csv"));
    writeFileSync(join(dir, "example.mjs"), m[1]);
    const env = { ...process.env, SANDGATE_ADDR: daemon.addr, SANDGATE_TOKEN: "" };
    delete env.OPENAI_API_KEY;
    const { stdout } = await promisify(execFile)(process.execPath, ["example.mjs"], { cwd: dir, env });
    assert.match(stdout, /The memo is in investment_analysis\.md\./);
    // 2021 over 2020 in the sample: 112900 / 84200 - 1.
    assert.match(stdout, /- 2021: 34\.1%/);
    assert.match(readFileSync(join(dir, "investment_analysis.md"), "utf8"), /# Revenue growth/);
    const sessions = await listSessions(daemon.addr);
    assert.ok(sessions.length > 0 && sessions.every((s) => s.status === "SESSION_STATUS_CLOSED"));
  } finally {
    await daemon.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});

async function listSessions(addr) {
  const { Client } = await import(join(repo, "clients", "node", "dist", "index.js"));
  const client = new Client({ addr });
  try {
    return await client.listSessions(true);
  } finally {
    client.close();
  }
}
