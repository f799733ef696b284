// 100 followers of one run, measured as a Node caller sees them: the TypeScript client
// (clients/node, built) in this process, the daemon in its own. The same run and the same
// measure as `bench_stream lag` (tests/bench/stream_bench.cc), so the two can be compared:
// a setup command prints a line every `interval-ms`; the followers follow the run from seq 0
// with `run.events()`; lag = receipt time - the event's time (stamped by the daemon when it
// appends the event; both read the machine's realtime clock) of every event appended after
// the last follower received its first event. --workload picks the run (startRun below).
//
//   node tests/bench/node/follow_lag.mjs [--followers 100] [--events 300] [--interval-ms 10]
//        [--rounds 3] [--channels own|shared|both] [--workload trickle|burst|analysis]
//        [--sandgated build/bin/sandgated]                                          (as root)
//
// --channels own: each follower its own Client (its own HTTP/2 connection), as bench_stream's
// C++ followers; shared: one Client for all (100 streams on one connection), as a Node
// program that makes one client and follows with it 100 times. Each round runs a one-follower
// baseline first, as bench_stream does.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const { Client } = await import(join(repo, "clients", "node", "dist", "index.js"));

const args = { followers: 100, events: 300, "interval-ms": 10, rounds: 3, channels: "both",
  workload: "trickle", sandgated: join(repo, "build", "bin", "sandgated") };
for (let i = 2; i < process.argv.length; i += 2) {
  const key = process.argv[i].replace(/^--/, "");
  if (!(key in args) || i + 1 >= process.argv.length) {
    console.error(`unknown or valueless flag ${process.argv[i]} (see the header)`);
    process.exit(2);
  }
  args[key] = typeof args[key] === "number" ? Number(process.argv[i + 1]) : process.argv[i + 1];
}

const nowMs = () => performance.timeOrigin + performance.now();
const eventMs = (e) => Number(e.time.seconds) * 1e3 + e.time.nanos / 1e6;
const quantile = (xs, q) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const median = (xs) => quantile(xs, 0.5);

// The daemon's CPU time so far (user + system, /proc/PID/stat), to tell its share of a lag
// from this process's (process.cpuUsage()).
let daemonPid = 0;
function daemonCpuMs() {
  const fields = readFileSync(`/proc/${daemonPid}/stat`, "utf8").split(") ")[1].split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime, stime in ticks of 1/100 s
}

async function startDaemon() {
  const dir = mkdtempSync(join(tmpdir(), "sg-node-lag-"));
  const socket = join(dir, "sandgated.sock");
  writeFileSync(join(dir, "config.json"), JSON.stringify({
    listen: `unix:${socket}`, state_dir: join(dir, "state"), max_concurrent_runs: 4,
    local: { uid_base: 330300, uid_count: 16 },
  }));
  const log = openSync(join(dir, "log"), "a");
  const child = spawn(args.sandgated, ["--config", join(dir, "config.json")], { stdio: ["ignore", log, log] });
  for (let i = 0; i < 200 && !existsSync(socket); ++i) await new Promise((r) => setTimeout(r, 50));
  if (!existsSync(socket)) throw new Error(`sandgated did not start (log: ${join(dir, "log")})`);
  daemonPid = child.pid;
  return { addr: `unix:${socket}`, stop: () => { child.kill("SIGTERM"); rmSync(dir, { recursive: true, force: true }); } };
}

// The run the followers follow; each waits a second in its setup so that every follower is
// attached before the events to measure are appended.
//   trickle: a line every interval-ms (bench_stream lag's run: the daemon's fan-out of one
//            event to 100 followers fits between two events);
//   burst:   `events` lines at once (the daemon makes an event per read of the pipe);
//   analysis: the flagship run, financial-analyst on the sample statements with the reference
//            agent: what a caller following a real run gets (its events come in bursts: the
//            program's output, the artifacts, every check).
async function startRun(client) {
  const wait = "sleep 1";
  if (args.workload === "analysis") {
    return client.runAnalysis(join(repo, "examples", "northstar_cloud_financial_statements.csv"),
      { sandbox: { setupCommands: [wait] } });
  }
  const body = args.workload === "burst"
    ? `seq 1 ${args.events}`
    : `i=0; while [ $i -lt ${args.events} ]; do echo $i; sleep ${args["interval-ms"] / 1000}; i=$((i+1)); done`;
  return client.runAnalysis({ name: "input.txt", content: Buffer.from("x\n") },
    { playbook: "sandbox-probe", sandbox: { setupCommands: [`${wait}; ${body}`] } });
}

async function follow(run) {
  const seen = { attached: 0, outputs: [], events: 0, inOrder: true, finished: false };
  let last = 0;
  for await (const e of run.events()) {
    const now = nowMs();
    if (seen.attached === 0) seen.attached = now;
    if (e.seq !== last + 1) seen.inOrder = false;
    last = e.seq;
    ++seen.events;
    seen.outputs.push([eventMs(e), now]);
    if (e.type === "run.finished") seen.finished = true;
  }
  return seen;
}

async function lagOnce(addr, followers, channels) {
  const clients = [];
  const clientFor = (i) => {
    if (channels === "shared" && clients.length > 0) return clients[0];
    const c = new Client({ addr });
    clients.push(c);
    return c;
  };
  const starter = new Client({ addr });
  const first = await startRun(starter);
  const runs = Array.from({ length: followers }, (_, i) => {
    const c = clientFor(i);
    return c === starter ? first : new first.constructor(c, first.record);
  });
  const cpu0 = process.cpuUsage();
  const daemonCpu0 = daemonCpuMs();
  const seen = await Promise.all(runs.map(follow));
  const used = process.cpuUsage(cpu0);
  const clientCpuMs = (used.user + used.system) / 1e3;
  const daemonCpu = daemonCpuMs() - daemonCpu0;
  const allAttached = Math.max(...seen.map((s) => s.attached));
  const lags = [];
  let ok = true;
  for (const s of seen) {
    if (!s.finished || !s.inOrder || s.events !== seen[0].events) ok = false;
    for (const [at, received] of s.outputs) if (at > allAttached) lags.push(received - at);
  }
  for (const c of clients) c.close();
  starter.close();
  return { lags, ok, clientCpuMs, daemonCpu };
}

const daemon = await startDaemon();
try {
  await lagOnce(daemon.addr, 1, "own"); // warm-up: page cache, first sandbox
  const modes = args.channels === "both" ? ["own", "shared"] : [args.channels];
  const results = {};
  for (const mode of modes) results[mode] = { p50: [], p99: [], one50: [], one99: [] };
  for (let r = 0; r < args.rounds; ++r) {
    for (const mode of modes) {
      const base = await lagOnce(daemon.addr, 1, mode);
      const full = await lagOnce(daemon.addr, args.followers, mode);
      if (!base.ok || !full.ok) throw new Error("a follower missed, repeated or reordered an event");
      const m = results[mode];
      m.one50.push(quantile(base.lags, 0.5));
      m.one99.push(quantile(base.lags, 0.99));
      m.p50.push(quantile(full.lags, 0.5));
      m.p99.push(quantile(full.lags, 0.99));
      console.log(`round ${r + 1} ${mode}: 1 follower p50 ${m.one50.at(-1).toFixed(3)} p99 ` +
        `${m.one99.at(-1).toFixed(3)} ms | ${args.followers} followers p50 ${m.p50.at(-1).toFixed(3)} ` +
        `p99 ${m.p99.at(-1).toFixed(3)} max ${quantile(full.lags, 1).toFixed(3)} ms (${full.lags.length} samples; ` +
        `CPU: this client ${full.clientCpuMs.toFixed(0)} ms, the daemon ${full.daemonCpu.toFixed(0)} ms)`);
    }
  }
  for (const mode of modes) {
    const m = results[mode];
    console.log(`median over ${args.rounds} rounds, channels ${mode}: 1 follower p50 ` +
      `${median(m.one50).toFixed(3)} p99 ${median(m.one99).toFixed(3)} ms; ${args.followers} followers ` +
      `p50 ${median(m.p50).toFixed(3)} p99 ${median(m.p99).toFixed(3)} ms`);
  }
} finally {
  daemon.stop();
}
