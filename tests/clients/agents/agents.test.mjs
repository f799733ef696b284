// SandgateSandboxClient driven by the real OpenAI Agents SDK (the published package, from
// npm) and its ScriptedModel: no API key, no network; against the real daemon.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { pathToFileURL } from "node:url";

import { repo, startDaemon } from "../node/daemon.mjs";

const agentsDir = join(repo, "clients", "agents");
// The SDK as ESM, from the package's own node_modules (where its client imports it).
const sdk = (file) => import(pathToFileURL(join(agentsDir, "node_modules", "@openai", file)).href);
const { Runner } = await sdk("agents/dist/index.mjs");
const { SandboxAgent, Manifest, Capabilities, SandboxUnsupportedFeatureError } = await sdk("agents/dist/sandbox/index.mjs");
const { ScriptedModel, functionCall, assistantMessage } = await sdk("agents/dist/testing/index.mjs");
const { SandgateSandboxClient } = await import(join(agentsDir, "dist", "index.js"));

let daemon;
let client;
before(async () => {
  daemon = await startDaemon();
  client = new SandgateSandboxClient({ addr: daemon.addr });
});
after(async () => {
  client?.close();
  await daemon?.dispose();
});

// The text every tool call of a run gave the model, by call id.
function toolOutputs(result) {
  const outputs = {};
  for (const item of result.newItems) {
    if (item.type === "tool_call_output_item") outputs[item.rawItem.callId] = item.output;
  }
  return outputs;
}

const runner = () => new Runner({ tracingDisabled: true });

test("an agent with the default capabilities writes a file, runs it and reads its output; its session is gone afterwards", async () => {
  const model = new ScriptedModel([
    [
      {
        type: "apply_patch_call",
        callId: "patch",
        status: "completed",
        operation: { type: "create_file", path: "hello.py", diff: "+print(sum(range(10)))\n+open('out.txt', 'w').write('written')\n" },
      },
    ],
    [functionCall("exec_command", { cmd: "python3 hello.py && cat out.txt" }, { callId: "run" })],
    [functionCall("exec_command", { cmd: "exit 3" }, { callId: "fail" })],
    [assistantMessage("done")],
  ]);
  const agent = new SandboxAgent({ name: "coder", instructions: "Write and run code.", model, capabilities: Capabilities.default() });
  const before = new Set((await client.client.listSessions()).map((s) => s.id));
  const result = await runner().run(agent, "print the sum", { sandbox: { client } });
  assert.equal(result.finalOutput, "done");
  const out = toolOutputs(result);
  console.log(out);
  assert.match(String(out.run), /Process exited with code 0/);
  assert.match(String(out.run), /45\nwritten/);
  assert.match(String(out.fail), /Process exited with code 3/);
  const mine = (await client.client.listSessions(true)).filter((s) => !before.has(s.id));
  assert.equal(mine.length, 1);
  assert.equal(mine[0].status, "SESSION_STATUS_CLOSED");
});
