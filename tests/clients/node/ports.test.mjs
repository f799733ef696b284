// Exposed ports from the TypeScript client (docs/sessions.md "Exposed ports"): a background
// http.server in a session, exposed, fetched through the daemon's REST port with the token and
// through a signed URL without one; listed and unexposed.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client } from "../../../clients/node/dist/index.js";
import { sha256, startDaemon } from "./daemon.mjs";

const TOKEN = "node-ports-test-token";
let daemon;

before(async () => {
  daemon = await startDaemon({
    http_listen: "127.0.0.1:0",
    allow_plaintext_tokens: true,
    tenants: [{ name: "team", token_sha256: sha256(TOKEN) }],
    local: { uid_base: 330300, uid_count: 8 },
  });
});
after(async () => {
  await daemon?.dispose();
});

test("an exposed port is reached with the token or a signed URL", { timeout: 120_000 }, async () => {
  const c = new Client({ addr: daemon.addr, token: TOKEN });
  await c.withSession({}, async (s) => {
    await s.write("hello.txt", "from the sandbox\n");
    await s.start("python3 -m http.server 8000 --bind 127.0.0.1");
    const p = await s.expose(8000, { signed: true, ttlSeconds: 600 });
    assert.equal(p.port, 8000);
    assert.match(p.url, /^http:\/\/127\.0\.0\.1:\d+\/v1\/sessions\/.+\/ports\/8000\/$/);
    let answer;
    for (let i = 0; i < 300; ++i) {
      answer = await fetch(p.url + "hello.txt", { headers: { Authorization: `Bearer ${TOKEN}` } });
      if (answer.status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(answer.status, 200);
    assert.equal(await answer.text(), "from the sandbox\n");
    assert.equal((await fetch(p.url + "hello.txt")).status, 401);
    const signed = await fetch(p.signedUrl + "hello.txt");
    assert.equal(signed.status, 200);
    assert.equal(await signed.text(), "from the sandbox\n");
    assert.deepEqual((await s.ports()).map((x) => x.port), [8000]);
    await s.unexpose(8000);
    assert.equal((await fetch(p.url + "hello.txt", { headers: { Authorization: `Bearer ${TOKEN}` } })).status, 404);
  });
  c.close();
});
