// sandgate's dashboard: runs, a run's live events, checks, artifacts, memo and chart; sessions
// and their files. It reads and acts through the REST/JSON face of the API (proto3 JSON
// mapping) with the caller's bearer token, which stays in this tab's sessionStorage and goes
// only in the Authorization header of its own requests (no cookie: another site's page cannot
// make the browser act with it). It acts too: creates and closes sessions, cancels runs,
// manages a session's files, opens a terminal into it (xterm.js over the process routes),
// shows its CPU and memory, and takes, restores and deletes its snapshots; lists all of the
// tenant's snapshots, and the images it may use (builds and removes them, where its policy
// lets it), and makes sessions from either.
//
// Everything shown comes from sandboxes and callers, so nothing is ever parsed as HTML here:
// every text goes in with textContent, except the memo, which marked renders and DOMPurify
// sanitises into a DOM fragment (never innerHTML). No byte a sandbox made is ever given a URL
// of this origin that could be opened as a document: a blob: URL is of the page's origin, and
// an SVG opened from one (the chart's "open image in new tab") would run its scripts here and
// read the token. So the chart is an <img> of a data: URL (an <img> runs no script; opened as
// a page, a data: URL is a unique origin), and a download is an octet-stream blob behind a
// download link. The page's Content-Security-Policy (script-src 'self') backs all of this: an
// inline script or handler that slipped through would not run.
"use strict";

const TOKEN_KEY = "sandgate.token";
const main = document.getElementById("main");
const who = document.getElementById("who");
let stopPage = () => {}; // ends the current page's streams and timers

// ---- API ---------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(httpStatus, status, message) {
    super(`${status}: ${message}`);
    this.httpStatus = httpStatus;
  }
}

function headers(extra = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}`, ...extra } : extra;
}

async function apiError(res) {
  let body = {};
  try {
    body = await res.json();
  } catch {
    // not JSON: the status line says enough
  }
  if (res.status === 401) {
    sessionStorage.removeItem(TOKEN_KEY);
    who.textContent = "";
    location.hash = "#/login";
  }
  return new ApiError(res.status, body.status ?? String(res.status), body.message ?? res.statusText);
}

async function api(path, options = {}) {
  const res = await fetch(path, { ...options, headers: headers(options.headers) });
  if (!res.ok) throw await apiError(res);
  return res;
}
const getJson = async (path, options = {}) => (await api(path, options)).json();
const postJson = async (path, body = {}, options = {}) =>
  (
    await api(path, {
      ...options,
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    })
  ).json();
const enc = encodeURIComponent;

// A run's events from after `afterSeq`, live, each once, until run.finished: server-sent
// events over fetch (EventSource cannot send the Authorization header), reconnecting with
// Last-Event-ID after a break.
async function followEvents(runId, afterSeq, onEvent, signal) {
  let last = afterSeq;
  while (!signal.aborted) {
    try {
      const res = await api(`/v1/runs/${enc(runId)}/events`, {
        headers: { "Last-Event-ID": String(last), Accept: "text/event-stream" },
        signal,
      });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value.replace(/\r\n?/g, "\n");
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const data = buffer
            .slice(0, end)
            .split("\n")
            .filter((line) => line.startsWith("data:"))
            .map((line) => line.slice(line[5] === " " ? 6 : 5))
            .join("\n");
          buffer = buffer.slice(end + 2);
          if (!data) continue; // a comment (heartbeat) or a field we do not use
          const event = JSON.parse(data);
          const seq = Number(event.seq ?? 0);
          if (seq <= last) continue;
          last = seq;
          onEvent(event);
          if (event.type === "run.finished") return;
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof ApiError && e.httpStatus < 500) throw e;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

// ---- DOM helpers (text only) ------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c != null) node.append(c);
  return node;
}

function table(columns, rows) {
  const head = el("tr", {}, ...columns.map((c) => el("th", { text: c })));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows));
}

const short = (status, prefix) => (status ?? "").replace(prefix, "");
const runStatus = (s) => el("span", { class: `status ${short(s, "RUN_STATUS_")}`, text: short(s, "RUN_STATUS_") });

function age(ts) {
  if (!ts) return "";
  const s = Math.max(0, (Date.now() - Date.parse(ts)) / 1000);
  return s < 90 ? `${Math.round(s)} s` : s < 5400 ? `${Math.round(s / 60)} min` : `${Math.round(s / 3600)} h`;
}

function duration(from, to) {
  if (!from) return "";
  const s = Math.max(0, ((to ? Date.parse(to) : Date.now()) - Date.parse(from)) / 1000);
  return `${s.toFixed(1)} s`;
}

// An age, or a duration that has not ended, as text that the ticker below keeps current: a
// page shows it once, and it goes on counting while it is on screen.
const liveAge = (ts) => el("span", { "data-age": ts ?? "", text: age(ts) });
const liveDuration = (from, to) =>
  to || !from ? el("span", { text: duration(from, to) }) : el("span", { "data-since": from, text: duration(from) });

function tick() {
  for (const n of main.querySelectorAll("[data-age]")) n.textContent = age(n.dataset.age);
  for (const n of main.querySelectorAll("[data-since]")) n.textContent = duration(n.dataset.since);
}
setInterval(tick, 1000);

const bytes = (n) => {
  const v = Number(n ?? 0);
  if (v < 1024) return `${v} B`;
  if (v < 1 << 20) return `${(v / 1024).toFixed(1)} KiB`;
  return v < 1 << 30 ? `${(v / (1 << 20)).toFixed(1)} MiB` : `${(v / (1 << 30)).toFixed(1)} GiB`;
};

const base64Bytes = (b64) => Uint8Array.from(atob(b64 ?? ""), (c) => c.charCodeAt(0));
const decodeBase64 = (b64) => new TextDecoder().decode(base64Bytes(b64));
const bytesBase64 = (bytes) => btoa(Array.from(bytes, (b) => String.fromCharCode(b)).join(""));

// Whether a destructive button's click is its second: asked twice, not by a dialog, the first
// click arms it (and says so on the button).
function confirmed(button) {
  if (button.dataset.armed === "1") return true;
  button.dataset.armed = "1";
  button.textContent = `${button.textContent}?`;
  return false;
}

// A button that does `fn` when clicked, disabled until it is done; an error goes to the toast.
function action(label, attrs, fn) {
  const button = el("button", { type: "button", text: label, ...attrs });
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await fn(button);
    } catch (e) {
      showError(e);
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

// The error toast: shown for a while, or until what it complains about is put right (a good
// login after a bad one).
const errorBox = document.getElementById("error");
let errorTimer = 0;

function clearError() {
  clearTimeout(errorTimer);
  errorBox.hidden = true;
  errorBox.textContent = "";
}

function showError(e) {
  clearTimeout(errorTimer);
  errorBox.textContent = e.message;
  errorBox.hidden = false;
  errorTimer = setTimeout(clearError, 6000);
}

// Which tenant the token is, in the header (GET /v1/whoami); an answer about a token that
// has since been replaced is dropped.
async function showWho() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const me = await getJson("/v1/whoami");
  if (sessionStorage.getItem(TOKEN_KEY) !== token) return;
  who.textContent = `tenant ${me.tenant}${me.operator ? " (operator)" : ""}`;
}

// ---- pages -----------------------------------------------------------------------------

function loginPage() {
  const input = el("input", { type: "password", id: "token", autocomplete: "off", required: "" });
  const form = el(
    "form",
    { class: "login" },
    el("h1", { text: "Log in" }),
    el("label", { for: "token", text: "Bearer token" }),
    input,
    el("button", { type: "submit", text: "Log in" }),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    who.textContent = "";
    try {
      await showWho();
      clearError();
      location.hash = "#/runs";
    } catch (e) {
      showError(e);
    }
  });
  main.replaceChildren(form);
}

const finished = (status) => ["SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"].includes(short(status, "RUN_STATUS_"));

// Cancels a queued or running run (POST /v1/runs/{id}:cancel), then `then()` shows it again.
const cancelButton = (runId, then) =>
  action("Cancel", { class: "cancel-run", "data-cancel": runId }, async () => {
    await postJson(`/v1/runs/${enc(runId)}:cancel`);
    await then();
  });

async function runsPage() {
  const filter = el("input", { type: "search", id: "filter", placeholder: "filter: id, playbook, agent, tenant…" });
  const status = el(
    "select",
    { id: "status-filter" },
    ...["", "QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"].map((s) =>
      el("option", { value: s, text: s || "any status" }),
    ),
  );
  const holder = el("div", { id: "runs" });
  main.replaceChildren(el("h1", { text: "Runs" }), el("div", { class: "filters" }, filter, status), holder);
  let runs = [];
  const render = () => {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    const shown = runs.filter((r) => {
      if (status.value && short(r.status, "RUN_STATUS_") !== status.value) return false;
      const hay = [r.id, r.playbook, r.agent, r.provider, r.tenant].join(" ").toLowerCase();
      return words.every((w) => hay.includes(w));
    });
    holder.replaceChildren(
      table(
        ["run", "status", "playbook", "agent", "provider", "tenant", "age", "duration", ""],
        shown.map((r) =>
          el(
            "tr",
            { "data-run": r.id },
            el("td", {}, el("a", { href: `#/runs/${enc(r.id)}`, class: "mono", text: r.id })),
            el("td", {}, runStatus(r.status)),
            el("td", { text: r.playbook }),
            el("td", { text: r.agent }),
            el("td", { text: r.provider }),
            el("td", { text: r.tenant }),
            el("td", {}, liveAge(r.createdAt)),
            el("td", {}, liveDuration(r.startedAt, r.finishedAt)),
            el("td", {}, finished(r.status) ? null : cancelButton(r.id, load)),
          ),
        ),
      ),
    );
  };
  filter.addEventListener("input", render);
  status.addEventListener("change", render);
  const load = async () => {
    runs = (await getJson("/v1/runs?pageSize=200")).runs ?? [];
    render();
  };
  await load();
  const timer = setInterval(() => load().catch(showError), 2000);
  return () => clearInterval(timer);
}

function eventDetail(e) {
  if (e.commandOutput) return el("pre", { class: "output", text: decodeBase64(e.commandOutput.data) });
  if (e.commandStarted) return el("code", { text: (e.commandStarted.argv ?? []).join(" ") });
  if (e.commandFinished) return el("span", { text: `exit ${e.commandFinished.exitCode ?? 0}` });
  if (e.check) return el("span", { class: e.check.passed ? "pass" : "fail", text: `${e.check.name}: ${e.check.detail ?? ""}` });
  if (e.notice) return el("span", { text: e.notice.message });
  if (e.agentMessage) return el("span", { text: e.agentMessage.text });
  if (e.stepStarted) return el("span", { text: e.stepStarted.name });
  if (e.stepFinished) return el("span", { text: `${e.stepFinished.name} ${e.stepFinished.ok ? "ok" : "failed"}` });
  if (e.artifactCollected) return el("span", { text: e.artifactCollected.artifact?.name ?? "" });
  if (e.fileTransferred) {
    const into = e.fileTransferred.direction === "DIRECTION_INTO_SANDBOX";
    return el("span", { text: `${into ? "into" : "out of"} the sandbox: ${e.fileTransferred.path} (${bytes(e.fileTransferred.sizeBytes)})` });
  }
  if (e.sessionCreated) return el("span", { text: e.sessionCreated.fromWarmPool ? "from the warm pool" : "" });
  if (e.runFinished) return el("span", { text: `${short(e.runFinished.status, "RUN_STATUS_")} ${e.runFinished.reason ?? ""}` });
  if (e.network) return el("span", { text: `${e.network.verdict} ${e.network.host}:${e.network.port}` });
  if (e.tokenUsage) return el("span", { text: `${e.tokenUsage.totalTokens ?? 0} tokens` });
  return el("span", { text: "" });
}

async function artifactBlob(runId, name) {
  return (await api(`/v1/runs/${enc(runId)}/artifacts/${enc(name)}`)).blob();
}

// An artifact saved to disk: the bytes as an octet-stream blob, so even a navigation to its
// URL would download it rather than show it as a page of this origin.
async function download(runId, name) {
  saveBlob(await artifactBlob(runId, name), name);
}

// Saves bytes as a file called `name`: an octet-stream blob behind a download link.
function saveBlob(bytes, name) {
  const url = URL.createObjectURL(new Blob([bytes], { type: "application/octet-stream" }));
  el("a", { href: url, download: name }).click();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// An image the sandbox made, as a data: URL: shown in an <img> it runs no script, and opened
// on its own it is a document of a unique origin, never of this one (as a blob: URL would be).
function dataUrl(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

// Markdown a sandbox wrote, as a sanitised DOM fragment: HTML only (no inline SVG or MathML),
// no forms or style sheets, and every id and name prefixed ("user-content-"), so neither a
// heading's id nor a smuggled one can stand in for one of the page's own elements.
function renderMarkdown(text) {
  return DOMPurify.sanitize(marked.parse(text), {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ["style", "form", "input", "button", "select", "textarea"],
    SANITIZE_NAMED_PROPS: true,
    RETURN_DOM_FRAGMENT: true,
  });
}


async function runPage(runId) {
  const abort = new AbortController();
  const head = el("div", { id: "run-head" });
  const summary = el("div", { id: "summary" });
  const checks = el("div", { id: "checks" });
  const artifacts = el("div", { id: "artifacts" });
  const memo = el("div", { id: "memo" });
  const chart = el("div", { id: "chart", class: "chart" });
  const tokens = el("p", { id: "tokens" });
  const eventsTable = table(["seq", "time", "type", "detail"], []);
  const events = eventsTable.querySelector("tbody");
  const eventsBox = el("div", { id: "events" }, eventsTable);
  main.replaceChildren(
    el("h1", {}, "Run ", el("span", { class: "mono", text: runId })),
    head,
    summary,
    el("h2", { text: "Events" }),
    eventsBox,
    tokens,
    el("h2", { text: "Checks" }),
    checks,
    el("h2", { text: "Artifacts" }),
    artifacts,
    el("h2", { text: "Memo or report" }),
    memo,
    el("h2", { text: "Chart" }),
    chart,
  );
  let usage = 0;
  let shown = "";
  let done = false;
  const showRun = async () => {
    const r = await getJson(`/v1/runs/${enc(runId)}`);
    if (abort.signal.aborted) return r;
    done = finished(r.status);
    head.replaceChildren(
      el(
        "div",
        { class: "grid" },
        ...[
          ["status", runStatus(r.status)],
          ["playbook", r.playbook],
          ["agent", r.agent],
          ["provider", r.provider],
          ["tenant", r.tenant],
          ["age", liveAge(r.createdAt)],
          ["duration", liveDuration(r.startedAt, r.finishedAt)],
          ["reason", r.statusReason ?? ""],
        ].map(([k, v]) => el("div", { class: "card" }, el("div", { class: "label", text: k }), typeof v === "string" ? el("div", { text: v }) : el("div", {}, v))),
      ),
      ...(done ? [] : [el("p", { class: "actions" }, cancelButton(runId, refresh))]),
    );
    const s = r.summary;
    if (s) {
      summary.replaceChildren(
        el("p", { text: s.headline ?? "" }),
        el(
          "div",
          { class: "grid" },
          ...(s.metrics ?? []).map((m) =>
            el("div", { class: "card" }, el("div", { class: "label", text: m.label }), el("div", { text: m.text || (m.value === undefined ? "n/a" : `${Number(m.value).toFixed(m.decimals ?? 0)} ${m.unit ?? ""}`) })),
          ),
        ),
      );
    }
    checks.replaceChildren(
      table(
        ["check", "result", "detail"],
        (r.checks ?? []).map((c) =>
          el("tr", {}, el("td", { text: c.name }), el("td", { class: c.passed ? "pass" : "fail", text: c.passed ? "passed" : "failed" }), el("td", { text: c.detail ?? "" })),
        ),
      ),
    );
    artifacts.replaceChildren(
      table(
        ["artifact", "size", "sha256", ""],
        (r.artifacts ?? []).map((a) => {
          const link = el("a", { href: "#", text: "download", "data-artifact": a.name });
          link.addEventListener("click", (ev) => {
            ev.preventDefault();
            download(runId, a.name).catch(showError);
          });
          return el("tr", {}, el("td", { class: "mono", text: a.name }), el("td", { class: "num", text: bytes(a.sizeBytes) }), el("td", { class: "mono", text: a.sha256 }), el("td", {}, link));
        }),
      ),
    );
    const files = Object.fromEntries((s?.files ?? []).map((f) => [f.role, f.name]));
    const key = `${r.status}:${(r.artifacts ?? []).length}`;
    if (key !== shown && (r.artifacts ?? []).length) {
      shown = key;
      // The analyst's memo, or the probe's report: Markdown the sandbox wrote.
      const markdown = files.memo ?? files.report;
      if (markdown) {
        const text = await (await artifactBlob(runId, markdown)).text();
        memo.replaceChildren(el("div", { class: "memo" }, renderMarkdown(text)));
      }
      if (files.chart) {
        const blob = await artifactBlob(runId, files.chart);
        const image = el("img", { alt: `chart ${files.chart}`, src: await dataUrl(blob) });
        chart.replaceChildren(image);
      }
    }
    return r;
  };
  // The run as it is now, asked again after every event (its status, reason, artifacts may
  // have changed) and every few seconds until it ended: one request at a time, and one more
  // after it when something asked meanwhile.
  let inFlight = null;
  let again = false;
  const refresh = () => {
    if (inFlight) {
      again = true;
      return;
    }
    inFlight = showRun()
      .catch(showError)
      .finally(() => {
        inFlight = null;
        if (again && !abort.signal.aborted) {
          again = false;
          refresh();
        }
      });
  };
  await showRun();
  const timer = setInterval(() => done || refresh(), 2000);
  followEvents(
    runId,
    0,
    (e) => {
      // New rows keep the box scrolled to its end, unless the reader scrolled up.
      const atEnd = eventsBox.scrollHeight - eventsBox.scrollTop - eventsBox.clientHeight < 2;
      events.append(
        el(
          "tr",
          { "data-seq": String(e.seq) },
          el("td", { class: "num", text: String(e.seq) }),
          el("td", { text: (e.time ?? "").replace("T", " ").replace(/\.\d+Z$/, "Z") }),
          el("td", { class: "type", text: e.type }),
          el("td", {}, eventDetail(e)),
        ),
      );
      if (atEnd) eventsBox.scrollTop = eventsBox.scrollHeight;
      if (e.tokenUsage) {
        usage += Number(e.tokenUsage.totalTokens ?? 0);
        tokens.textContent = `token usage: ${usage}`;
      }
      if (!e.commandOutput) refresh(); // output changes nothing GetRun shows
    },
    abort.signal,
  ).catch(showError);
  return () => {
    abort.abort();
    clearInterval(timer);
  };
}

const sessionStatus = (s) => el("span", { class: `status ${short(s, "SESSION_STATUS_")}`, text: short(s, "SESSION_STATUS_") });
const live = (s) => short(s.status, "SESSION_STATUS_") === "ACTIVE";

// Closes a session (POST /v1/sessions/{id}:close): its sandbox and everything running in it
// go; then `then()` shows it again.
const closeButton = (sessionId, then, attrs = {}) =>
  action("Close", { class: "close-session", "data-close": sessionId, ...attrs }, async () => {
    await postJson(`/v1/sessions/${enc(sessionId)}:close`, { reason: "closed from the dashboard" });
    await then();
  });

// The form that creates a session (POST /v1/sessions): its image (`host`, the default, or
// one of the built images the tenant may use, from GET /v1/images), isolation level and
// network mode (with the allowed domains of a restricted one), and its idle timeout. The rest
// is the daemon's or the tenant's default.
function newSessionForm() {
  const image = el("select", { id: "new-image" }, el("option", { value: "", text: "image host" }));
  getJson("/v1/images")
    .then(({ images = [] }) =>
      image.append(...images.filter((i) => i.state === "STATE_READY").map((i) => el("option", { value: i.name, text: `image ${i.name}` }))),
    )
    .catch(showError);
  const isolation = el(
    "select",
    { id: "new-isolation" },
    ...[
      ["", "default isolation"],
      ["namespaces", "namespaces"],
      ["gvisor", "gvisor"],
    ].map(([v, t]) => el("option", { value: v, text: t })),
  );
  const network = el(
    "select",
    { id: "new-network" },
    ...["DISABLED", "RESTRICTED", "ENABLED"].map((m) => el("option", { value: `MODE_${m}`, text: `network ${m.toLowerCase()}` })),
  );
  const domains = el("input", { id: "new-domains", placeholder: "allowed domains: api.example.com *.pypi.org", size: "36", hidden: "" });
  const idle = el("input", { id: "new-idle", type: "number", min: "1", placeholder: "idle timeout (s)", size: "14" });
  network.addEventListener("change", () => (domains.hidden = network.value !== "MODE_RESTRICTED"));
  const form = el(
    "form",
    { id: "new-session", class: "filters" },
    image,
    isolation,
    network,
    domains,
    idle,
    el("button", { type: "submit", text: "Create session" }),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const button = form.querySelector("button");
    button.disabled = true;
    try {
      const sandbox = { network: { mode: network.value } };
      if (image.value) sandbox.image = image.value;
      if (isolation.value) sandbox.isolation = isolation.value;
      if (network.value === "MODE_RESTRICTED") sandbox.network.allowedDomains = domains.value.split(/[\s,]+/).filter(Boolean);
      if (idle.value) sandbox.idleTimeout = `${Number(idle.value)}s`;
      const s = await postJson("/v1/sessions", { sandbox, labels: { "made-by": "dashboard" } });
      location.hash = `#/sessions/${enc(s.id)}`;
    } catch (e) {
      showError(e);
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

async function sessionsPage() {
  const holder = el("div", { id: "sessions" });
  main.replaceChildren(el("h1", { text: "Sessions" }), newSessionForm(), holder);
  const load = async () => {
    const list = (await getJson("/v1/sessions?includeClosed=true")).sessions ?? [];
    holder.replaceChildren(
      table(
        ["session", "status", "provider", "tenant", "in flight", "expires in", "age", "image", ""],
        list.map((s) => {
          const left = s.expiresAt && live(s) ? Math.max(0, (Date.parse(s.expiresAt) - Date.now()) / 1000) : null;
          return el(
            "tr",
            { "data-session": s.id },
            el("td", {}, el("a", { href: `#/sessions/${enc(s.id)}`, class: "mono", text: s.id })),
            el("td", {}, sessionStatus(s.status)),
            el("td", { text: s.provider }),
            el("td", { text: s.tenant }),
            el("td", { class: "num", text: String(s.inFlight ?? 0) }),
            el("td", { text: left === null ? "" : `${Math.round(left)} s` }),
            el("td", {}, liveAge(s.createdAt)),
            el("td", { class: "mono", text: s.sandbox?.image || "host" }),
            el("td", {}, live(s) ? closeButton(s.id, load) : null),
          );
        }),
      ),
    );
  };
  await load();
  const timer = setInterval(() => load().catch(showError), 2000);
  return () => clearInterval(timer);
}

// ---- a session: its usage, terminal and files -------------------------------------------

// What a session uses, from its cgroups (GET /v1/sessions/{id}/usage every 2 s): memory (of
// its limit), CPU as the share of one core between two samples, processes. Asking is no use
// of the session: the page open does not keep it from idling out.
function usagePanel(sessionId) {
  const card = (key, label) => el("div", { class: "card" }, el("div", { class: "label", text: label }), el("div", { "data-usage": key, text: "…" }));
  const panel = el("div", { id: "usage", class: "grid" }, card("cpu", "CPU (of one core)"), card("memory", "memory"), card("processes", "processes"), card("cpu-time", "CPU time"));
  const show = (key, text) => (panel.querySelector(`[data-usage="${key}"]`).textContent = text);
  const seconds = (d) => Number(String(d ?? "0s").replace(/s$/, ""));
  let last = null;
  const sample = async () => {
    const u = await getJson(`/v1/sessions/${enc(sessionId)}/usage`);
    const cpu = seconds(u.cpuTime);
    const at = Date.parse(u.sampledAt);
    if (last && at > last.at) show("cpu", `${((100 * (cpu - last.cpu) * 1000) / (at - last.at)).toFixed(1)} %`);
    last = { cpu, at };
    const limit = Number(u.memoryLimitBytes ?? 0);
    show("memory", limit ? `${bytes(u.memoryBytes)} of ${bytes(limit)}` : bytes(u.memoryBytes));
    show("processes", String(u.processes ?? 0));
    show("cpu-time", `${cpu.toFixed(2)} s`);
    panel.title = (u.unmeasured ?? []).join("\n");
  };
  // A session that ended has no usage (412): the figures stop there, without a toast each time.
  const failed = (e) => {
    if (!(e instanceof ApiError && e.httpStatus === 412)) return showError(e);
    clearInterval(timer);
    for (const n of panel.querySelectorAll("[data-usage]")) n.textContent = "ended";
  };
  const timer = setInterval(() => sample().catch(failed), 2000);
  sample().catch(failed);
  return { panel, stop: () => clearInterval(timer) };
}

// xterm.js styles what it draws with <style> elements it makes itself (the sizes of its rows,
// the colours of its theme and palette), which the page's policy refuses (style-src 'self': no
// inline style). What they hold is xterm's own CSS, never a byte of the terminal's (those only
// ever become the text of its rows), so those of the terminal's element (and the one xterm puts
// in <head>) are applied through the CSSOM instead, which the policy leaves alone: each becomes
// a constructed style sheet. The policy stays what it is for everything else; so 24-bit
// colours, which xterm gives a cell as a style attribute, show in the default colour.
function applyTerminalStyles(root) {
  const sheets = new Map(); // a <style> element → [its text, its constructed sheet]
  const sync = () => {
    for (const s of [...root.querySelectorAll("style"), ...document.head.querySelectorAll("style")]) {
      const known = sheets.get(s);
      if (known?.[0] === s.textContent) continue;
      const sheet = known?.[1] ?? new CSSStyleSheet();
      sheet.replaceSync(s.textContent);
      sheets.set(s, [s.textContent, sheet]);
    }
    for (const s of sheets.keys()) if (!s.isConnected) sheets.delete(s);
    const mine = new Set([...sheets.values()].map(([, sheet]) => sheet));
    const others = document.adoptedStyleSheets.filter((x) => !x.__terminal);
    for (const sheet of mine) sheet.__terminal = true;
    document.adoptedStyleSheets = [...others, ...mine];
  };
  const observer = new MutationObserver(sync);
  for (const target of [root, document.head]) observer.observe(target, { childList: true, characterData: true, subtree: true });
  sync();
  return () => {
    observer.disconnect();
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((x) => !x.__terminal);
  };
}

// The shell a terminal runs: bash where the sandbox has it, else sh (as `sandgate session shell`).
const SHELL = "if command -v bash >/dev/null 2>&1; then exec bash -i; else exec sh -i; fi";

// A terminal into the session: a process on a pseudo-terminal (POST …/processes with pty),
// its output read from the last offset by long poll (GET …/output?offset=&wait=) and written
// to xterm.js as the raw bytes they are (xterm interprets escape sequences and decodes UTF-8;
// nothing of it is ever HTML); keys, pastes and resizes go to it in order (POST …:input). The
// same routes every client uses: no protocol of the dashboard's own. Closing it (or leaving
// the page) kills the process.
function openTerminal(sessionId, holder, status) {
  const abort = new AbortController();
  const term = new Terminal({
    scrollback: 5000,
    fontSize: 13,
    cursorBlink: true,
    fontFamily: "ui-monospace, monospace",
    // A link the output makes (OSC 8) is not followed: xterm's own default would confirm() and
    // then navigate a window of this origin to it, a javascript: URL included.
    linkHandler: { activate: () => {}, allowNonHttpProtocols: false },
  });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  const unstyle = applyTerminalStyles(holder);
  term.open(holder);
  fit.fit();
  const base = `/v1/sessions/${enc(sessionId)}/processes`;
  let process = null;
  let queue = Promise.resolve();
  const send = (body) => {
    queue = queue.then(() => process && postJson(`${base}/${enc(process)}:input`, body, { signal: abort.signal })).catch((e) => abort.signal.aborted || showError(e));
  };
  const utf8 = new TextEncoder();
  term.onData((d) => send({ data: bytesBase64(utf8.encode(d)) }));
  term.onBinary((d) => send({ data: btoa(d) }));
  term.onResize(({ rows, cols }) => send({ resize: { rows, cols } }));
  const refit = () => fit.fit();
  window.addEventListener("resize", refit);

  const run = async () => {
    const p = await postJson(base, { command: SHELL, pty: { rows: term.rows, cols: term.cols }, env: { TERM: "xterm-256color" } }, { signal: abort.signal });
    process = p.id;
    holder.dataset.process = p.id;
    status.textContent = `${p.id}: running`;
    term.focus();
    let offset = 0;
    for (;;) {
      const out = await getJson(`${base}/${enc(p.id)}/output?offset=${offset}&wait=20s`, { signal: abort.signal });
      for (const c of out.chunks ?? []) term.write(base64Bytes(c.data));
      if (Number(out.droppedBytes ?? 0) > 0) status.textContent = `${p.id}: ${bytes(out.droppedBytes)} of output no longer held`;
      offset = Number(out.nextOffset ?? offset);
      const state = out.process?.state;
      if (state !== "STATE_RUNNING" && !(out.chunks ?? []).length) {
        const f = out.process?.finished ?? {};
        status.textContent = `${p.id}: ended, ${f.signal ? `signal ${f.signal}` : `exit ${f.exitCode ?? 0}`}${out.process?.error ? ` (${out.process.error})` : ""}`;
        return;
      }
    }
  };
  run().catch((e) => abort.signal.aborted || showError(e));
  return () => {
    if (process) postJson(`${base}/${enc(process)}:input`, { signal: "SIGKILL" }).catch(() => {}); // it may have ended
    abort.abort();
    window.removeEventListener("resize", refit);
    term.dispose();
    unstyle();
  };
}

// The parts of a workspace path, each encoded for a URL ("a b/c" → "a%20b/c").
const pathUrl = (path) => path.split("/").map(enc).join("/");
const joinPath = (dir, name) => (dir ? `${dir}/${name}` : name);

// A session's file browser: one directory at a time (ListFiles lists below it; its direct
// entries are shown), open a directory, upload into it, make one, download, rename and delete.
// Names are the sandbox's and hostile: they are only ever text, and go into URLs encoded. A
// name that is not UTF-8 is listed escaped (path_escaped) and names no file: it cannot be
// acted on from here.
function fileBrowser(sessionId) {
  const sessionPath = `/v1/sessions/${enc(sessionId)}`;
  const where = el("div", { id: "files-dir", class: "mono" });
  const listing = el("div", { id: "files" });
  const upload = el("input", { type: "file", id: "upload", multiple: "" });
  const dirName = el("input", { id: "mkdir-name", placeholder: "new directory" });
  let dir = "";
  const load = async () => {
    const files = (await getJson(`${sessionPath}/files?dir=${enc(dir)}`)).files ?? [];
    const prefix = dir ? `${dir}/` : "";
    const entries = files.filter((f) => f.path.startsWith(prefix) && !f.path.slice(prefix.length).includes("/"));
    where.replaceChildren(
      el("button", { type: "button", class: "linkish", "data-dir": "", text: "workspace", onclick: () => go("") }),
      ...dir.split("/").filter(Boolean).flatMap((part, i, parts) => {
        const to = parts.slice(0, i + 1).join("/");
        return [" / ", el("button", { type: "button", class: "linkish", "data-dir": to, text: part, onclick: () => go(to) })];
      }),
    );
    listing.replaceChildren(table(["name", "type", "size", ""], entries.map(row)));
  };
  const go = (to) => {
    dir = to;
    load().catch(showError);
  };
  const row = (f) => {
    const name = f.path.slice(dir ? dir.length + 1 : 0);
    const type = short(f.type, "TYPE_").toLowerCase();
    const nameCell = el("td", { class: "mono" });
    if (type === "directory" && !f.pathEscaped) nameCell.append(el("button", { type: "button", class: "linkish open", text: name, onclick: () => go(f.path) }));
    else nameCell.textContent = name;
    const actions = el("td", { class: "actions" });
    if (f.pathEscaped) {
      actions.textContent = "name is not UTF-8";
    } else {
      if (type === "regular") actions.append(action("Download", { class: "download" }, () => downloadFile(f.path, name)));
      actions.append(
        action("Rename", { class: "rename" }, () => renameInline(f, name, nameCell)),
        action("Delete", { class: "delete" }, async (b) => {
          if (!confirmed(b)) return;
          await postJson(`${sessionPath}/files:delete`, { path: f.path, recursive: type === "directory" });
          await load();
        }),
      );
    }
    return el("tr", { "data-path": f.pathEscaped ? "" : f.path }, nameCell, el("td", { text: type }), el("td", { class: "num", text: type === "regular" ? bytes(f.sizeBytes) : "" }), actions);
  };
  const renameInline = (f, name, cell) => {
    const input = el("input", { class: "rename-to", value: name, size: "30" });
    const form = el("form", { class: "rename-form" }, input, el("button", { type: "submit", text: "Save" }));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        await postJson(`${sessionPath}/files:rename`, { from: f.path, to: joinPath(dir, input.value) });
        await load();
      } catch (e) {
        showError(e);
      }
    });
    cell.replaceChildren(form);
    input.focus();
  };
  // As a run's artifact: an octet-stream blob behind a download link, never a page here.
  const downloadFile = async (path, name) => saveBlob(await (await api(`${sessionPath}/files/${pathUrl(path)}`)).blob(), name);
  upload.addEventListener("change", async () => {
    try {
      for (const file of upload.files) {
        await api(`${sessionPath}/files/${pathUrl(joinPath(dir, file.name))}`, { method: "PUT", body: file });
      }
      await load();
    } catch (e) {
      showError(e);
    } finally {
      upload.value = "";
    }
  });
  const mkdir = action("Make directory", { id: "mkdir" }, async () => {
    if (!dirName.value) return;
    await postJson(`${sessionPath}/files:mkdir`, { path: joinPath(dir, dirName.value) });
    dirName.value = "";
    await load();
  });
  const box = el(
    "div",
    { id: "file-browser" },
    el("div", { class: "filters" }, where, el("label", { class: "upload" }, "Upload ", upload), dirName, mkdir, action("Refresh", { id: "files-refresh" }, load)),
    listing,
  );
  return { box, load };
}

// A snapshot's row (docs/sessions.md, "Snapshots"): id, the session it was taken of (when
// `withSession`: the page of every snapshot), age, size, entries, labels, and its actions:
// restore it into a new session (POST /v1/sessions with fromSnapshot; that session's page
// opens) and delete it (asked twice; POST /v1/snapshots/{id}:delete, then `reload()`). Labels
// are the caller's and shown only as text.
function snapshotRow(snap, withSession, reload) {
  return el(
    "tr",
    { "data-snapshot": snap.id },
    el("td", { class: "mono", text: snap.id }),
    withSession ? el("td", {}, el("a", { href: `#/sessions/${enc(snap.sessionId)}`, class: "mono session", text: snap.sessionId })) : null,
    el("td", { title: snap.createdAt ?? "" }, liveAge(snap.createdAt)),
    el("td", { class: "num", text: bytes(snap.sizeBytes) }),
    el("td", { class: "num", text: String(snap.files ?? 0) }),
    el("td", { class: "mono labels", text: Object.entries(snap.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(" ") }),
    el(
      "td",
      { class: "actions" },
      action("Restore", { class: "restore" }, async () => {
        const s = await postJson("/v1/sessions", { fromSnapshot: snap.id, labels: { "made-by": "dashboard" } });
        location.hash = `#/sessions/${enc(s.id)}`;
      }),
      action("Delete", { class: "delete" }, async (b) => {
        if (!confirmed(b)) return;
        await postJson(`/v1/snapshots/${enc(snap.id)}:delete`);
        await reload();
      }),
    ),
  );
}

// Snapshots as a table, newest first as the API lists them, or `none` when there are none.
const snapshotTable = (list, withSession, reload, none) =>
  list.length
    ? table(
        ["snapshot", ...(withSession ? ["session"] : []), "taken", "size", "entries", "labels", ""],
        list.map((snap) => snapshotRow(snap, withSession, reload)),
      )
    : el("p", { text: none });

// A session's snapshots: take one (POST …:snapshot), or take one and close the session (a
// pause); list them (GET /v1/snapshots?session_id=), restore and delete them. An ended session
// (not `active`) takes none, but its page keeps the list: there a paused one resumes.
function snapshotsPanel(sessionId, active, reload) {
  const listing = el("div", { id: "snapshots" });
  const load = async () => {
    const list = (await getJson(`/v1/snapshots?session_id=${enc(sessionId)}`)).snapshots ?? [];
    listing.replaceChildren(snapshotTable(list, false, load, "No snapshots of this session."));
  };
  const take = (close) => postJson(`/v1/sessions/${enc(sessionId)}:snapshot`, { close, labels: { "made-by": "dashboard" } });
  const actions = active
    ? [
        action("Snapshot", { id: "take-snapshot" }, async () => {
          await take(false);
          await load();
        }),
        action("Snapshot and close", { id: "pause-session" }, async () => {
          await take(true);
          await reload();
        }),
      ]
    : [];
  const box = el("div", { id: "snapshot-list" }, el("div", { class: "filters" }, action("Refresh", { id: "snapshots-refresh" }, load)), listing);
  return { actions, box, load };
}

// Every snapshot of the tenant (GET /v1/snapshots: the daemon lists the caller's own only, all
// at once, newest first), each with the session it was taken of, restored or deleted from
// here. Not refreshed on a timer: a row redrawn would forget a delete's first click.
async function snapshotsPage() {
  const listing = el("div", { id: "all-snapshots" });
  const count = el("span", { id: "snapshot-count" });
  const load = async () => {
    const list = (await getJson("/v1/snapshots")).snapshots ?? [];
    count.textContent = `${list.length} snapshot${list.length === 1 ? "" : "s"}, ${bytes(list.reduce((n, x) => n + Number(x.sizeBytes ?? 0), 0))} stored`;
    listing.replaceChildren(snapshotTable(list, true, load, "No snapshots: take one from a session's page."));
  };
  main.replaceChildren(
    el("h1", { text: "Snapshots" }),
    el("div", { class: "filters" }, count, action("Refresh", { id: "all-snapshots-refresh" }, load)),
    listing,
  );
  await load();
  return () => {};
}

async function sessionPage(id) {
  const s = await getJson(`/v1/sessions/${enc(id)}`);
  const stops = [];
  const reload = () => route();
  const head = el(
    "p",
    { id: "session-head" },
    sessionStatus(s.status),
    ` ${[s.provider, `image ${s.sandbox?.image || "host"}`, s.sandbox?.isolation, `network ${short(s.sandbox?.network?.mode ?? "MODE_DISABLED", "MODE_").toLowerCase()}`, s.workdir, s.statusReason].filter(Boolean).join(" · ")}`,
  );
  const snapshots = snapshotsPanel(id, live(s), reload);
  if (!live(s)) {
    main.replaceChildren(el("h1", {}, "Session ", el("span", { class: "mono", text: id })), head, el("h2", { text: "Snapshots" }), snapshots.box);
    await snapshots.load();
    return () => {};
  }
  const usage = usagePanel(id);
  stops.push(usage.stop);
  const termHolder = el("div", { id: "terminal" });
  const termStatus = el("span", { id: "terminal-status" });
  let closeTerm = null;
  const termButton = el("button", { type: "button", id: "open-terminal", text: "Open terminal" });
  termButton.addEventListener("click", () => {
    if (closeTerm) {
      closeTerm();
      closeTerm = null;
      termButton.textContent = "Open terminal";
      termStatus.textContent = "";
      return;
    }
    closeTerm = openTerminal(id, termHolder, termStatus);
    termButton.textContent = "Close terminal";
  });
  stops.push(() => closeTerm?.());
  const files = fileBrowser(id);
  main.replaceChildren(
    el("h1", {}, "Session ", el("span", { class: "mono", text: id })),
    head,
    el(
      "p",
      { class: "actions", id: "session-actions" },
      closeButton(id, reload, { id: "close-session" }),
      el("span", { id: "snapshot-actions", class: "actions" }, ...snapshots.actions),
    ),
    el("h2", { text: "Usage" }),
    usage.panel,
    el("h2", { text: "Terminal" }),
    el("p", { class: "actions" }, termButton, " ", termStatus),
    termHolder,
    el("h2", { text: "Files" }),
    files.box,
    el("h2", { text: "Snapshots" }),
    snapshots.box,
  );
  await Promise.all([files.load(), snapshots.load()]);
  return () => stops.forEach((stop) => stop());
}

// ---- images ----------------------------------------------------------------------------

const imageState = (state) => short(state, "STATE_").toLowerCase();
const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });

// The images the tenant may use (docs/images.md; GET /v1/images lists the built and building
// ones its policy.images lets it see), with their packages and size; remove one (DELETE
// /v1/images/{name}, asked twice; of a building one, that cancels it), and build one: POST
// /v1/images answers at once and the build goes on in the daemon; its progress is the image's
// last line (GET /v1/images/{name}), followed here, each new line appended, until the image is
// ready or gone (failed, or cancelled with the Cancel button, which is that DELETE). Whether a
// tenant may build or remove is its policy's (policy.build_images): the form is always there,
// and the daemon's answer, a refusal included, stays beside it in full until the next try.
// The daemon checks names and package names, but what is shown of them, and every progress
// line (mmdebstrap's output), is only ever text.
async function imagesPage() {
  const abort = new AbortController();
  const holder = el("div", { id: "images" });
  const name = el("input", { id: "image-name", placeholder: "name: py", size: "16", autocomplete: "off" });
  const packages = el("input", { id: "image-packages", placeholder: "packages: python3 python3-pandas", size: "44", autocomplete: "off" });
  const submit = el("button", { type: "submit", text: "Build image" });
  const cancel = el("button", { type: "button", id: "cancel-build", text: "Cancel build", hidden: "" });
  const status = el("p", { id: "build-status" });
  const log = el("pre", { id: "build-log", class: "output", hidden: "" });
  const form = el("form", { id: "build-image", class: "filters" }, name, packages, submit, cancel);
  const say = (text, kind = "") => {
    status.textContent = text;
    status.className = kind;
  };

  const load = async () => {
    const list = (await getJson("/v1/images")).images ?? [];
    holder.replaceChildren(
      table(
        ["image", "state", "packages", "size", "built by", "built", ""],
        [
          el("tr", { "data-image": "host" }, el("td", { class: "mono", text: "host" }), el("td", { text: "ready" }), el("td", { text: "the host's own /usr (the default)" }), el("td"), el("td"), el("td"), el("td")),
          ...list.map((i) =>
            el(
              "tr",
              { "data-image": i.name },
              el("td", { class: "mono", text: i.name }),
              el("td", { class: `state ${imageState(i.state)}`, text: imageState(i.state) }),
              el("td", { class: "mono packages", text: (i.packages ?? []).join(", ") }),
              el("td", { class: "num", text: i.state === "STATE_READY" ? bytes(i.sizeBytes) : "" }),
              el("td", { text: i.builtBy ?? "" }),
              el("td", { title: i.created ?? "" }, i.created ? liveAge(i.created) : null),
              el(
                "td",
                { class: "actions" },
                action(i.state === "STATE_READY" ? "Remove" : "Cancel", { class: "remove" }, async (b) => {
                  if (!confirmed(b)) return;
                  await api(`/v1/images/${enc(i.name)}`, { method: "DELETE" });
                  await load();
                }),
              ),
            ),
          ),
        ],
      ),
    );
  };

  // Follows the build of `image` (as POST answered it) until it is ready or gone.
  const follow = async (image) => {
    const target = image.name;
    let cancelled = false;
    let last = "";
    const line = (text) => {
      if (!text || text === last) return;
      last = text;
      log.append(`${text}\n`);
      log.scrollTop = log.scrollHeight;
    };
    log.replaceChildren();
    log.hidden = false;
    cancel.hidden = false;
    cancel.onclick = async () => {
      cancel.disabled = true;
      try {
        await api(`/v1/images/${enc(target)}`, { method: "DELETE" });
        cancelled = true;
        say(`cancelling the build of ${target}…`);
      } catch (e) {
        showError(e);
      } finally {
        cancel.disabled = false;
      }
    };
    try {
      for (;;) {
        line(image.progress);
        if (image.state === "STATE_READY") {
          say(`${target} is ready: ${bytes(image.sizeBytes)}, built in ${Number(String(image.buildDuration ?? "0s").replace(/s$/, "")).toFixed(1)} s`, "pass");
          return;
        }
        if (!cancelled) say(`building ${target}…`);
        await sleep(500, abort.signal);
        if (abort.signal.aborted) return;
        try {
          image = await getJson(`/v1/images/${enc(target)}`, { signal: abort.signal });
        } catch (e) {
          if (!(e instanceof ApiError && e.httpStatus === 404)) throw e;
          say(cancelled ? `the build of ${target} was cancelled` : `the build of ${target} ended without an image: it failed or was cancelled (its last line is above)`, "fail");
          return;
        }
      }
    } finally {
      cancel.hidden = true;
      if (!abort.signal.aborted) await load().catch(showError);
    }
  };

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    submit.disabled = true;
    try {
      say("");
      log.replaceChildren(); // the last build's lines are not this one's
      log.hidden = true;
      const image = await postJson("/v1/images", { name: name.value.trim(), packages: packages.value.split(/[\s,]+/).filter(Boolean) });
      await load();
      await follow(image);
    } catch (e) {
      if (abort.signal.aborted) return;
      say(e.message, "fail refusal");
    } finally {
      submit.disabled = false;
    }
  });

  main.replaceChildren(
    el("h1", { text: "Images" }),
    el("div", { class: "filters" }, action("Refresh", { id: "images-refresh" }, load)),
    holder,
    el("h2", { text: "Build an image" }),
    el("p", { class: "hint", text: "Debian packages, with what they depend on, on Debian's essential set (mmdebstrap). Your tenant's policy decides whether you may." }),
    form,
    status,
    log,
  );
  await load();
  return () => abort.abort();
}

// What the resource journal holds, on every replica: each sandbox, container or upstream
// object made and not yet seen deleted. Operators only (the daemon answers 403 otherwise).
async function cleanupPage() {
  const holder = el("div", { id: "resources" });
  main.replaceChildren(el("h1", { text: "Cleanup state" }), holder);
  const load = async () => {
    let list;
    try {
      list = (await getJson("/v1/resources")).resources ?? [];
    } catch (e) {
      if (e instanceof ApiError && e.httpStatus === 403) {
        holder.replaceChildren(el("p", { text: "Only operators see the cleanup state." }));
        return;
      }
      throw e;
    }
    holder.replaceChildren(
      el("p", { text: list.length ? `${list.length} resources in the journal` : "The journal is empty: nothing is left to clean up." }),
      table(
        ["resource", "provider", "kind", "session", "replica"],
        list.map((r) =>
          el("tr", { "data-resource": r.id }, el("td", { class: "mono", text: r.id }), el("td", { text: r.provider }), el("td", { text: r.kind }), el("td", { class: "mono", text: r.sessionId ?? "" }), el("td", { text: r.replica ?? "" })),
        ),
      ),
    );
  };
  await load();
  const timer = setInterval(() => load().catch(showError), 2000);
  return () => clearInterval(timer);
}

// ---- routing ---------------------------------------------------------------------------

// Pages are set up one after another, in the order they were asked for: a page still waiting
// for the API to draw itself would otherwise draw over the one asked for after it (a restore
// opens the new session's page, and a quick click away must not be undone by it). A page's
// setup never waits for a route, so the chain cannot wait for itself.
let routing = Promise.resolve();
const route = () => (routing = routing.then(showPage));

async function showPage() {
  stopPage();
  stopPage = () => {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  document.getElementById("logout").hidden = !token;
  if (!token) who.textContent = "";
  else if (!who.textContent) showWho().catch(() => {}); // a page's own call reports a bad token
  const [, page, id] = (location.hash || "#/runs").split("/").map(decodeURIComponent);
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.nav === page);
  if (!token || page === "login") return loginPage();
  try {
    if (page === "runs" && id) stopPage = await runPage(id);
    else if (page === "sessions" && id) stopPage = await sessionPage(id);
    else if (page === "sessions") stopPage = await sessionsPage();
    else if (page === "snapshots") stopPage = await snapshotsPage();
    else if (page === "images") stopPage = await imagesPage();
    else if (page === "cleanup") stopPage = await cleanupPage();
    else stopPage = await runsPage();
  } catch (e) {
    showError(e);
  }
}

document.getElementById("logout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  who.textContent = "";
  clearError();
  location.hash = "#/login";
});
window.addEventListener("hashchange", route);
route();
