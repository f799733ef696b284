// The dashboard in a real browser: Debian's Chromium, headless, driven by puppeteer-core,
// against the real daemon's HTTP port. Log in; see a run appear and its events arrive live
// while it runs; its checks, artifacts (a download checked by sha256), the report rendered and
// the chart shown; the sessions list and a session's files; and hostile content from the
// sandbox (a file name, command output, a report that smuggles HTML, a chart that carries
// script) shown inert: no script runs, no element is injected, and no byte a sandbox made is
// ever a document of the dashboard's origin, also when opened on its own as a user would (the
// chart's "open image in new tab"). A queued run's page follows it (admitted, counting its age
// and duration, ended), the header names the tenant, and a failed login's message goes once
// the login succeeds. And acting from it: a run cancelled; a session created (isolation,
// network), a shell in its terminal (hostile output inert, xterm's colours applied under the
// page's policy), its CPU and memory, its files uploaded, renamed, downloaded and deleted
// under hostile names, and closed; snapshots taken (and a pause), listed, restored into a new
// session that has the file, and deleted, a hostile label inert; every snapshot of the tenant
// on one page (restored, deleted, a hostile label inert, another tenant's never there); images
// listed, built (a fake mmdebstrap: no test builds a real image), their progress followed, a
// build cancelled, a refusal and a hostile name's error shown as text, a session made from the
// image chosen in the form, an image in use not removed. A screenshot of each page is kept in
// $SANDGATE_ARTIFACTS_DIR.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";

import puppeteer from "puppeteer-core";

import { sampleCsv, sha256, startDaemon } from "../clients/node/daemon.mjs";

const TOKEN = "dashboard-test-token";
const OTHER = "dashboard-other-token";
const OPS = "dashboard-ops-token";
const QUEUE = "dashboard-queue-token"; // a tenant that runs one run at a time
const HOSTILE = "<img src=x onerror=window.__pwned=1>";
const shots = process.env.SANDGATE_ARTIFACTS_DIR ?? mkdtempSync(join(tmpdir(), "sg-dash-shots-"));
mkdirSync(shots, { recursive: true });

let daemon;
let base;
let browser;
let page;

async function rest(path, { method = "GET", body, token = TOKEN } = {}) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

before(async () => {
  daemon = await startDaemon({
    local: {
      uid_base: 330200, // apart from the client tests' daemons
      uid_count: 16,
      // Builds images instantly, or slowly until cancelled, or failing (tests/fakes/fake_mmdebstrap.sh).
      mmdebstrap: join(dirname(fileURLToPath(import.meta.url)), "..", "fakes", "fake_mmdebstrap.sh"),
    },
    http_listen: "127.0.0.1:0",
    allow_plaintext_tokens: true,
    tenants: [
      { name: "analysts", token_sha256: sha256(TOKEN), policy: { build_images: true } },
      { name: "others", token_sha256: sha256(OTHER), policy: { images: ["host"] } },
      { name: "ops", token_sha256: sha256(OPS), operator: true },
      { name: "queue", token_sha256: sha256(QUEUE), quotas: { concurrent_runs: 1 } },
    ],
  });
  // A session from an image binds the image's root from the state directory as the session's
  // uid, so that directory must be searchable (docs/images.md, "Setup"); mkdtemp made it 0700.
  for (const dir of [daemon.dir, join(daemon.dir, "state")]) chmodSync(dir, 0o711);
  // The daemon says where HTTP listens in its daemon.http log line.
  for (let i = 0; i < 100 && !base; ++i) {
    base = daemon.log().match(/"event":"daemon\.http".*?"url":"([^"]+)"/)?.[1];
    if (!base) await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(base, `the daemon says where HTTP listens:\n${daemon.log()}`);
  browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  // Any script the sandbox smuggled in would show here: a dialog, or a page error.
  page.on("dialog", (d) => {
    page.__dialogs = (page.__dialogs ?? 0) + 1;
    d.dismiss();
  });
  page.__errors = [];
  page.on("pageerror", (e) => page.__errors.push(String(e)));
});

after(async () => {
  await browser?.close();
  await daemon?.dispose();
});

async function noScriptRan() {
  assert.equal(await page.evaluate(() => window.__pwned), undefined, "a smuggled script ran");
  assert.equal(page.__dialogs ?? 0, 0, "a dialog was opened");
}

async function logInAs(token) {
  await page.goto(`${base}/#/login`, { waitUntil: "networkidle0" });
  await page.evaluate(() => sessionStorage.clear());
  await page.goto(`${base}/#/login`, { waitUntil: "networkidle0" });
  await page.waitForSelector("form.login");
  await page.type("#token", token);
  await Promise.all([page.waitForSelector("#runs"), page.click("form.login button")]);
}

const text = (selector) => page.$eval(selector, (n) => n.textContent);
const whoSays = (words) =>
  page.waitForFunction((w) => document.getElementById("who").textContent === w, { timeout: 5000 }, words);

test("log in with the bearer token: a wrong one is told, the right one clears that and names the tenant", async () => {
  await page.goto(`${base}/#/login`, { waitUntil: "networkidle0" });
  await page.waitForSelector("form.login");
  await page.screenshot({ path: join(shots, "login.png") });
  await page.type("#token", "not-a-token");
  await page.click("form.login button");
  await page.waitForSelector("#error:not([hidden])");
  assert.match(await text("#error"), /UNAUTHENTICATED/);
  assert.equal(await text("#who"), "");
  await page.$eval("#token", (input) => (input.value = ""));
  await page.type("#token", TOKEN);
  await Promise.all([page.waitForSelector("#runs"), page.click("form.login button")]);
  assert.match(page.url(), /#\/runs$/);
  assert.equal(await page.$eval("#error", (e) => e.hidden), true, "the failed login's message is gone");
  await whoSays("tenant analysts");
});

test("a run appears, its events arrive live, then its checks, artifacts, report and chart", async () => {
  // A probe run that takes a few seconds, whose setup command and input name are hostile.
  const run = await rest("/v1/runs", {
    method: "POST",
    body: {
      playbook: "sandbox-probe",
      inputs: [{ name: `${HOSTILE}.csv`, content: readFileSync(sampleCsv).toString("base64") }],
      sandbox: {
        setupCommands: [
          "sleep 8", // long enough to open its page while it runs
          // The report quotes each setup command in a code span: this one's own backticks
          // close it, so the tags between them reach the report's Markdown as raw HTML.
          "echo '`<img src=x onerror=window.__pwned=2><script>window.__pwned=3</script>`'",
          // An element that would stand in for the page's own error box, and a form.
          "echo '`<b id=error>clobbered</b><form><input name=token></form>`'",
        ],
      },
    },
  });
  await page.waitForSelector(`tr[data-run="${run.id}"]`, { timeout: 10000 });
  await page.screenshot({ path: join(shots, "runs.png") });
  await page.click(`tr[data-run="${run.id}"] a`);
  await page.waitForSelector("#events tr[data-seq]");
  // Events are shown while the run is still going: the first row is there before the last.
  const whileRunning = await page.$$eval("#events tr[data-seq] td.type", (cells) => cells.map((c) => c.textContent));
  assert.ok(!whileRunning.includes("run.finished"), `live, not replayed at the end: ${whileRunning}`);
  await page.waitForFunction(
    () => [...document.querySelectorAll("#events td.type")].some((c) => c.textContent === "run.finished"),
    { timeout: 60000 },
  );
  const seqs = await page.$$eval("#events tr[data-seq]", (rows) => rows.map((r) => Number(r.dataset.seq)));
  assert.deepEqual(seqs, seqs.map((_, i) => i + 1), "every event once, in order");
  await page.waitForSelector("#checks td.pass");
  assert.equal(await page.$$eval("#checks td.fail", (c) => c.length), 0);
  const artifacts = await page.$$eval("#artifacts tbody tr", (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
  assert.ok(artifacts.length >= 2 && artifacts.every(([, , sha]) => /^[0-9a-f]{64}$/.test(sha)), JSON.stringify(artifacts));
  await page.waitForSelector("#memo .memo");
  // The report's smuggled HTML is gone, its text is there; no id in it can stand in for one of
  // the page's (getElementById finds the first in the document, and the memo comes first).
  assert.equal(await page.$$eval("#memo script, #memo img, #memo [onerror], #memo form, #memo input", (n) => n.length), 0);
  assert.match(await page.$eval("#memo", (m) => m.textContent), /setup/i);
  assert.match(await page.$eval("#memo", (m) => m.textContent), /clobbered/);
  assert.equal(await page.evaluate(() => document.getElementById("error").getAttribute("role")), "alert");
  const ids = await page.$$eval("#memo [id], #memo [name]", (n) => n.map((x) => x.id || x.getAttribute("name")));
  assert.ok(ids.length > 0 && ids.every((id) => id.startsWith("user-content-")), ids.join(","));
  // The box scrolls, and has followed the events to the last: run.finished is in view.
  const box = await page.$eval("#events", (b) => {
    const last = [...b.querySelectorAll("td.type")].find((c) => c.textContent === "run.finished");
    const [outer, row] = [b.getBoundingClientRect(), last.getBoundingClientRect()];
    return { overflows: b.scrollHeight > b.clientHeight, inView: row.top >= outer.top && row.bottom <= outer.bottom + 1 };
  });
  assert.deepEqual(box, { overflows: true, inView: true });
  // Command output and the input's name are text, not markup.
  const output = await page.$$eval("#events pre.output", (p) => p.map((x) => x.textContent).join("\n"));
  assert.match(output, /<script>window.__pwned=3<\/script>/);
  assert.equal(await page.$$eval("#events img, #events script", (n) => n.length), 0);
  assert.match(await page.$eval("#events", (e) => e.textContent), /<img src=x onerror=window.__pwned=1>\.csv/);
  await noScriptRan();
  await page.screenshot({ path: join(shots, "run-probe.png"), fullPage: true });

  // A download goes through the page and matches the run's sha256.
  const downloads = mkdtempSync(join(tmpdir(), "sg-dash-dl-"));
  const cdp = await page.createCDPSession();
  await cdp.send("Browser.setDownloadBehavior", { behavior: "allow", downloadPath: downloads });
  const [name, , sha] = artifacts[0];
  await page.click(`a[data-artifact="${name}"]`);
  for (let i = 0; i < 100 && !existsSync(join(downloads, name)); ++i) await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(readdirSync(downloads).filter((f) => !f.endsWith(".crdownload")), [name]);
  assert.equal(createHash("sha256").update(readFileSync(join(downloads, name))).digest("hex"), sha);
});

test("the analyst's run: memo rendered, chart shown", async () => {
  const run = await rest("/v1/runs", {
    method: "POST",
    body: { inputs: [{ name: "statements.csv", content: readFileSync(sampleCsv).toString("base64") }] },
  });
  await page.goto(`${base}/#/runs/${run.id}`, { waitUntil: "networkidle0" });
  await page.waitForSelector("#chart img", { timeout: 60000 });
  await page.waitForFunction(() => document.querySelector("#chart img").naturalWidth > 0);
  assert.ok(await page.$eval("#memo .memo", (m) => m.querySelectorAll("h1, h2, p").length > 0));
  await noScriptRan();
  await page.screenshot({ path: join(shots, "run.png"), fullPage: true });
});

// A chart whose script would read the token from sessionStorage and leave a mark in the
// dashboard origin's localStorage (shared by its tabs): in an <img> it must not run, and
// opened on its own, as "open image in new tab" opens the <img>'s URL, it must not run at the
// dashboard's origin. The sandbox swaps it in: a csv.py in the workspace stands in for the
// standard module (the program's directory comes first on sys.path), loads the real one, and
// in the second step, after the first wrote the chart, writes this one over it.
const HOSTILE_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="240" height="120" ' +
  "onload=\"localStorage.setItem('sg.pwned', sessionStorage.getItem('sandgate.token') || 'onload ' + origin)\">" +
  "<script>localStorage.setItem('sg.pwned', 'script ' + origin)</script>" +
  '<rect width="240" height="120" fill="#b3261e"/></svg>';
const SWAP_CHART = `import importlib, os, sys
here = sys.path.pop(0)
del sys.modules["csv"]
real = importlib.import_module("csv")
sys.path.insert(0, here)
sys.modules["csv"] = real
if os.path.basename(sys.argv[0]) == "recompute_metrics.py":
    with open("financial_trends.svg", "w") as f:
        f.write(${JSON.stringify(HOSTILE_SVG)})
`;

test("a chart that carries script runs at the dashboard's origin neither shown nor opened on its own", async () => {
  const run = await rest("/v1/runs", {
    method: "POST",
    body: {
      inputs: [{ name: "statements.csv", content: readFileSync(sampleCsv).toString("base64") }],
      sandbox: { files: [{ path: "csv.py", content: Buffer.from(SWAP_CHART).toString("base64") }] },
    },
  });
  await page.goto(`${base}/#/runs/${run.id}`, { waitUntil: "networkidle0" });
  await page.evaluate(() => localStorage.removeItem("sg.pwned"));
  await page.waitForSelector("#chart img", { timeout: 60000 });
  await page.waitForFunction(() => document.querySelector("#chart img").naturalWidth > 0);
  const artifact = `${base}/v1/runs/${run.id}/artifacts/financial_trends.svg`;
  const stored = await fetch(artifact, { headers: { Authorization: `Bearer ${TOKEN}` } });
  assert.equal(await stored.text(), HOSTILE_SVG, "the sandbox's chart is the one stored");
  assert.equal(stored.headers.get("content-disposition"), 'attachment; filename="financial_trends.svg"');
  assert.equal(stored.headers.get("content-security-policy"), "sandbox; default-src 'none'");
  assert.equal(stored.headers.get("x-content-type-options"), "nosniff");
  const mark = () => page.evaluate(() => localStorage.getItem("sg.pwned"));
  assert.equal(await mark(), null, "the chart's script ran in the <img>");

  // Opened on its own, in a tab of the same browser (the token's tab is the page above).
  const src = await page.$eval("#chart img", (i) => i.src);
  const tab = await browser.newPage();
  try {
    await tab.goto(src, { waitUntil: "load" });
    assert.equal(await mark(), null, "the chart's script ran at the dashboard's origin");
    assert.notEqual(await tab.evaluate(() => location.origin), new URL(base).origin);
    // The artifact's own URL with the token, as a tab that had it would: a download, not a page.
    await tab.setExtraHTTPHeaders({ Authorization: `Bearer ${TOKEN}` });
    const opened = await tab.goto(artifact).then(
      () => "shown",
      (e) => String(e),
    );
    assert.match(opened, /ERR_ABORTED/, "the artifact downloads rather than opens");
    assert.equal(await mark(), null, "the artifact's script ran at the dashboard's origin");
  } finally {
    await tab.close();
  }
  await noScriptRan();
});

test("a queued run's page follows it: admitted, counting its age and duration, then ended", async () => {
  const slow = {
    playbook: "sandbox-probe",
    inputs: [{ name: "statements.csv", content: readFileSync(sampleCsv).toString("base64") }],
    sandbox: { setupCommands: ["sleep 600"] },
  };
  const first = await rest("/v1/runs", { method: "POST", body: slow, token: QUEUE });
  const second = await rest("/v1/runs", { method: "POST", body: slow, token: QUEUE });
  const cancel = (run) => rest(`/v1/runs/${run.id}:cancel`, { method: "POST", body: {}, token: QUEUE });
  try {
    assert.equal(second.status, "RUN_STATUS_QUEUED");
    await logInAs(QUEUE);
    await page.goto(`${base}/#/runs/${second.id}`, { waitUntil: "networkidle0" });
    // The value of the run's card labelled `name`, and of a cell of the runs list (XPath: the
    // page's policy allows no eval, document.evaluate is none).
    const card = (name) => `//div[@id="run-head"]//div[@class="card"][div[@class="label"]="${name}"]/*[last()]`;
    const listed = (run, column) => `//tr[@data-run="${run.id}"]/td[${column}]`;
    const read = (xpath) => document.evaluate(xpath, document, null, XPathResult.STRING_TYPE, null).stringValue;
    const cardIs = (name, value) =>
      page.waitForFunction(
        (x, v) => document.evaluate(x, document, null, XPathResult.STRING_TYPE, null).stringValue === v,
        { timeout: 20000 },
        card(name),
        value,
      );
    // Waits (a few seconds at most) for a text to change, as an age or duration does each second.
    const changes = async (xpath) => {
      const before = await page.evaluate(read, xpath);
      await page.waitForFunction(
        (x, was) => document.evaluate(x, document, null, XPathResult.STRING_TYPE, null).stringValue !== was,
        { timeout: 5000 },
        xpath,
        before,
      );
    };
    await cardIs("status", "QUEUED");
    await changes(card("age"));

    await cancel(first);
    await cardIs("status", "RUNNING");
    await changes(card("duration"));
    await page.screenshot({ path: join(shots, "run-running.png"), fullPage: true });
    // The list counts too.
    await page.goto(`${base}/#/runs`, { waitUntil: "networkidle0" });
    await page.waitForSelector(`#runs tr[data-run="${second.id}"]`);
    await changes(listed(second, 8));

    await page.goto(`${base}/#/runs/${second.id}`, { waitUntil: "networkidle0" });
    await cancel(second);
    await cardIs("status", "CANCELLED");
    await page.waitForFunction(() =>
      [...document.querySelectorAll("#events td.type")].some((c) => c.textContent === "run.finished"),
    );
    assert.match(await page.evaluate(read, card("duration")), /^\d+\.\d s$/);
    await noScriptRan();
  } finally {
    await Promise.allSettled([cancel(first), cancel(second)]);
    await logInAs(TOKEN).catch(() => {}); // the next tests' tenant; a failure here is not news
  }
});

test("sessions: the list with in-flight count and expiry, and a hostile file name shown as text", async () => {
  const session = await rest("/v1/sessions", {
    method: "POST",
    body: { sandbox: { files: [{ path: `${HOSTILE}.txt`, content: Buffer.from("x").toString("base64") }] } },
  });
  await page.goto(`${base}/#/sessions`, { waitUntil: "networkidle0" });
  await page.waitForSelector(`tr[data-session="${session.id}"]`);
  const row = await page.$eval(`tr[data-session="${session.id}"]`, (r) => [...r.cells].map((c) => c.textContent));
  assert.equal(row[1], "ACTIVE");
  assert.match(row[5], /^\d+ s$/);
  await page.screenshot({ path: join(shots, "sessions.png") });
  await page.click(`tr[data-session="${session.id}"] a`);
  await page.waitForSelector("#files td");
  assert.ok((await page.$$eval("#files td.mono", (c) => c.map((x) => x.textContent))).includes(`${HOSTILE}.txt`));
  assert.equal(await page.$$eval("#files img", (n) => n.length), 0);
  await noScriptRan();
  await page.screenshot({ path: join(shots, "session.png") });
});

test("a run is cancelled from the runs list", async () => {
  const run = await rest("/v1/runs", {
    method: "POST",
    body: {
      playbook: "sandbox-probe",
      inputs: [{ name: "statements.csv", content: readFileSync(sampleCsv).toString("base64") }],
      sandbox: { setupCommands: ["sleep 600"] },
    },
  });
  try {
    await page.goto(`${base}/#/runs`, { waitUntil: "networkidle0" });
    await page.waitForSelector(`button[data-cancel="${run.id}"]`, { timeout: 10000 });
    await page.click(`button[data-cancel="${run.id}"]`);
    await page.waitForFunction(
      (id) => document.querySelector(`tr[data-run="${id}"] .status`)?.textContent === "CANCELLED",
      { timeout: 20000 },
      run.id,
    );
    assert.equal(await page.$(`button[data-cancel="${run.id}"]`), null, "an ended run offers no cancel");
    assert.equal((await rest(`/v1/runs/${run.id}`)).status, "RUN_STATUS_CANCELLED");
  } finally {
    await rest(`/v1/runs/${run.id}:cancel`, { method: "POST", body: {} }).catch(() => {});
  }
});

// The text the terminal shows (xterm's DOM rows).
const terminalText = () =>
  page.$eval("#terminal .xterm-rows", (r) => [...r.children].map((row) => row.textContent.replace(/\u00a0/g, " ")).join("\n"));
const terminalShows = (re, timeout = 15000) =>
  page.waitForFunction(
    (source, flags) =>
      new RegExp(source, flags).test(
        [...document.querySelectorAll("#terminal .xterm-rows > div")].map((r) => r.textContent.replace(/\u00a0/g, " ")).join("\n"),
      ),
    { timeout },
    re.source,
    re.flags,
  );
// The rows of the file browser, as [name, type, size].
const fileRows = () => page.$$eval("#files tbody tr", (rows) => rows.map((r) => [...r.cells].slice(0, 3).map((c) => c.textContent)));
const fileRow = (path) => `#files tr[data-path="${path.replace(/["\\]/g, "\\$&")}"]`;

test("a session made and closed from the dashboard: its terminal, usage and files, hostile names and output inert", async () => {
  await page.goto(`${base}/#/sessions`, { waitUntil: "networkidle0" });
  await page.waitForSelector("#new-session");
  await page.select("#new-isolation", "namespaces");
  await page.select("#new-network", "MODE_RESTRICTED");
  await page.type("#new-domains", "example.com *.pypi.org");
  await page.type("#new-idle", "300");
  await Promise.all([page.waitForSelector("#session-actions", { timeout: 30000 }), page.click("#new-session button")]);
  const sid = decodeURIComponent(page.url().split("/").pop());
  const made = await rest(`/v1/sessions/${sid}`);
  assert.equal(made.sandbox.isolation, "namespaces");
  assert.deepEqual(made.sandbox.network, { mode: "MODE_RESTRICTED", allowedDomains: ["example.com", "*.pypi.org"] });
  assert.equal(made.idleTimeout, "300s");
  assert.equal(made.labels["made-by"], "dashboard");
  try {
    // The terminal: a shell on a pty; what is typed runs, its output shows.
    await page.click("#open-terminal");
    await page.waitForSelector("#terminal .xterm-rows");
    await page.waitForFunction(() => /^p\d+: running$/.test(document.getElementById("terminal-status").textContent));
    await page.click("#terminal");
    await page.keyboard.type("echo sum=$((6*7))");
    await page.keyboard.press("Enter");
    await terminalShows(/^sum=42\s*$/m);
    // Hostile output: markup, a title (OSC 0) and a link (OSC 8) carrying script, invalid UTF-8,
    // and colours (a palette one, drawn by xterm's theme <style>, which the page applies under
    // its policy; a 24-bit one, a style attribute the policy refuses): text and colour only.
    await page.keyboard.type(
      String.raw`printf '\033]0;<img src=x onerror=window.__pwned=7>\007<script>window.__pwned=8</script> \377\376 \033]8;;javascript:window.__pwned=9\033\\link\033]8;;\033\\ \033[31mred\033[0m \033[38;2;1;2;3mdeep\033[0m end%s\n' -of-output`,
    );
    await page.keyboard.press("Enter");
    await terminalShows(/end-of-output/);
    const shown = await terminalText();
    assert.match(shown, /<script>window\.__pwned=8<\/script> [\uFFFD ]*link red deep end-of-output/);
    assert.equal(await page.$$eval("#terminal script, #terminal img, #terminal a[href^=javascript]", (n) => n.length), 0);
    const colours = await page.$$eval("#terminal .xterm-rows span", (spans) =>
      Object.fromEntries(spans.filter((s) => ["red", "deep"].includes(s.textContent)).map((s) => [s.textContent, getComputedStyle(s).color])),
    );
    assert.equal(colours.red, "rgb(204, 0, 0)", "xterm's theme applies under the page's policy");
    assert.notEqual(colours.deep, "rgb(1, 2, 3)", "no inline style applies");
    // A file whose name is not UTF-8, made in the terminal, for the browser below.
    await page.keyboard.type(String.raw`touch "$(printf 'bad\377name')"; echo made-$?`);
    await page.keyboard.press("Enter");
    await terminalShows(/^made-0\s*$/m);
    await page.screenshot({ path: join(shots, "session-terminal.png"), fullPage: true });

    // Usage: the figures come, from the session's cgroups, and CPU once there are two samples.
    await page.waitForFunction(() => /^\d+\.\d %$/.test(document.querySelector('[data-usage="cpu"]').textContent), { timeout: 10000 });
    assert.match(await text('[data-usage="memory"]'), /^\d+(\.\d)? (B|KiB|MiB|GiB)( of \d+\.\d (MiB|GiB))?$/);
    assert.ok(Number(await text('[data-usage="processes"]')) >= 1);
    const usage = await rest(`/v1/sessions/${sid}/usage`);
    assert.ok(Number(usage.memoryBytes) > 0, JSON.stringify(usage));
    assert.match(usage.cpuTime, /s$/);

    // Closing the terminal kills its shell.
    const shell = await page.$eval("#terminal", (t) => t.dataset.process);
    await page.click("#open-terminal");
    for (let i = 0; i < 100; ++i) {
      const { processes } = await rest(`/v1/sessions/${sid}/processes`);
      if (processes.find((p) => p.id === shell).state !== "STATE_RUNNING") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const { processes } = await rest(`/v1/sessions/${sid}/processes`);
    assert.equal(processes.find((p) => p.id === shell).state, "STATE_EXITED");

    // Files: upload a file with a hostile name, make a directory, rename the file into it,
    // download it, delete it; all names text, none markup.
    await page.click("#files-refresh");
    await page.waitForFunction(() => [...document.querySelectorAll("#files td")].some((c) => c.textContent === "bad\\xFFname"));
    const bad = (await fileRows()).find(([name]) => name === "bad\\xFFname");
    assert.ok(bad, JSON.stringify(await fileRows()));
    assert.match(await page.$$eval("#files tbody tr", (rows) => rows.find((r) => r.cells[0].textContent === "bad\\xFFname").textContent), /name is not UTF-8/);
    const local = mkdtempSync(join(tmpdir(), "sg-dash-up-"));
    const hostileName = `${HOSTILE}'"&.txt`;
    writeFileSync(join(local, hostileName), "uploaded from the dashboard\n");
    const input = await page.$("#upload");
    await input.uploadFile(join(local, hostileName));
    await page.waitForSelector(fileRow(hostileName));
    assert.deepEqual((await fileRows()).find(([name]) => name === hostileName), [hostileName, "regular", "28 B"]);
    const dirName = "<b id=error>dir";
    await page.type("#mkdir-name", dirName);
    await page.click("#mkdir");
    await page.waitForSelector(fileRow(dirName));
    await page.click(`${fileRow(hostileName)} button.rename`);
    await page.$eval(`${fileRow(hostileName)} input.rename-to`, (i) => (i.value = ""));
    const renamed = "<svg onload=window.__pwned=10>.txt";
    await page.type(`${fileRow(hostileName)} input.rename-to`, `${dirName}/${renamed}`);
    await page.click(`${fileRow(hostileName)} .rename-form button`);
    await page.waitForFunction((sel) => !document.querySelector(sel), {}, fileRow(hostileName));
    await page.click(`${fileRow(dirName)} button.open`);
    await page.waitForSelector(fileRow(`${dirName}/${renamed}`));
    assert.equal(await text("#files-dir"), `workspace / ${dirName}`);
    assert.equal((await rest(`/v1/sessions/${sid}/files:stat?path=${encodeURIComponent(`${dirName}/${renamed}`)}`)).sizeBytes, "28");

    await page.screenshot({ path: join(shots, "session-files.png"), fullPage: true });

    const downloads = mkdtempSync(join(tmpdir(), "sg-dash-dl-"));
    const cdp = await page.createCDPSession();
    await cdp.send("Browser.setDownloadBehavior", { behavior: "allow", downloadPath: downloads });
    await page.click(`${fileRow(`${dirName}/${renamed}`)} button.download`);
    const done = () => readdirSync(downloads).filter((f) => !f.endsWith(".crdownload"));
    for (let i = 0; i < 100 && done().length === 0; ++i) await new Promise((r) => setTimeout(r, 100));
    assert.equal(done().length, 1);
    assert.equal(readFileSync(join(downloads, done()[0]), "utf8"), "uploaded from the dashboard\n");

    const del = `${fileRow(`${dirName}/${renamed}`)} button.delete`;
    await page.click(del);
    assert.equal(await text(del), "Delete?", "a delete is asked twice");
    await page.click(del);
    await page.waitForFunction((sel) => !document.querySelector(sel), {}, fileRow(`${dirName}/${renamed}`));
    await assert.rejects(rest(`/v1/sessions/${sid}/files:stat?path=${encodeURIComponent(`${dirName}/${renamed}`)}`), /404/);
    assert.equal(await page.$$eval("#files img, #files svg, #files b, #files script", (n) => n.length), 0);
    assert.equal(await page.evaluate(() => document.getElementById("error").getAttribute("role")), "alert");
    await noScriptRan();

    // Closed from its page.
    await page.click("#close-session");
    await page.waitForFunction(() => document.querySelector("#session-head .status")?.textContent === "CLOSED", { timeout: 30000 });
    assert.equal((await rest(`/v1/sessions/${sid}`)).status, "SESSION_STATUS_CLOSED");
    await assert.rejects(rest(`/v1/sessions/${sid}/usage`), /412/);
  } finally {
    await rest(`/v1/sessions/${sid}:close`, { method: "POST", body: {} }).catch(() => {});
  }
});

// The snapshots of a session's page, as [id, size, entries, labels].
const snapshotRows = () =>
  page.$$eval("#snapshots tbody tr", (rows) => rows.map((r) => [r.cells[0], r.cells[2], r.cells[3], r.cells[4]].map((c) => c.textContent)));
const snapshotRow = (id) => `#snapshots tr[data-snapshot="${id}"]`;
// Deletes the snapshot `id` of the row `row` from the page: asked twice, one click deletes
// nothing; then the row is gone and so is the snapshot.
async function deleteSnapshot(row, id) {
  const del = `${row} button.delete`;
  await page.click(del);
  assert.equal(await text(del), "Delete?", "a delete is asked twice");
  assert.equal((await rest(`/v1/snapshots/${id}`)).id, id, "one click deletes nothing");
  await page.click(del);
  await page.waitForFunction((sel) => !document.querySelector(sel), { timeout: 10000 }, row);
  await assert.rejects(rest(`/v1/snapshots/${id}`), /: 404 /);
}
// The dashboard's own size format, for a figure the API gives.
const shownSize = (n) => (Number(n) < 1024 ? `${n} B` : `${(Number(n) / 1024).toFixed(1)} KiB`);

test("snapshots from a session's page: taken, listed, restored into a new session, paused, deleted; a hostile label inert", async () => {
  const session = await rest("/v1/sessions", { method: "POST", body: {} });
  const made = [session.id];
  const snapshots = [];
  try {
    // A file written in the session, under a hostile name: the snapshot must carry it.
    const name = `${HOSTILE}'"&.txt`;
    const put = await fetch(`${base}/v1/sessions/${session.id}/files/${encodeURIComponent(name)}`, {
      method: "PUT",
      headers: { Authorization: `Bearer ${TOKEN}` },
      body: "kept by a snapshot\n",
    });
    assert.ok(put.ok, await put.text());
    // One taken by a script, with a hostile label, listed beside the dashboard's own.
    const labelled = await rest(`/v1/sessions/${session.id}:snapshot`, { method: "POST", body: { labels: { note: HOSTILE } } });
    snapshots.push(labelled.id);

    await page.goto(`${base}/#/sessions/${encodeURIComponent(session.id)}`, { waitUntil: "networkidle0" });
    await page.waitForSelector(snapshotRow(labelled.id));
    await page.click("#take-snapshot");
    await page.waitForFunction((n) => document.querySelectorAll("#snapshots tbody tr").length === n, { timeout: 30000 }, 2);
    const listed = (await rest(`/v1/snapshots?session_id=${encodeURIComponent(session.id)}`)).snapshots;
    assert.equal(listed.length, 2);
    const [taken] = listed; // newest first
    snapshots.push(taken.id);
    assert.notEqual(taken.id, labelled.id);
    assert.equal(taken.sessionId, session.id);
    assert.deepEqual(taken.labels, { "made-by": "dashboard" });
    assert.deepEqual(
      await snapshotRows(),
      listed.map((x) => [x.id, shownSize(x.sizeBytes), String(x.files), Object.entries(x.labels).map(([k, v]) => `${k}=${v}`).join(" ")]),
    );
    assert.match(taken.id, /^snap-[0-9a-f]{32}$/);
    assert.equal((await snapshotRows())[1][3], `note=${HOSTILE}`, "the label is shown as text");
    assert.equal(await page.$$eval("#snapshots img, #snapshots script", (n) => n.length), 0);
    await page.screenshot({ path: join(shots, "session-snapshots.png"), fullPage: true });

    // Another tenant sees none of them, and can neither restore nor delete one.
    assert.deepEqual((await rest(`/v1/snapshots?session_id=${encodeURIComponent(session.id)}`, { token: OTHER })).snapshots ?? [], []);
    await assert.rejects(rest("/v1/sessions", { method: "POST", body: { fromSnapshot: taken.id }, token: OTHER }), /: 404 /);
    await assert.rejects(rest(`/v1/snapshots/${taken.id}:delete`, { method: "POST", body: {}, token: OTHER }), /: 404 /);

    // Restored into a new session, whose page opens with the file in its browser.
    await Promise.all([
      page.waitForFunction((from) => /^#\/sessions\/[^/]+$/.test(location.hash) && !location.hash.endsWith(from), { timeout: 30000 }, encodeURIComponent(session.id)),
      page.click(`${snapshotRow(taken.id)} button.restore`),
    ]);
    const restored = decodeURIComponent(page.url().split("/").pop());
    made.push(restored);
    await page.waitForSelector(fileRow(name), { timeout: 30000 });
    // The browser may render the listing again (its first answer, then the refresh) between
    // the wait and the read: read until the row is there, for at most 10 s.
    let row;
    for (let i = 0; i < 100 && !row; ++i) {
      row = (await fileRows()).find(([n]) => n === name);
      if (!row) await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(row, [name, "regular", "19 B"]);
    const file = await fetch(`${base}/v1/sessions/${restored}/files/${encodeURIComponent(name)}`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    assert.equal(await file.text(), "kept by a snapshot\n");
    assert.equal((await rest(`/v1/sessions/${restored}`)).labels["made-by"], "dashboard");
    await page.waitForSelector("#snapshots p"); // the new session has none of its own
    assert.equal(await text("#snapshots"), "No snapshots of this session.");

    // Paused from the first session's page: a snapshot, then closed; its page keeps the list.
    await page.goto(`${base}/#/sessions/${encodeURIComponent(session.id)}`, { waitUntil: "networkidle0" });
    // Its page, not the restored one's (which has a pause button too) still finishing.
    await page.waitForFunction((id) => document.querySelector("h1 .mono")?.textContent === id, { timeout: 10000 }, session.id);
    await page.waitForSelector("#pause-session");
    await page.click("#pause-session");
    await page.waitForFunction(() => document.querySelector("#session-head .status")?.textContent === "CLOSED", { timeout: 30000 });
    assert.equal((await rest(`/v1/sessions/${session.id}`)).status, "SESSION_STATUS_CLOSED");
    await page.waitForFunction((n) => document.querySelectorAll("#snapshots tbody tr").length === n, { timeout: 10000 }, 3);
    const paused = (await rest(`/v1/snapshots?session_id=${encodeURIComponent(session.id)}`)).snapshots[0];
    snapshots.push(paused.id);
    assert.equal((await snapshotRows())[0][0], paused.id);
    assert.equal(await page.$("#take-snapshot"), null, "an ended session takes no snapshot");

    await deleteSnapshot(snapshotRow(taken.id), taken.id);
    assert.deepEqual((await snapshotRows()).map(([id]) => id), [paused.id, labelled.id]);
    await noScriptRan();
  } finally {
    for (const id of snapshots) await rest(`/v1/snapshots/${id}:delete`, { method: "POST", body: {} }).catch(() => {});
    for (const id of made) await rest(`/v1/sessions/${id}:close`, { method: "POST", body: {} }).catch(() => {});
  }
});

// The rows of the page of every snapshot, as [id, session, size, entries, labels].
const allSnapshotRows = () =>
  page.$$eval("#all-snapshots tbody tr", (rows) => rows.map((r) => [0, 1, 3, 4, 5].map((i) => r.cells[i].textContent)));
const anySnapshotRow = (id) => `#all-snapshots tr[data-snapshot="${id}"]`;
const putFile = async (sid, name, body, token = TOKEN) => {
  const res = await fetch(`${base}/v1/sessions/${sid}/files/${encodeURIComponent(name)}`, {
    method: "PUT",
    headers: { Authorization: `Bearer ${token}` },
    body,
  });
  assert.ok(res.ok, await res.text());
};

test("every snapshot of the tenant on one page: its session, a hostile label inert, restored, deleted; another tenant's never shown", async () => {
  const sessions = [];
  const snapshots = [];
  const theirs = await rest("/v1/sessions", { method: "POST", body: {}, token: OTHER });
  try {
    for (let i = 0; i < 2; ++i) sessions.push((await rest("/v1/sessions", { method: "POST", body: {} })).id);
    await putFile(sessions[1], "kept.txt", "restored from the snapshots page\n");
    const hostile = await rest(`/v1/sessions/${sessions[0]}:snapshot`, { method: "POST", body: { labels: { note: HOSTILE } } });
    const plain = await rest(`/v1/sessions/${sessions[1]}:snapshot`, { method: "POST", body: {} });
    const other = await rest(`/v1/sessions/${theirs.id}:snapshot`, { method: "POST", body: { labels: { note: "theirs" } }, token: OTHER });
    snapshots.push(hostile.id, plain.id);

    await page.goto(`${base}/#/snapshots`, { waitUntil: "networkidle0" });
    await page.waitForSelector(anySnapshotRow(plain.id));
    // As the API lists them (newest first), every one of the tenant's, none of the other's.
    const listed = (await rest("/v1/snapshots")).snapshots;
    assert.deepEqual(
      await allSnapshotRows(),
      listed.map((x) => [x.id, x.sessionId, shownSize(x.sizeBytes), String(x.files ?? 0), Object.entries(x.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(" ")]),
    );
    assert.ok(listed.some((x) => x.id === hostile.id) && !listed.some((x) => x.id === other.id));
    assert.equal(await page.$(anySnapshotRow(other.id)), null, "another tenant's snapshot is shown");
    assert.equal(await text(`${anySnapshotRow(hostile.id)} td.labels`), `note=${HOSTILE}`, "the label is shown as text");
    assert.equal(await page.$$eval("#all-snapshots img, #all-snapshots script", (n) => n.length), 0);
    assert.equal(await page.$eval(`${anySnapshotRow(plain.id)} a.session`, (a) => a.getAttribute("href")), `#/sessions/${sessions[1]}`);
    assert.match(await text("#snapshot-count"), new RegExp(`^${listed.length} snapshots?, `));
    await noScriptRan();
    await page.screenshot({ path: join(shots, "snapshots.png"), fullPage: true });

    // Restored into a new session, whose page opens; the file is in it.
    await Promise.all([
      page.waitForFunction(() => /^#\/sessions\/[^/]+$/.test(location.hash), { timeout: 30000 }),
      page.click(`${anySnapshotRow(plain.id)} button.restore`),
    ]);
    const restored = decodeURIComponent(page.url().split("/").pop());
    sessions.push(restored);
    assert.ok(!sessions.slice(0, 2).includes(restored));
    const file = await fetch(`${base}/v1/sessions/${restored}/files/kept.txt`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    assert.equal(await file.text(), "restored from the snapshots page\n");

    await page.goto(`${base}/#/snapshots`, { waitUntil: "networkidle0" });
    await page.waitForSelector(anySnapshotRow(hostile.id));
    await deleteSnapshot(anySnapshotRow(hostile.id), hostile.id);
    assert.ok(await page.$(anySnapshotRow(plain.id)), "the others stay listed");

    // The other tenant's page has its own only.
    await logInAs(OTHER);
    await page.goto(`${base}/#/snapshots`, { waitUntil: "networkidle0" });
    await page.waitForSelector(anySnapshotRow(other.id));
    assert.deepEqual((await allSnapshotRows()).map(([id]) => id), [other.id]);
  } finally {
    await logInAs(TOKEN).catch(() => {});
    await rest(`/v1/sessions/${theirs.id}:close`, { method: "POST", body: {}, token: OTHER }).catch(() => {});
    for (const id of snapshots) await rest(`/v1/snapshots/${id}:delete`, { method: "POST", body: {} }).catch(() => {});
    for (const id of sessions) await rest(`/v1/sessions/${id}:close`, { method: "POST", body: {} }).catch(() => {});
  }
});

// An image's row on the images page, as [name, state, packages, size, built by].
const imageRow = (name) => page.$eval(`#images tr[data-image="${name}"]`, (r) => [...r.cells].slice(0, 5).map((c) => c.textContent));
const buildStatus = (re, timeout = 20000) =>
  page.waitForFunction((source) => new RegExp(source).test(document.getElementById("build-status").textContent), { timeout }, re.source);
async function buildFromPage(name, packages) {
  await page.$eval("#image-name", (i) => (i.value = ""));
  await page.$eval("#image-packages", (i) => (i.value = ""));
  await page.type("#image-name", name);
  await page.type("#image-packages", packages);
  await page.click("#build-image button[type=submit]");
}
// The message the API gives for a call, as the page shows it ("STATUS: message").
async function apiSays(path, { method = "POST", body, token = TOKEN }) {
  const res = await fetch(`${base}${path}`, { method, headers: { Authorization: `Bearer ${token}` }, body: JSON.stringify(body) });
  assert.ok(!res.ok);
  const json = await res.json();
  return `${json.status}: ${json.message}`;
}

test("images: built with its progress followed, one cancelled, one failed, refusals and a hostile name shown as text; another tenant's not shown", async () => {
  try {
    await page.goto(`${base}/#/images`, { waitUntil: "networkidle0" });
    await page.waitForSelector('#images tr[data-image="host"]');

    // Built (the fake builder is quick): ready, listed with its packages and size.
    await buildFromPage("dash-built", "python3-minimal, busybox");
    await buildStatus(/^dash-built is ready: /);
    const built = await rest("/v1/images/dash-built");
    assert.equal(built.state, "STATE_READY");
    assert.deepEqual(built.packages, ["busybox", "python3-minimal"]);
    await page.waitForSelector('#images tr[data-image="dash-built"]');
    assert.deepEqual(await imageRow("dash-built"), ["dash-built", "ready", "busybox, python3-minimal", shownSize(built.sizeBytes), "analysts"]);
    // Its first line, whichever the POST's answer carried: queued, or the builder's command.
    assert.match(await text("#build-log"), /queued: busybox, python3-minimal|--include=busybox,python3-minimal /);

    // A slow build: its lines arrive while it runs (markup in them is text), then it is cancelled.
    await buildFromPage("dash-slow", "slow");
    await page.waitForFunction(() => /slow step \d+ <img src=x onerror=window.__pwned=20>/.test(document.getElementById("build-log").textContent), { timeout: 20000 });
    assert.equal(await text("#build-status"), "building dash-slow…");
    assert.equal((await rest("/v1/images/dash-slow")).state, "STATE_BUILDING");
    assert.equal(await page.$$eval("#build-log *, #images img", (n) => n.length), 0, "a progress line became markup");
    await page.screenshot({ path: join(shots, "images-building.png"), fullPage: true });
    await page.click("#cancel-build");
    await buildStatus(/^the build of dash-slow was cancelled$/);
    await assert.rejects(rest("/v1/images/dash-slow"), /: 404 /);
    assert.equal(await page.$("#cancel-build:not([hidden])"), null);
    await page.waitForFunction(() => !document.querySelector('#images tr[data-image="dash-slow"]'));

    // A build that fails ends without an image, and says so.
    await buildFromPage("dash-bad", "missing");
    await buildStatus(/^the build of dash-bad ended without an image/);
    await assert.rejects(rest("/v1/images/dash-bad"), /: 404 /);

    // Refused: a hostile name, hostile package names, a name that exists; each with the API's
    // message, in full and as text.
    const refusals = [
      [`${HOSTILE}`, "busybox", { name: HOSTILE, packages: ["busybox"] }],
      ["dash-pkgs", "<b>bold</b>", { name: "dash-pkgs", packages: ["<b>bold</b>"] }],
      ["dash-built", "busybox", { name: "dash-built", packages: ["busybox"] }],
    ];
    for (const [name, packages, body] of refusals) {
      const says = await apiSays("/v1/images", { body });
      await buildFromPage(name, packages);
      await page.waitForFunction((want) => document.getElementById("build-status").textContent === want, { timeout: 10000 }, says);
      assert.match(says, /^(INVALID_ARGUMENT|ALREADY_EXISTS): /);
      assert.equal(await page.$eval("#build-status", (p) => p.className), "fail refusal");
      assert.equal(await page.$$eval("#build-status *", (n) => n.length), 0, "the message became markup");
      assert.equal(await page.$eval("#build-log", (l) => l.hidden), true, "the last build's lines are shown");
    }
    await noScriptRan();
    await page.screenshot({ path: join(shots, "images.png"), fullPage: true });

    // A tenant whose policy lets it use the host only: the built image is not shown to it (nor
    // offered for a session), and its build is refused with the daemon's message.
    await logInAs(OTHER);
    await page.goto(`${base}/#/images`, { waitUntil: "networkidle0" });
    await page.waitForSelector('#images tr[data-image="host"]');
    assert.deepEqual(await page.$$eval("#images tr[data-image]", (rows) => rows.map((r) => r.dataset.image)), ["host"]);
    const says = await apiSays("/v1/images", { body: { name: "their-image", packages: ["busybox"] }, token: OTHER });
    assert.match(says, /^PERMISSION_DENIED: .*may not build/);
    await buildFromPage("their-image", "busybox");
    await page.waitForFunction((want) => document.getElementById("build-status").textContent === want, { timeout: 10000 }, says);
    await page.screenshot({ path: join(shots, "images-refused.png"), fullPage: true });
    await page.goto(`${base}/#/sessions`, { waitUntil: "networkidle0" });
    await page.waitForSelector("#new-image");
    await new Promise((r) => setTimeout(r, 500)); // the image list's answer, had it any to add
    assert.deepEqual(await page.$$eval("#new-image option", (o) => o.map((x) => x.value)), [""]);
  } finally {
    await logInAs(TOKEN).catch(() => {});
    await rest("/v1/images/dash-slow", { method: "DELETE" }).catch(() => {}); // the build thread's
  }
});

test("a session made from the image chosen in the form has it (the API says so); an image in use is not removed, with the daemon's message", async () => {
  await rest("/v1/images", { method: "POST", body: { name: "dash-use", packages: ["coreutils"] } });
  let image;
  for (let i = 0; i < 100 && image?.state !== "STATE_READY"; ++i) {
    image = await rest("/v1/images/dash-use");
    if (image.state !== "STATE_READY") await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(image.state, "STATE_READY");
  let sid;
  try {
    await page.goto(`${base}/#/sessions`, { waitUntil: "networkidle0" });
    await page.waitForSelector('#new-image option[value="dash-use"]');
    assert.equal(await page.$eval("#new-image", (s) => s.value), "", "host is the default");
    await page.select("#new-image", "dash-use");
    await page.select("#new-isolation", "namespaces");
    await Promise.all([page.waitForSelector("#session-actions", { timeout: 30000 }), page.click("#new-session button")]);
    sid = decodeURIComponent(page.url().split("/").pop());
    const made = await rest(`/v1/sessions/${sid}`);
    assert.equal(made.sandbox.image, "dash-use");
    assert.equal(made.sandbox.imageDigest, image.digest);
    assert.match(await text("#session-head"), /image dash-use/);
    // Its root is the image's: the fake one has an empty /usr, so the terminal finds no shell
    // (the host's root has one).
    await page.click("#open-terminal");
    await page.waitForFunction(() => /: ended, exit 127$/.test(document.getElementById("terminal-status").textContent), { timeout: 15000 });
    await terminalShows(/\/bin\/sh: No such file or directory/);
    await page.goto(`${base}/#/sessions`, { waitUntil: "networkidle0" });
    await page.waitForSelector(`tr[data-session="${sid}"]`);
    assert.equal(await page.$eval(`tr[data-session="${sid}"]`, (r) => r.cells[7].textContent), "dash-use");

    // Removing it while the session lives: refused, the daemon's message in the toast.
    const says = await apiSays("/v1/images/dash-use", { method: "DELETE" });
    assert.match(says, /^FAILED_PRECONDITION: .*in use by 1 live session/);
    await page.goto(`${base}/#/images`, { waitUntil: "networkidle0" });
    const remove = '#images tr[data-image="dash-use"] button.remove';
    await page.waitForSelector(remove);
    await page.click(remove);
    assert.equal(await text(remove), "Remove?", "a removal is asked twice");
    await page.click(remove);
    await page.waitForFunction((want) => document.getElementById("error").textContent === want, { timeout: 10000 }, says);
    assert.equal((await rest("/v1/images/dash-use")).state, "STATE_READY");

    // Once the session is closed, it goes.
    await rest(`/v1/sessions/${sid}:close`, { method: "POST", body: {} });
    const armed = await page.$(remove);
    await page.click("#images-refresh");
    await page.waitForFunction((button) => !button.isConnected, { timeout: 10000 }, armed); // the list redrawn
    await page.click(remove);
    await page.click(remove);
    await page.waitForFunction(() => !document.querySelector('#images tr[data-image="dash-use"]'), { timeout: 10000 });
    await assert.rejects(rest("/v1/images/dash-use"), /: 404 /);
  } finally {
    if (sid) await rest(`/v1/sessions/${sid}:close`, { method: "POST", body: {} }).catch(() => {});
    await rest("/v1/images/dash-use", { method: "DELETE" }).catch(() => {});
  }
});

test("a page still loading does not draw over the one asked for after it", async () => {
  const session = await rest("/v1/sessions", { method: "POST", body: {} });
  // The session's own GET is held until released: its page waits for it while another opens.
  let asked;
  const seen = new Promise((r) => (asked = r));
  let release;
  const held = new Promise((r) => (release = r));
  const hold = async (request) => {
    if (new URL(request.url()).pathname === `/v1/sessions/${session.id}`) {
      asked();
      await held;
    }
    await request.continue();
  };
  await page.goto(`${base}/#/runs`, { waitUntil: "networkidle0" });
  page.on("request", hold);
  await page.setRequestInterception(true);
  try {
    await page.evaluate((id) => (location.hash = `#/sessions/${id}`), session.id);
    await seen;
    await page.evaluate(() => (location.hash = "#/images"));
    release();
    await page.waitForSelector('#images tr[data-image="host"]');
    await page.waitForNetworkIdle({ idleTime: 500 });
    assert.equal(await text("main h1"), "Images", "the session's page drew over the images page");
    assert.equal(await page.$("#session-head"), null);
  } finally {
    release();
    await page.setRequestInterception(false);
    page.off("request", hold);
    await rest(`/v1/sessions/${session.id}:close`, { method: "POST", body: {} }).catch(() => {});
  }
});

test("a session is closed from the sessions list; another tenant's usage is not found", async () => {
  const session = await rest("/v1/sessions", { method: "POST", body: {} });
  await assert.rejects(rest(`/v1/sessions/${session.id}/usage`, { token: OTHER }), /404/);
  await assert.rejects(rest("/v1/sessions/%FF%FE/usage"), /: 400 .*UTF-8/);
  await assert.rejects(rest("/v1/sessions/..%2F..%2Fetc/usage"), /: 404 /);
  await page.goto(`${base}/#/sessions`, { waitUntil: "networkidle0" });
  await page.waitForSelector(`button[data-close="${session.id}"]`);
  await page.click(`button[data-close="${session.id}"]`);
  await page.waitForFunction(
    (id) => document.querySelector(`tr[data-session="${id}"] .status`)?.textContent === "CLOSED",
    { timeout: 30000 },
    session.id,
  );
  assert.equal(await page.$(`button[data-close="${session.id}"]`), null);
});

test("the cleanup state: operators see the journal (the open session in it), tenants are told", async () => {
  await page.goto(`${base}/#/cleanup`, { waitUntil: "networkidle0" });
  await page.waitForFunction(() => /operators/.test(document.querySelector("#resources")?.textContent ?? ""));
  await logInAs(OPS);
  await whoSays("tenant ops (operator)");
  await page.goto(`${base}/#/cleanup`, { waitUntil: "networkidle0" });
  await page.waitForSelector("#resources tr[data-resource]");
  const kinds = await page.$$eval("#resources tr[data-resource] td:nth-child(3)", (c) => c.map((x) => x.textContent));
  assert.ok(kinds.includes("session"), kinds.join(","));
  await page.screenshot({ path: join(shots, "cleanup.png") });
});

test("a tenant sees only its own runs", async () => {
  await logInAs(OTHER);
  await page.waitForSelector("#runs table");
  assert.equal(await page.$$eval("#runs tr[data-run]", (rows) => rows.length), 0);
  await logInAs(TOKEN);
  await page.waitForSelector("#runs tr[data-run]");
  assert.ok((await page.$$eval("#runs tr[data-run]", (rows) => rows.length)) >= 2);
  assert.deepEqual(page.__errors, []);
});
