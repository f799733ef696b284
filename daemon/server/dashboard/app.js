// sandgate's dashboard: runs, a run's live events, checks, artifacts, memo and chart; sessions
// and their files. It reads the REST/JSON face of the API (proto3 JSON mapping) with the
// caller's bearer token, which stays in this tab's sessionStorage.
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
const getJson = async (path) => (await api(path)).json();
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
  return v < 1024 ? `${v} B` : v < 1 << 20 ? `${(v / 1024).toFixed(1)} KiB` : `${(v / (1 << 20)).toFixed(1)} MiB`;
};

function decodeBase64(b64) {
  const raw = atob(b64 ?? "");
  return new TextDecoder().decode(Uint8Array.from(raw, (c) => c.charCodeAt(0)));
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
        ["run", "status", "playbook", "agent", "provider", "tenant", "age", "duration"],
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
  const blob = new Blob([await artifactBlob(runId, name)], { type: "application/octet-stream" });
  const url = URL.createObjectURL(blob);
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

const finished = (status) => ["SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"].includes(short(status, "RUN_STATUS_"));

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

async function sessionsPage() {
  const holder = el("div", { id: "sessions" });
  main.replaceChildren(el("h1", { text: "Sessions" }), holder);
  const load = async () => {
    const list = (await getJson("/v1/sessions?includeClosed=true")).sessions ?? [];
    holder.replaceChildren(
      table(
        ["session", "status", "provider", "tenant", "in flight", "expires in", "age"],
        list.map((s) => {
          const left = s.expiresAt && short(s.status, "SESSION_STATUS_") === "ACTIVE" ? Math.max(0, (Date.parse(s.expiresAt) - Date.now()) / 1000) : null;
          return el(
            "tr",
            { "data-session": s.id },
            el("td", {}, el("a", { href: `#/sessions/${enc(s.id)}`, class: "mono", text: s.id })),
            el("td", {}, el("span", { class: `status ${short(s.status, "SESSION_STATUS_")}`, text: short(s.status, "SESSION_STATUS_") })),
            el("td", { text: s.provider }),
            el("td", { text: s.tenant }),
            el("td", { class: "num", text: String(s.inFlight ?? 0) }),
            el("td", { text: left === null ? "" : `${Math.round(left)} s` }),
            el("td", {}, liveAge(s.createdAt)),
          );
        }),
      ),
    );
  };
  await load();
  const timer = setInterval(() => load().catch(showError), 2000);
  return () => clearInterval(timer);
}

async function sessionPage(id) {
  const s = await getJson(`/v1/sessions/${enc(id)}`);
  const files = (await getJson(`/v1/sessions/${enc(id)}/files`)).files ?? [];
  main.replaceChildren(
    el("h1", {}, "Session ", el("span", { class: "mono", text: id })),
    el("p", {}, el("span", { class: `status ${short(s.status, "SESSION_STATUS_")}`, text: short(s.status, "SESSION_STATUS_") }), ` ${s.provider} · ${s.workdir ?? ""} · ${s.statusReason ?? ""}`),
    el("h2", { text: "Files" }),
    el(
      "div",
      { id: "files" },
      table(
        ["path", "type", "size"],
        files.map((f) => el("tr", {}, el("td", { class: "mono", text: f.path }), el("td", { text: short(f.type, "TYPE_").toLowerCase() }), el("td", { class: "num", text: bytes(f.sizeBytes) }))),
      ),
    ),
  );
  return () => {};
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

async function route() {
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
