// What the tools answer, as text for a model and as structured content: a command's end and
// output, a run's status, summary, checks and artifacts.
import type { RunRecord } from "sandgate";

// stdout and stderr with how the command ended, each cut at `max` characters.
export function outputText(
  r: { exitCode: number; stdout: string; stderr: string; finished: { signal: number; timedOut: boolean; oomKilled: boolean } },
  max: number,
): string {
  const cut = (s: string) => (s.length > max ? `${s.slice(0, max)}\n[cut: ${s.length} characters in all]` : s);
  const f = r.finished;
  const how = f.timedOut
    ? "timed out"
    : f.oomKilled
      ? "was killed: out of memory"
      : f.signal
        ? `was killed by signal ${f.signal}`
        : `exited with ${r.exitCode}`;
  const parts = [`the command ${how}`];
  if (r.stdout) parts.push(`stdout:\n${cut(r.stdout)}`);
  if (r.stderr) parts.push(`stderr:\n${cut(r.stderr)}`);
  return parts.join("\n");
}

export function describeRun(run: RunRecord): { text: string; structured: Record<string, unknown> } {
  const status = run.status.replace("RUN_STATUS_", "").toLowerCase();
  const checks = run.checks.map((c) => ({ name: c.name, passed: c.passed, detail: c.detail }));
  const artifacts = run.artifacts.map((a) => ({ name: a.name, size_bytes: a.sizeBytes, sha256: a.sha256 }));
  const summary = run.summary
    ? {
        headline: run.summary.headline,
        metrics: run.summary.metrics,
        flags: run.summary.flags,
        counts: run.summary.counts,
      }
    : null;
  const failed = checks.filter((c) => !c.passed);
  const lines = [
    `run ${run.id} ${status}${run.statusReason ? `: ${run.statusReason}` : ""}`,
    ...(summary?.headline ? [summary.headline] : []),
    `checks: ${checks.length - failed.length} of ${checks.length} passed`,
    ...failed.map((c) => `  failed ${c.name}: ${c.detail}`),
    `artifacts: ${artifacts.map((a) => `${a.name} (${a.size_bytes} bytes)`).join(", ") || "none"}`,
  ];
  return {
    text: lines.join("\n"),
    structured: { run_id: run.id, status: run.status, status_reason: run.statusReason, summary, checks, artifacts },
  };
}
