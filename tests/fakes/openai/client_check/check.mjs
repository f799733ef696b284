// Drives the fake OpenAI server with the official `openai` npm client, so the fake's shapes are
// checked against what the real SDK sends and parses. Starts nothing: the base URL and key come
// from OPENAI_BASE_URL (e.g. http://127.0.0.1:PORT/v1) and OPENAI_API_KEY. Exits 1 on a mismatch.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { APIError, toFile } from 'openai';
import { admin, check, client, ctx, eq, run } from './common.mjs';

async function scenario(...turns) {
  await admin('POST', '/_fake/scenario', { turns });
}
async function collect(stream) {
  const events = [];
  for await (const ev of stream) events.push(ev);
  return events;
}
async function expectApiError(promise, status, what) {
  try {
    await promise;
  } catch (e) {
    check(e instanceof APIError, `${what}: expected an APIError, got ${e}`);
    eq(e.status, status, `${what}: status`);
    return e;
  }
  check(false, `${what}: expected an error, got success`);
}

const CSV = 'year,revenue,net_income\n2022,100,10\n2023,200,30\n';
const ANALYZE = [
  'import csv, sys',
  'rows = list(csv.DictReader(open(sys.argv[1])))',
  'with open("calculated_metrics.csv", "w") as f:',
  '    f.write("year,net_margin\\n")',
  '    for r in rows:',
  '        f.write("%s,%.2f\\n" % (r["year"], float(r["net_income"]) / float(r["revenue"])))',
  'print(len(rows))',
].join('\n');

async function main() {
  await admin('POST', '/_fake/reset', {});

  ctx.step = 'files';
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fake-openai-check-'));
  process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));
  const csvPath = path.join(tmp, 'input.csv');
  fs.writeFileSync(csvPath, CSV);
  const f1 = await client.files.create({ file: fs.createReadStream(csvPath), purpose: 'user_data' });
  check(f1.id.startsWith('file-'), 'file id prefix', f1);
  eq([f1.filename, f1.bytes, f1.purpose], ['input.csv', CSV.length, 'user_data'], 'file object');
  const f2 = await client.files.create({
    file: await toFile(Buffer.from('notes\n'), 'notes.txt'),
    purpose: 'assistants',
  });
  eq((await client.files.retrieve(f2.id)).filename, 'notes.txt', 'retrieve');
  const listed = [];
  for await (const f of client.files.list()) listed.push(f.id);
  eq(listed.sort(), [f1.id, f2.id].sort(), 'files.list');
  eq(await (await client.files.content(f1.id)).text(), CSV, 'files.content');

  ctx.step = 'containers';
  const c = await client.containers.create({
    name: 'check',
    file_ids: [f1.id],
    memory_limit: '1g',
    expires_after: { anchor: 'last_active_at', minutes: 20 },
    network_policy: { type: 'disabled' },
  });
  check(c.id.startsWith('cntr_'), 'container id prefix', c);
  eq([c.object, c.status, c.name], ['container', 'running', 'check'], 'container object');
  eq((await client.containers.retrieve(c.id)).id, c.id, 'containers.retrieve');
  const extra = await client.containers.create({ name: 'extra' });
  const page = await client.containers.list({ limit: 1, order: 'asc' });
  eq(page.data.map((x) => x.id), [c.id], 'containers.list first page');
  check(page.hasNextPage(), 'containers.list has a next page');
  const all = [];
  for await (const x of client.containers.list({ limit: 1, order: 'asc' })) all.push(x.id);
  eq(all, [c.id, extra.id], 'containers.list auto-pagination');
  await client.containers.delete(extra.id);

  ctx.step = 'container files';
  const cf = await client.containers.files.create(c.id, {
    file: await toFile(Buffer.from('a,b\n1,2\n'), 'extra.csv'),
  });
  eq([cf.path, cf.source, cf.bytes], ['/mnt/data/extra.csv', 'user', 8], 'uploaded container file');
  const cf2 = await client.containers.files.create(c.id, { file_id: f2.id });
  eq(cf2.path, '/mnt/data/notes.txt', 'container file from file_id');
  const cfiles = [];
  for await (const x of client.containers.files.list(c.id)) cfiles.push(x.path);
  eq(cfiles.sort(), ['/mnt/data/extra.csv', '/mnt/data/input.csv', '/mnt/data/notes.txt'], 'containers.files.list');
  const body = await client.containers.files.content.retrieve(cf.id, { container_id: c.id });
  eq(await body.text(), 'a,b\n1,2\n', 'containers.files.content');
  await client.containers.files.delete(cf2.id, { container_id: c.id });

  ctx.step = 'responses (hosted shell, non-streaming)';
  const tools = [{ type: 'shell', environment: { type: 'container_reference', container_id: c.id } }];
  await scenario(
    { shell: [`cat > analyze.py <<'EOF'\n${ANALYZE}\nEOF`, 'python3 analyze.py input.csv'] },
    { message: 'Wrote calculated_metrics.csv.' },
  );
  const r1 = await client.responses.create({ model: 'gpt-5.5', input: 'analyse', tools, tool_choice: 'required' });
  eq(r1.status, 'completed', 'status');
  eq(r1.output.map((i) => i.type), ['shell_call', 'shell_call_output', 'message'], 'output item types');
  eq(r1.output[1].output[1].stdout, '2\n', 'analysis stdout');
  eq(r1.output_text, 'Wrote calculated_metrics.csv.', 'output_text (SDK-derived)');
  const artifacts = [];
  for await (const x of client.containers.files.list(c.id)) artifacts.push(x);
  const metrics = artifacts.find((x) => x.path === '/mnt/data/calculated_metrics.csv');
  check(metrics && metrics.source === 'assistant', 'assistant artifact listed', artifacts);
  const got = await (await client.containers.files.content.retrieve(metrics.id, { container_id: c.id })).text();
  eq(got, 'year,net_margin\n2022,0.10\n2023,0.15\n', 'artifact content');
  eq((await client.responses.retrieve(r1.id)).id, r1.id, 'responses.retrieve');

  ctx.step = 'responses (hosted shell, streaming)';
  await scenario({ shell: ['echo streamed'] }, { message: 'streamed done' });
  const events = await collect(await client.responses.create({ model: 'm', input: 'x', tools, stream: true }));
  const types = events.map((e) => e.type);
  eq(types[0], 'response.created', 'first event');
  eq(types[types.length - 1], 'response.completed', 'terminal event');
  events.forEach((e, i) => eq(e.sequence_number, i, 'sequence_number'));
  const deltas = events.filter((e) => e.type === 'response.shell_call_output_content.delta');
  eq(deltas.map((e) => e.delta.stdout || '').join(''), 'streamed\n', 'shell output deltas');
  eq(events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join(''),
    'streamed done', 'text deltas');
  // the SDK's stream helper rebuilds the response from the shell and text events and checks them
  await scenario({ shell: ['printf out; printf err >&2', 'exit 4'] }, { message: 'helper done' });
  const helper = client.responses.stream({ model: 'm', input: 'x', tools });
  const hr = await helper.finalResponse();
  eq(hr.output[1].output, [
    { stdout: 'out', stderr: 'err', outcome: { type: 'exit', exit_code: 0 } },
    { stdout: '', stderr: '', outcome: { type: 'exit', exit_code: 4 } },
  ], 'accumulated shell output');
  eq(hr.output[0].action.commands, ['printf out; printf err >&2', 'exit 4'], 'accumulated commands');
  const stored = await client.responses.retrieve(hr.id);
  eq(stored.output.slice(0, 2), hr.output.slice(0, 2), 'streamed shell items equal the stored ones');
  eq(stored.output_text, hr.output_text, 'streamed text equals the stored one');

  ctx.step = 'responses (local shell round trip, SDK stream helper)';
  await scenario({ shell: ['ls'] }, { message: 'listed' });
  const localTools = [{ type: 'shell', environment: { type: 'local' } }];
  const rs = client.responses.stream({ model: 'm', input: 'list', tools: localTools });
  const lr = await rs.finalResponse();
  const call = lr.output[0];
  eq(call.type, 'shell_call', 'local shell call');
  await expectApiError(client.responses.create({
    model: 'm', tools: localTools, previous_response_id: lr.id,
    input: [{ type: 'shell_call_output', call_id: 'call_wrong', output: [] }],
  }), 400, 'wrong call_id');
  const lr2 = await client.responses.create({
    model: 'm', tools: localTools, previous_response_id: lr.id,
    input: [{
      type: 'shell_call_output', call_id: call.call_id, max_output_length: null,
      output: [{ stdout: 'a\n', stderr: '', outcome: { type: 'exit', exit_code: 0 } }],
    }],
  });
  eq(lr2.output_text, 'listed', 'local follow-up');

  ctx.step = 'chat completions';
  const chatTools = [{
    type: 'function',
    function: { name: 'run_shell', parameters: { type: 'object', properties: { cmd: { type: 'string' } } } },
  }];
  await scenario({ function: { name: 'run_shell', arguments: '{"cmd":"ls -la"}' } }, { message: 'two files' });
  const messages = [{ role: 'user', content: 'list files' }];
  const cc = await client.chat.completions.create({ model: 'm', messages, tools: chatTools });
  eq(cc.choices[0].finish_reason, 'tool_calls', 'finish_reason');
  const tc = cc.choices[0].message.tool_calls[0];
  eq(JSON.parse(tc.function.arguments), { cmd: 'ls -la' }, 'tool call arguments');
  await expectApiError(client.chat.completions.create({
    model: 'm', messages: [...messages, cc.choices[0].message], tools: chatTools,
  }), 400, 'unanswered tool_call');
  const cc2 = await client.chat.completions.create({
    model: 'm', tools: chatTools,
    messages: [...messages, cc.choices[0].message, { role: 'tool', tool_call_id: tc.id, content: 'a b' }],
  });
  eq([cc2.choices[0].finish_reason, cc2.choices[0].message.content], ['stop', 'two files'], 'chat final');
  // streaming, assembled by the SDK's own helper
  const cs = client.chat.completions.stream({ model: 'm', messages, tools: chatTools });
  const fin = await cs.finalChatCompletion();
  const stc = fin.choices[0].message.tool_calls[0];
  eq([fin.choices[0].finish_reason, stc.function.name, stc.function.arguments],
    ['tool_calls', 'run_shell', '{"cmd":"ls -la"}'], 'streamed tool call (SDK assembly)');
  // streaming, assembled by hand from raw chunks
  const raw = await client.chat.completions.create({ model: 'm', messages, tools: chatTools, stream: true });
  let args = '';
  let finish = null;
  for await (const chunk of raw) {
    for (const ch of chunk.choices) {
      for (const t of ch.delta.tool_calls || []) args += (t.function && t.function.arguments) || '';
      finish = ch.finish_reason || finish;
    }
  }
  eq([finish, args], ['tool_calls', '{"cmd":"ls -la"}'], 'raw chunk assembly');

  ctx.step = 'errors and retries';
  const e404 = await expectApiError(client.containers.retrieve('cntr_missing'), 404, 'unknown container');
  check(e404.error && e404.error.type === 'invalid_request_error', '404 envelope', e404.error);
  check(e404.requestID && e404.requestID.startsWith('req_'), 'x-request-id on the error', e404.requestID);
  await expectApiError(client.containers.create({ name: 'x', memory_limit: '3g' }), 400, 'bad memory_limit');
  await admin('POST', '/_fake/faults', {
    path_prefix: '/v1/containers', method: 'POST', status: 429, retry_after: '1', times: 2,
  });
  const t0 = Date.now();
  const retried = await client.containers.create({ name: 'after-429' });
  check(Date.now() - t0 >= 1500, 'the SDK waited Retry-After twice', Date.now() - t0);
  let reqs = (await admin('GET', '/_fake/state')).requests.filter((q) => q.path === '/v1/containers' && q.method === 'POST');
  eq(reqs.slice(-3).map((q) => q.status), [429, 429, 200], 'two 429s then success');
  await client.containers.delete(retried.id);
  await admin('POST', '/_fake/faults', { status: 429, retry_after: '1', times: 5 });
  await expectApiError(client.files.list({}, { maxRetries: 1 }), 429, '429 beyond the retry budget');
  await admin('DELETE', '/_fake/faults');
  await admin('POST', '/_fake/faults', { path_prefix: '/v1/files', drop_connection: true, times: 1 });
  await client.files.retrieve(f1.id); // a dropped connection is retried by the SDK
  await scenario({ message: 'a message long enough to be cut in the middle of the stream' });
  await admin('POST', '/_fake/faults', { path_prefix: '/v1/responses', drop_mid_stream: true, times: 1 });
  let dropped = false;
  try {
    await collect(await client.responses.create({ model: 'm', input: 'x', stream: true, store: false }));
  } catch (e) {
    dropped = true;
  }
  check(dropped, 'a stream cut mid-way raises in the SDK');

  ctx.step = 'cleanup';
  await client.containers.delete(c.id);
  const d1 = await client.files.delete(f1.id);
  eq([d1.id, d1.deleted], [f1.id, true], 'files.delete');
  await client.files.delete(f2.id);
  await expectApiError(client.files.retrieve(f1.id), 404, 'deleted file');
  const st = await admin('GET', '/_fake/state');
  eq([st.containers, st.files], [[], []], 'nothing left alive');
}

run('client check', main);
