// What the tools answer, as text for a model and as structured content: a command's end and
// output, a run's status, figures, flags, checks and artifacts, an artifact's contents.
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
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

// A metric as the proto-loader gives it: `value` is a proto3 optional, so it comes with the
// synthetic oneof's `_value` ("value" when set), which the structured content leaves out.
interface MetricIn {
  label: string;
  value?: number | null;
  _value?: string;
  unit: string;
  decimals: number;
  text: string;
}
interface Metric {
  label: string;
  value: number | null; // null when undefined (a zero denominator) or a text
  unit: string;
  decimals: number;
  text: string;
}

function metric(m: MetricIn | null | undefined): Metric | null {
  if (!m) return null;
  const set = "_value" in m ? m._value === "value" : typeof m.value === "number";
  return { label: m.label, value: set ? Number(m.value) : null, unit: m.unit, decimals: m.decimals, text: m.text };
}

// As the CLI shows it (client/summary.cc): "12.3%", "+4.0 pp", "n/a", or the text.
export function formatMetric(m: Metric, signed = false): string {
  if (m.text) return m.text;
  if (m.value === null) return "n/a";
  const number = m.value.toFixed(Math.min(m.decimals, 12));
  const shown = signed && m.value >= 0 ? `+${number}` : number;
  if (!m.unit) return shown;
  return m.unit === "%" ? `${shown}%` : `${shown} ${m.unit}`;
}

export function describeRun(run: RunRecord): { text: string; structured: Record<string, unknown> } {
  const status = run.status.replace("RUN_STATUS_", "").toLowerCase();
  const checks = run.checks.map((c) => ({ name: c.name, passed: c.passed, detail: c.detail }));
  const artifacts = run.artifacts.map((a) => ({ name: a.name, size_bytes: a.sizeBytes, sha256: a.sha256 }));
  const s = run.summary;
  const summary = s
    ? {
        headline: s.headline,
        metrics: s.metrics.map((m) => metric(m as MetricIn)!),
        flags: s.flags.map((f) => ({ what: f.what, period: f.period, rule: f.rule, size: metric(f.size as MetricIn) })),
        counts: s.counts.map((c) => ({ label: c.label, value: Number(c.value) })),
        files: s.files.map((f) => ({ role: f.role, name: f.name })),
      }
    : null;
  const failed = checks.filter((c) => !c.passed);
  const lines = [`run ${run.id} ${status}${run.statusReason ? `: ${run.statusReason}` : ""}`];
  if (summary?.headline) lines.push(summary.headline);
  if (summary?.metrics.length) {
    lines.push("figures:", ...summary.metrics.map((m) => `  ${m.label}: ${formatMetric(m)}`));
  }
  if (summary?.flags.length) {
    lines.push(
      "flagged:",
      ...summary.flags.map(
        (f) => `  ${f.what}${f.period ? ` ${f.period}` : ""}: ${f.rule}${f.size ? ` (${formatMetric(f.size, true)})` : ""}`,
      ),
    );
  } else if (summary) {
    lines.push("flagged: nothing");
  }
  if (summary?.counts.length) lines.push(summary.counts.map((c) => `${c.label}: ${c.value}`).join(", "));
  lines.push(
    `checks: ${checks.length - failed.length} of ${checks.length} passed`,
    ...failed.map((c) => `  failed ${c.name}: ${c.detail}`),
    `artifacts (read_artifact reads them): ${artifacts.map((a) => `${a.name} (${a.size_bytes} bytes)`).join(", ") || "none"}`,
  );
  return {
    text: lines.join("\n"),
    structured: { run_id: run.id, status: run.status, status_reason: run.statusReason, summary, checks, artifacts },
  };
}

const IMAGES: Array<{ type: string; is: (b: Buffer) => boolean }> = [
  { type: "image/png", is: (b) => b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) },
  { type: "image/jpeg", is: (b) => b.subarray(0, 3).equals(Buffer.from([0xff, 0xd8, 0xff])) },
  { type: "image/gif", is: (b) => /^GIF8[79]a/.test(b.subarray(0, 6).toString("latin1")) },
  { type: "image/webp", is: (b) => b.subarray(0, 4).toString("latin1") === "RIFF" && b.subarray(8, 12).toString("latin1") === "WEBP" },
];

// The longest prefix of `data` (at most `max` bytes) that is whole UTF-8, or null when it is
// not UTF-8 text (a cut may split one character: up to 3 bytes are given back).
function utf8Prefix(data: Buffer, max: number): string | null {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  const head = data.subarray(0, max);
  for (let drop = 0; drop <= (head.length < data.length ? 3 : 0) && drop <= head.length; ++drop) {
    try {
      const text = decoder.decode(head.subarray(0, head.length - drop));
      return text.includes("\0") ? null : text;
    } catch {
      // a character cut at the end: try a byte shorter
    }
  }
  return null;
}

/**
 * read_artifact's answer for `data`, the first bytes (or all) of `artifact` of run `runId`:
 * text as text cut at `maxText` bytes, an image up to `maxImage` bytes as image content, and a
 * tool error that says what to do for a larger image or any other file.
 */
export function artifactContent(
  runId: string,
  artifact: { name: string; sizeBytes: number; sha256: string },
  data: Buffer,
  limits: { maxText: number; maxImage: number },
): CallToolResult {
  const size = Number(artifact.sizeBytes);
  const about = { run_id: runId, name: artifact.name, size_bytes: size, sha256: artifact.sha256 };
  const elsewhere = `download it with: sandgate download ${runId}`;
  const image = IMAGES.find((i) => i.is(data));
  if (image) {
    if (size > limits.maxImage || data.length < size) {
      return refusal(`${artifact.name} is an ${image.type} image of ${size} bytes, over the ${limits.maxImage} bytes read_artifact returns; ${elsewhere}`);
    }
    return {
      content: [
        { type: "text", text: `${artifact.name}: ${image.type}, ${size} bytes` },
        { type: "image", data: data.toString("base64"), mimeType: image.type },
      ],
      structuredContent: { ...about, media_type: image.type },
    };
  }
  const text = utf8Prefix(data, limits.maxText);
  if (text === null) {
    return refusal(`${artifact.name} (${size} bytes) is neither UTF-8 text nor a PNG, JPEG, GIF or WebP image; ${elsewhere}`);
  }
  const truncated = Buffer.byteLength(text) < size;
  const cut = truncated ? `\n[cut: the artifact has ${size} bytes; the first ${Buffer.byteLength(text)} are shown]` : "";
  return {
    content: [{ type: "text", text: text + cut }],
    structuredContent: { ...about, media_type: "text/plain", content: text, truncated },
  };
}

function refusal(text: string): CallToolResult {
  return { isError: true, content: [{ type: "text", text }] };
}
