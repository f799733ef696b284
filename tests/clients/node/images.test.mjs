// Images through the TypeScript client against the real daemon: build (progress streamed,
// cancel, a second build refused), get, list, delete, the daemon's refusals as SandgateError,
// and a session from an image. Builds use tests/fakes/fake_mmdebstrap.sh (no network, a
// second each); the session runs on the busybox image integration.images keeps in its cache,
// when it is there.
import assert from "node:assert/strict";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { Client, SandgateError, status } from "../../../clients/node/dist/index.js";
import { repo, sha256, startDaemon } from "./daemon.mjs";

const TOKEN = "node-images-token"; // may build
const USER = "node-images-user"; // may use "tiny" and "fake", may not build
const CACHE = "/var/tmp/sandgate-test-image-cache"; // integration.images keeps "tiny" there
// A fake build takes a second: a test that runs longer is a failure, never a hang.
const LIMIT = { timeout: 60_000 };
let daemon;
let hasTiny = false;
let client;

// Makes the cache's "tiny" one of the daemon's images (its record copied, its root linked,
// never written); false when the cache has none.
function linkCachedTiny(stateDir) {
  const record = join(CACHE, "names", "tiny.json");
  if (!existsSync(record)) return false;
  const { digest } = JSON.parse(readFileSync(record, "utf8"));
  const images = join(stateDir, "images");
  mkdirSync(join(images, "names"), { recursive: true });
  copyFileSync(record, join(images, "names", "tiny.json"));
  chmodSync(CACHE, 0o711); // searchable by the sandbox's uid, as integration.images makes it
  symlinkSync(join(CACHE, digest), join(images, digest));
  return true;
}

before(async () => {
  daemon = await startDaemon(
    {
      tenants: [
        { name: "team", token_sha256: sha256(TOKEN), policy: { build_images: true } },
        { name: "user", token_sha256: sha256(USER), policy: { images: ["tiny", "fake"] } },
      ],
      local: { uid_base: 331100, uid_count: 16, mmdebstrap: join(repo, "tests", "fakes", "fake_mmdebstrap.sh") },
    },
    { beforeStart: (stateDir) => void (hasTiny = linkCachedTiny(stateDir)) },
  );
  client = new Client({ addr: daemon.addr, token: TOKEN });
});
after(async () => {
  client?.close();
  await daemon?.dispose();
});

// Rejects with a SandgateError of `code` whose message names `words`.
async function refused(promise, code, words) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof SandgateError, String(e));
    assert.equal(e.code, code, e.message);
    assert.match(e.message, words);
    return true;
  });
}

// Waits for a cancelled build to end (the builder is stopped and cleaned up first).
async function gone(name) {
  for (let i = 0; i < 200; ++i) {
    try {
      await client.getImage(name);
    } catch (e) {
      if (e.code === status.NOT_FOUND) return;
      throw e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`the cancelled build of ${name} is still there`);
}

// Reads a build's progress up to `line`.
async function readUntil(build, line) {
  for await (const l of build) if (l === line) return;
  assert.fail(`the build ended before "${line}"`);
}

test("a build streams its progress; the image is listed, got and deleted", LIMIT, async () => {
  const build = client.buildImage("fake", ["zlib1g", "busybox", "busybox"]);
  const lines = [];
  for await (const line of build) lines.push(line);
  assert.ok(lines.includes("I: fake mmdebstrap: including busybox,zlib1g"), lines.join("\n"));
  assert.match(lines.at(-1), /^built sha256-/);
  const image = await build.image;
  assert.equal(image.state, "STATE_READY");
  assert.deepEqual(image.packages, ["busybox", "zlib1g"]);
  assert.equal(image.builtBy, "team");
  assert.equal((await client.getImage("fake")).digest, image.digest);
  assert.ok((await client.listImages()).some((i) => i.name === "fake"));
  assert.equal((await client.deleteImage("fake")).name, "fake");
  await refused(client.getImage("fake"), status.NOT_FOUND, /fake/);
});

test("a build its caller cancels leaves nothing; a second build of the name is refused", LIMIT, async () => {
  const build = client.buildImage("slow", ["slow"]);
  await readUntil(build, "I: waiting to be cancelled");
  assert.equal((await client.getImage("slow")).state, "STATE_BUILDING");
  await refused(client.buildImage("slow", ["slow"]).wait(), status.ALREADY_EXISTS, /slow/);
  build.cancel();
  await gone("slow");
});

test("a detached build goes on after its call; delete cancels it", LIMIT, async () => {
  const build = client.buildImage("detached", ["slow"], { detach: true });
  await readUntil(build, "I: waiting to be cancelled");
  build.cancel();
  assert.equal((await client.getImage("detached")).state, "STATE_BUILDING");
  assert.equal((await client.deleteImage("detached")).name, "detached");
  await gone("detached");
});

test("hostile builds are refused, naming the problem", LIMIT, async () => {
  for (const [name, packages, words] of [
    ["../etc", ["busybox"], /name/],
    ["host", ["busybox"], /host/],
    ["b\u00e9ad", ["busybox"], /name/],
    ["x".repeat(64), ["busybox"], /63/],
    ["nopkg", [], /packages/],
    ["badpkg", ["Bad Package"], /Bad Package/],
    ["absent", ["missing"], /missing/],
  ]) {
    await refused(client.buildImage(name, packages).wait(), status.INVALID_ARGUMENT, words);
  }
});

test("another tenant's policy is kept", LIMIT, async () => {
  await client.buildImage("private", ["busybox"]).wait();
  const user = new Client({ addr: daemon.addr, token: USER });
  try {
    await refused(user.buildImage("fake", ["busybox"]).wait(), status.PERMISSION_DENIED, /build_images/);
    await refused(user.getImage("private"), status.PERMISSION_DENIED, /private/);
    assert.ok(!(await user.listImages()).some((i) => i.name === "private"));
    await refused(user.createSession({ image: "private" }), status.PERMISSION_DENIED, /private/);
  } finally {
    user.close();
    await client.deleteImage("private");
  }
});

test("a session names its image", LIMIT, async (t) => {
  if (!hasTiny) {
    t.skip(`no "tiny" in ${CACHE}: ctest -R integration.images builds it`);
    return;
  }
  const user = new Client({ addr: daemon.addr, token: USER });
  try {
    await user.withSession({ image: "tiny" }, async (s) => {
      assert.equal(s.record.sandbox.image, "tiny");
      assert.match(s.record.sandbox.imageDigest, /^sha256-/);
      const { exitCode, stdout } = await s.run("busybox echo from-tiny; test -e /usr/bin/python3 || echo no-python");
      assert.deepEqual([exitCode, stdout], [0, "from-tiny\nno-python\n"]);
    });
  } finally {
    user.close();
  }
});

test("an unknown image is NOT_FOUND, naming it", LIMIT, async () => {
  await refused(client.createSession({ image: "nosuch" }), status.NOT_FOUND, /nosuch/);
  await refused(client.runAnalysis({ name: "a.csv", content: "x" }, { image: "nosuch" }), status.NOT_FOUND, /nosuch/);
});
