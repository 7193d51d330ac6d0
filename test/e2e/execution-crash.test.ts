import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, sleep } from '@actor/kit';
import { BillingServiceDefinition } from '@actor/proto/billing';
import { PoolServiceDefinition } from '@actor/proto/pool';
import { RegistryServiceDefinition } from '@actor/proto/registry';
import { readEvents, type ReceivedEvent } from '../support/sse-client.js';
import { waitUntilReady } from '../../scripts/platform.js';
import { startTestPlatform, type TestPlatform } from '../support/test-platform.js';

/**
 * SIGKILL of the execution process while a task runs, then a restart: the restarted process resumes
 * the task once its claim lapses (a short claim TTL here), gives back what the dead run held in
 * billing and the pool, and finishes the task with gapless attempt numbers and event seqs.
 */
describe('the execution process killed mid-task', () => {
  let platform: TestPlatform;
  let billing: ReturnType<typeof createClient<typeof BillingServiceDefinition>>;
  let pool: ReturnType<typeof createClient<typeof PoolServiceDefinition>>;
  let projectId: string;
  const auth = () => ({ Authorization: `Bearer ${platform.token}` });
  const json = () => ({ ...auth(), 'Content-Type': 'application/json' });

  beforeAll(async () => {
    platform = await startTestPlatform({ EXECUTION_CLAIM_TTL_MS: '3000' });
    billing = createClient(BillingServiceDefinition, platform.addresses.billing);
    pool = createClient(PoolServiceDefinition, platform.addresses.pool);
    const registry = createClient(RegistryServiceDefinition, platform.addresses.registry);
    projectId = (await registry.authenticateToken({ token: platform.token })).projectId;
    // Slow, good demo agents: a run takes seconds and streams its answer, so the kill lands mid-run.
    const body = (await (await fetch(`${platform.url}/api/v1/agents`, { headers: auth() })).json()) as { data: any[] };
    for (const agent of body.data) {
      const response = await fetch(`${platform.url}/api/v1/agents/${agent.id}`, {
        method: 'PUT',
        headers: json(),
        body: JSON.stringify({
          ...agent,
          concurrency: 2,
          configuration: { ...agent.configuration, quality: 1, latency_ms: 4_000, stream_chunks: 8 },
        }),
      });
      expect(response.status).toBe(200);
    }
  }, 180_000);

  afterAll(async () => {
    await platform?.stop();
  });

  it('finishes the task after a restart: nothing leaked, nothing billed twice, numbers gapless', async () => {
    const created = await fetch(`${platform.url}/v1/tasks`, {
      method: 'POST',
      headers: json(),
      body: JSON.stringify({ task: 'Explain in three sentences why the sky is blue.' }),
    });
    expect(created.status).toBe(201);
    const task = (await created.json()) as { id: string };
    const eventsUrl = `${platform.url}/v1/tasks/${task.id}/events`;

    // The work is streaming: its lease and its reservations are held now.
    const started = await readEvents(eventsUrl, auth(), { until: 'output', timeoutMs: 90_000 });
    expect(started.events.some((event) => event.event === 'output'), JSON.stringify(started)).toBe(true);
    const leasesOfTask = async () =>
      (await pool.listLeases({ projectId })).leases.filter((lease) => lease.workId === task.id);
    expect(await leasesOfTask()).toHaveLength(1);

    await platform.platform.kill('execution', 'SIGKILL');
    // Nobody gives the dead run's holds back while execution is down (billing would only expire them
    // after ten minutes, the pool lease after a minute).
    expect((await billing.getSpend({ projectId })).reservedMicroUsd).toBeGreaterThan(0);
    expect(await leasesOfTask()).toHaveLength(1);

    platform.platform.restart('execution');
    await waitUntilReady(platform.url, 150_000);
    // Reconnects after a dropped stream with Last-Event-ID, as a browser's EventSource does.
    const all: { events: ReceivedEvent[] } = { events: [] };
    for (let tries = 0; tries < 20 && !all.events.some((event) => event.event === 'end'); tries++) {
      const lastId = all.events[all.events.length - 1]?.id;
      const more = await readEvents(eventsUrl, { ...auth(), ...(lastId ? { 'Last-Event-ID': lastId } : {}) }, {
        until: 'end',
        timeoutMs: 150_000,
      });
      all.events.push(...more.events);
      if (!more.events.some((event) => event.event === 'end')) await sleep(500);
    }
    const end = all.events.find((event) => event.event === 'end');
    expect(end, platform.logs.slice(-30).join('\n')).toBeDefined();
    expect(JSON.parse(end!.data)).toMatchObject({ state: 'succeeded' });
    const seqs = all.events.map((event) => Number(event.id));
    expect(seqs).toEqual(seqs.map((_, index) => index + 1));

    const final = (await (await fetch(`${platform.url}/v1/tasks/${task.id}`, { headers: auth() })).json()) as any;
    expect(final.state).toBe('succeeded');
    const attempts: any[] = final.attempts;
    expect(attempts.map((attempt) => attempt.number)).toEqual(attempts.map((_, index) => index + 1));
    expect(attempts[0]).toMatchObject({ number: 1, state: 'errored' });
    expect(attempts[0].error).toContain('interrupted');
    expect(attempts[attempts.length - 1].state).toBe('passed');
    const resumed = final.explanation.find((entry: any) => entry.message.includes('resumes the task'));
    expect(resumed?.detail).toMatchObject({ run: 2, interruptedAttempts: [1], releasedLeases: 1 });
    expect(resumed.detail.releasedReservations).toBeGreaterThanOrEqual(1);

    // Nothing leaked: no lease of the task is left in the pool, no reservation held in billing.
    expect(await leasesOfTask()).toHaveLength(0);
    expect((await billing.getSpend({ projectId })).reservedMicroUsd).toBe(0);
    // Nothing billed twice: every usage sample comes from its own reservation and the task's cost
    // is exactly what billing recorded for it.
    const usage = (await billing.listUsage({ projectId, taskId: task.id })).usage;
    expect(usage.length).toBeGreaterThanOrEqual(2);
    expect(new Set(usage.map((record) => record.attemptId + record.backend + record.id)).size).toBe(usage.length);
    const billed = usage.reduce((sum, record) => sum + record.costMicroUsd, 0);
    expect(final.cost.micro_usd).toBe(billed);
  }, 300_000);
});
