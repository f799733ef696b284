// Drives the fake's beta Agents API with the official `openai` npm client (client.beta.agents),
// so the fake's sessions, events, turns, artifacts and environments are checked against what
// the SDK sends and parses, its own turn helper (sessions.stream) included. Same contract as
// check.mjs: OPENAI_BASE_URL and OPENAI_API_KEY name a running fake; exits 1 on a mismatch.
import { APIError } from 'openai';
import { admin, check, client, ctx, eq, run } from './common.mjs';

const sessions = client.beta.agents.sessions;

function outputOf(events) {
  return events
    .filter((e) => e.type === 'agent.output.command_execution_output.delta')
    .map((e) => e.delta)
    .join('');
}
async function untilReady(envId) {
  for (let i = 0; i < 600; i++) {
    const env = await client.beta.agents.environments.retrieve(envId);
    if (env.status === 'ready') return env;
    await new Promise((r) => setTimeout(r, 50));
  }
  check(false, 'environment never ready', envId);
}

async function main() {
  await admin('POST', '/_fake/reset', {});

  ctx.step = 'streaming create';
  const created = await sessions.create({
    agent: { model: 'gpt-test' },
    environment: {
      type: 'openai_hosted',
      container_size: 'small',
      network: { access: 'disabled' },
      env: { TEAM: 'blue' },
      files: [{ type: 'inline', path: '/workspace/in.txt', data: Buffer.from('a\nb\n').toString('base64') }],
      setup_commands: [{ command: 'mkdir -p /workspace/outputs' }],
    },
    input: '$ wc -l < in.txt | tee outputs/count.txt; echo $TEAM',
    stream: true,
  });
  const events = [];
  for await (const ev of created) events.push(ev);
  eq(events[0].type, 'agent.session.created', 'first event');
  eq(events.at(-1).type, 'agent.session.idle', 'last event');
  check(events.every((e) => typeof e.event_id === 'string'), 'event_id on every event');
  eq(outputOf(events), '2\nblue\n', 'command output deltas');
  const sid = events[0].session.id;
  const envId = events[0].session.environment.id;
  const done = events.find((e) => e.type === 'agent.session.turn.completed');
  check(done && done.usage.total_tokens > 0, 'turn.completed with usage', done);

  ctx.step = 'retrieve';
  const s = await sessions.retrieve(sid);
  eq([s.object, s.status, s.environment.container_size], ['agent.session', 'idle', 'small'], 'session');
  const env = await client.beta.agents.environments.retrieve(envId);
  eq([env.object, env.type, env.status], ['agent.environment', 'openai_hosted', 'ready'], 'environment');
  const turns = [];
  for await (const t of sessions.turns.list(sid)) turns.push(t);
  eq(turns.map((t) => t.id), [done.turn_id], 'turns.list');
  const turn = await sessions.turns.retrieve(done.turn_id, { session_id: sid });
  eq(turn.status, 'completed', 'turns.retrieve');

  ctx.step = 'artifacts';
  const arts = [];
  for await (const a of sessions.artifacts.list(sid)) arts.push(a);
  eq(arts.map((a) => [a.path, a.size_bytes, a.turn_id]), [['/workspace/outputs/count.txt', 2, done.turn_id]], 'artifacts.list');
  const one = await sessions.artifacts.retrieve(arts[0].id, { session_id: sid });
  eq(one.object, 'agent.session.artifact', 'artifacts.retrieve');
  const body = await (await sessions.artifacts.content(arts[0].id, { session_id: sid })).text();
  eq(body, '2\n', 'artifacts.content');

  ctx.step = 'the SDK turn helper (sessions.stream)';
  const followed = [];
  for await (const ev of sessions.stream(sid, { input: '$ echo second > outputs/second.txt; echo ok' })) {
    followed.push(ev);
  }
  eq(outputOf(followed), 'ok\n', 'second turn output');
  eq(followed.at(-1).type, 'agent.session.idle', 'the helper ends at idle');
  eq(followed.filter((e) => e.type === 'agent.session.turn.created').length, 1, 'one turn followed');

  ctx.step = 'cancel';
  const cancelled = [];
  const helper = sessions.stream(sid, { input: '$ echo started; sleep 30' });
  for await (const ev of helper) {
    cancelled.push(ev);
    if (ev.type === 'agent.output.command_execution_output.delta') {
      await sessions.events.create(sid, { events: [{ type: 'agent.session.input.cancel' }] });
    }
  }
  check(cancelled.some((e) => e.type === 'agent.session.turn.cancelled'), 'turn.cancelled', cancelled.map((e) => e.type));

  ctx.step = 'errors';
  try {
    await sessions.create({ agent: { model: 'm' }, environment: { type: 'openai_hosted', container_size: 'huge' } });
    check(false, 'bad container_size accepted');
  } catch (e) {
    check(e instanceof APIError && e.status === 400, 'a 400 APIError', String(e));
    eq(e.param, 'environment.container_size', 'the error names the field');
  }

  ctx.step = 'cleanup';
  const other = await sessions.create({ agent: { model: 'm' }, environment: { type: 'openai_hosted' } });
  await untilReady(other.environment.id);
  const d = await sessions.delete(other.id);
  eq([d.object, d.deleted], ['agent.session.deleted', true], 'sessions.delete');
  await sessions.delete(sid);
  const st = await admin('GET', '/_fake/state');
  eq([st.agents.sessions, st.agents.environments, st.agents.artifacts], [[], [], []], 'nothing left alive');
}

run('agents client check', main);
