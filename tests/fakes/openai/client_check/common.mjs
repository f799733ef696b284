// What check.mjs and agents_check.mjs share: the official client made from OPENAI_BASE_URL
// (e.g. http://127.0.0.1:PORT/v1) and OPENAI_API_KEY, the fake's admin calls, assertions that
// name the step they failed in (set ctx.step), and the exit status (1 on a mismatch).
import OpenAI from 'openai';

const baseURL = process.env.OPENAI_BASE_URL;
const apiKey = process.env.OPENAI_API_KEY;
if (!baseURL || !apiKey) {
  console.error(`${process.argv[1]}: set OPENAI_BASE_URL and OPENAI_API_KEY`);
  process.exit(2);
}
const adminBase = baseURL.replace(/\/v1\/?$/, '');
export const client = new OpenAI({ baseURL, apiKey, timeout: 60_000 });
export const ctx = { step: '' };

export function check(cond, what, detail) {
  if (!cond) {
    const extra = detail === undefined ? '' : `: ${JSON.stringify(detail)}`;
    throw new Error(`[${ctx.step}] ${what}${extra}`);
  }
}
export function eq(actual, expected, what) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  check(a === e, `${what}: expected ${e}, got ${a}`);
}
export async function admin(method, p, body) {
  const r = await fetch(adminBase + p, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  check(r.ok, `admin ${method} ${p} -> ${r.status}`);
  return r.json();
}
export function run(name, main) {
  main().then(
    () => {
      console.log(`${name}: OK`);
    },
    (e) => {
      console.error(`${name} FAILED: ${e && e.stack ? e.stack : e}`);
      process.exit(1);
    },
  );
}
