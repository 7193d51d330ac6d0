import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readEvents } from '../support/sse-client.js';
import { startTestPlatform, type TestPlatform } from '../support/test-platform.js';

/**
 * The platform as a user meets it: six OS processes (five services and the gateway) on loopback,
 * real gRPC between them, a real database under each, driven over HTTP and SSE only.
 */
describe('a task through the whole platform', () => {
  let platform: TestPlatform;
  const auth = () => ({ Authorization: `Bearer ${platform.token}` });
  const json = () => ({ ...auth(), 'Content-Type': 'application/json' });

  async function createTask(body: unknown, headers: Record<string, string> = {}) {
    const response = await fetch(`${platform.url}/v1/tasks`, {
      method: 'POST',
      headers: { ...json(), ...headers },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Record<string, any>, headers: response.headers };
  }

  async function getTask(id: string) {
    const response = await fetch(`${platform.url}/v1/tasks/${id}`, { headers: auth() });
    expect(response.status).toBe(200);
    return (await response.json()) as Record<string, any>;
  }

  async function followToEnd(id: string, lastEventId?: string) {
    return readEvents(`${platform.url}/v1/tasks/${id}/events`, {
      ...auth(),
      ...(lastEventId ? { 'Last-Event-ID': lastEventId } : {}),
    }, { until: 'end', timeoutMs: 90_000 });
  }

  beforeAll(async () => {
    platform = await startTestPlatform();
    // The demo backends answer well or badly at random by default (their `quality`); these tests pin
    // them to good answers and make them bad on purpose where a test needs it.
    const body = (await (await fetch(`${platform.url}/api/v1/agents`, { headers: auth() })).json()) as { data: any[] };
    for (const agent of body.data) {
      const response = await fetch(`${platform.url}/api/v1/agents/${agent.id}`, {
        method: 'PUT',
        headers: json(),
        body: JSON.stringify({ ...agent, configuration: { ...agent.configuration, quality: 1 } }),
      });
      expect(response.status).toBe(200);
    }
  }, 180_000);

  afterAll(async () => {
    await platform?.stop();
  });

  it('lists the built-in demo backends, clearly labelled, with two model families', async () => {
    const response = await fetch(`${platform.url}/v1/adapters`, { headers: auth() });
    expect(response.status).toBe(200);
    const body = (await response.json()) as any;
    const adapters: any[] = Array.isArray(body) ? body : body.data;
    const demos = adapters.filter((adapter) => adapter.demo === true);
    expect(demos.length).toBeGreaterThanOrEqual(4);
    expect(new Set(demos.map((adapter) => adapter.model_family)).size).toBeGreaterThanOrEqual(2);
    for (const demo of demos) {
      expect(demo.type).toMatch(/^demo:/);
      expect(demo.rate_card).toBeTruthy();
    }
  });

  it('runs a task to a verified result, streams it, and replays after Last-Event-ID without gap or duplicate', async () => {
    const created = await createTask({ task: 'Write a haiku about routing tasks to agents', mode: 'cheapest', budget: { per_task_usd: 0.5 } });
    expect(created.status).toBe(201);
    expect(created.body.id).toMatch(/^tsk_/);
    expect(created.body.state).toBe('queued');

    const stream = await followToEnd(created.body.id);
    expect(stream.status).toBe(200);
    expect(stream.contentType).toContain('text/event-stream');
    const seqs = stream.events.map((event) => Number(event.id));
    expect(seqs).toEqual(seqs.map((_, index) => index + 1));
    const kinds = new Set(stream.events.map((event) => event.event));
    expect(kinds).toEqual(new Set(['state', 'output', 'end']));
    const states = stream.events.filter((event) => event.event === 'state').map((event) => JSON.parse(event.data).state);
    expect(states[0]).toBe('queued');
    expect(states).toContain('running');
    expect(states).toContain('verifying');
    const final = await getTask(created.body.id);
    expect(states.at(-1), JSON.stringify({ error: final.error, explanation: final.explanation })).toBe('succeeded');
    expect(stream.events.at(-1)!.event).toBe('end');

    // Reconnect from the middle: exactly the tail, nothing missing, nothing twice.
    const middle = Math.floor(stream.events.length / 2);
    const replay = await followToEnd(created.body.id, stream.events[middle - 1]!.id);
    expect(replay.events.map((event) => event.id)).toEqual(stream.events.slice(middle).map((event) => event.id));
    expect(replay.events.map((event) => event.data)).toEqual(stream.events.slice(middle).map((event) => event.data));

    const task = await getTask(created.body.id);
    expect(task.state).toBe('succeeded');
    expect(task.result).toEqual(expect.any(String));
    expect(task.result.length).toBeGreaterThan(0);
    expect(task.error).toBeNull();
    expect(task.finished_at).toEqual(expect.any(String));
    // The cost is exact and is the sum of what every attempt (and its judge) cost.
    expect(task.cost.micro_usd).toBeGreaterThan(0);
    expect(task.cost.micro_usd).toBe(task.attempts.reduce((sum: number, attempt: any) => sum + attempt.cost.micro_usd, 0));
    expect(task.cost.usd).toBe(Math.floor((task.cost.micro_usd + 5_000) / 10_000) / 100);
    // The last attempt passed a judge of another model family.
    const last = task.attempts.at(-1);
    expect(last.state).toBe('passed');
    expect(last.verdict.pass).toBe(true);
    expect(last.verdict.judge_model_family).not.toBe(last.model_family);
    // The explanation tells every decision, says the backends are demos, and embeds the placement.
    const steps = task.explanation.map((entry: any) => entry.step);
    for (const step of ['evaluate', 'place', 'reserve', 'lease', 'verify']) expect(steps).toContain(step);
    const placement = task.explanation.find((entry: any) => entry.step === 'place');
    expect(placement.message).toMatch(/demo/i);
    expect(placement.decision_id).toMatch(/^dec_/);
    expect(placement.detail.candidates.length).toBeGreaterThan(0);
    expect(task.classification.task_class).toEqual(expect.any(String));

    // Billing recorded the same money for the project's day.
    const usage = await fetch(`${platform.url}/v1/usage`, { headers: auth() });
    expect(usage.status).toBe(200);
    const spend = (await usage.json()) as any;
    expect(spend.total.micro_usd).toBeGreaterThanOrEqual(task.cost.micro_usd);
  });

  it('fails a task whose budget cannot cover one attempt with actor.budget.exceeded, and runs nothing', async () => {
    const created = await createTask({ task: 'Summarise the history of routing', budget: { per_task_usd: 0.000001 } });
    expect(created.status).toBe(201);
    const stream = await followToEnd(created.body.id);
    const end = JSON.parse(stream.events.at(-1)!.data);
    expect(end.state).toBe('failed');
    const task = await getTask(created.body.id);
    expect(task.state).toBe('failed');
    expect(task.error.code).toBe('actor.budget.exceeded');
    expect(task.attempts).toEqual([]);
    expect(task.cost.micro_usd).toBe(0);
    expect(stream.events.some((event) => event.event === 'output')).toBe(false);
  });

  it('returns the same task for a repeated Idempotency-Key', async () => {
    const key = `idem-${Date.now()}`;
    const first = await createTask({ task: 'Say hello', mode: 'fastest' }, { 'Idempotency-Key': key });
    const second = await createTask({ task: 'Say hello', mode: 'fastest' }, { 'Idempotency-Key': key });
    expect(first.status).toBe(201);
    expect(second.status).toBe(200);
    expect(second.body.id).toBe(first.body.id);
  });

  it('escalates to a stronger backend when the judge rejects the cheap answer', async () => {
    // Make the cheapest demo slot produce flawed answers every time.
    const agentsResponse = await fetch(`${platform.url}/api/v1/agents`, { headers: auth() });
    expect(agentsResponse.status).toBe(200);
    const agentsBody = (await agentsResponse.json()) as any;
    const agents: any[] = Array.isArray(agentsBody) ? agentsBody : agentsBody.data;
    const cheap = agents.find((agent) => agent.agent_type === 'demo:alpha-mini');
    expect(cheap).toBeTruthy();
    const updated = await fetch(`${platform.url}/api/v1/agents/${cheap.id}`, {
      method: 'PUT',
      headers: json(),
      body: JSON.stringify({ ...cheap, configuration: { ...cheap.configuration, quality: 0, latency_ms: 50 } }),
    });
    expect(updated.status).toBe(200);

    const created = await createTask({ task: 'List three prime numbers', mode: 'cheapest', budget: { per_task_usd: 0.5 } });
    await followToEnd(created.body.id);
    const task = await getTask(created.body.id);
    expect(task.state).toBe('succeeded');
    expect(task.attempts.length).toBeGreaterThanOrEqual(2);
    expect(task.attempts[0].backend).toBe('demo:alpha-mini');
    expect(task.attempts[0].state).toBe('rejected');
    expect(task.attempts[0].verdict.pass).toBe(false);
    expect(task.attempts.at(-1).state).toBe('passed');
    expect(task.attempts.at(-1).backend).not.toBe('demo:alpha-mini');
    expect(task.explanation.map((entry: any) => entry.step)).toContain('escalate');
    expect(task.attempts.map((attempt: any) => attempt.number)).toEqual(task.attempts.map((_: unknown, index: number) => index + 1));

    await fetch(`${platform.url}/api/v1/agents/${cheap.id}`, { method: 'PUT', headers: json(), body: JSON.stringify(cheap) });
  });

  it('cancels a running task: it ends cancelled with who asked, once', async () => {
    const agentsBody = (await (await fetch(`${platform.url}/api/v1/agents`, { headers: auth() })).json()) as any;
    const agents: any[] = Array.isArray(agentsBody) ? agentsBody : agentsBody.data;
    const slow = agents.find((agent) => agent.agent_type === 'demo:beta-large');
    await fetch(`${platform.url}/api/v1/agents/${slow.id}`, {
      method: 'PUT',
      headers: json(),
      body: JSON.stringify({ ...slow, configuration: { latency_ms: 30_000 } }),
    });
    const created = await createTask({ task: 'Think very slowly about routing', mode: 'best', backends: ['demo:beta-large'] });
    // Wait until it runs, then cancel.
    const running = await readEvents(`${platform.url}/v1/tasks/${created.body.id}/events`, auth(), { until: 'output', timeoutMs: 30_000 });
    expect(running.events.some((event) => event.event === 'output')).toBe(true);
    const cancelledAt = Date.now();
    const cancel = await fetch(`${platform.url}/v1/tasks/${created.body.id}/cancel`, { method: 'POST', headers: auth() });
    expect(cancel.status).toBe(202);
    const again = await fetch(`${platform.url}/v1/tasks/${created.body.id}/cancel`, { method: 'POST', headers: auth() });
    expect(again.status).toBeLessThan(300);
    const stream = await followToEnd(created.body.id);
    expect(Date.now() - cancelledAt).toBeLessThan(10_000);
    const ends = stream.events.filter((event) => event.event === 'end');
    expect(ends).toHaveLength(1);
    const task = await getTask(created.body.id);
    expect(task.state).toBe('cancelled');
    expect(task.error.code).toBe('actor.cancelled');
    expect(task.cancel_requested_by).toEqual(expect.any(String));
    expect(task.finished_at).toEqual(expect.any(String));
    await fetch(`${platform.url}/api/v1/agents/${slow.id}`, { method: 'PUT', headers: json(), body: JSON.stringify(slow) });
  });
});
