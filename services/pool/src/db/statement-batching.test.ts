import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, createLogger } from '@actor/kit';
import { testDatabase } from '@actor/kit/testing';
import { PoolServiceDefinition } from '@actor/proto/pool';
import type { AcquireSpec } from '../domain/lease-request.js';
import { startPool } from '../pool-server.js';
import { agentFields, poolTestConfig, type RunningPool } from '../testing/pool-test-support.js';
import { StatementBatcher } from './statement-batcher.js';

describe('StatementBatcher', () => {
  it('sends the first request at once and what arrives while the limit is in flight together', async () => {
    const batches: number[][] = [];
    const releases: Array<() => void> = [];
    const batcher = new StatementBatcher<number, string>(
      async (requests) => {
        batches.push(requests);
        await new Promise<void>((resolve) => releases.push(resolve));
        return requests.map((request) => `done ${request}`);
      },
      1,
      3,
    );
    const results = [1, 2, 3, 4, 5, 6].map((request) => batcher.submit(request));
    expect(batches).toEqual([[1]]);
    releases.shift()!();
    await results[0];
    await new Promise((resolve) => setImmediate(resolve));
    expect(batches).toEqual([[1], [2, 3, 4]]);
    releases.shift()!();
    await new Promise((resolve) => setImmediate(resolve));
    releases.shift()!();
    expect(await Promise.all(results)).toEqual(['done 1', 'done 2', 'done 3', 'done 4', 'done 5', 'done 6']);
    expect(batches).toEqual([[1], [2, 3, 4], [5, 6]]);
  });

  it('fails every request of a failed batch, and goes on with the next', async () => {
    let calls = 0;
    const batcher = new StatementBatcher<number, number>(
      async (requests) => {
        calls++;
        if (calls === 2) throw new Error('lost connection');
        return requests;
      },
      1,
      10,
    );
    const first = batcher.submit(1);
    const failed = [batcher.submit(2), batcher.submit(3)];
    expect(await first).toBe(1);
    for (const result of failed) await expect(result).rejects.toThrow('lost connection');
    expect(await batcher.submit(4)).toBe(4);
  });
});

describe('batched grants and releases in the repository', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let pool: RunningPool;

  beforeAll(async () => {
    database = await testDatabase();
    pool = await startPool({ config: poolTestConfig(database), logger: createLogger('pool', 'silent') });
  });
  afterAll(async () => {
    await pool?.stop();
    await database?.drop();
  });

  function spec(agentType: string, index: number, requestId = ''): AcquireSpec {
    return {
      agentId: '',
      capability: '',
      agentType,
      requestId,
      workType: 'task',
      workId: `tsk_batch_${index}`,
      projectId: 'prj_default',
      ttlMs: 60_000,
      wait: false,
      waitTimeoutMs: 0,
      releaseFirst: null,
    };
  }

  it('grants as many distinct slots as are free to concurrent first tries, and none twice', async () => {
    const client = createClient(PoolServiceDefinition, pool.address);
    const { agent } = await client.createAgent({ agent: agentFields({ concurrency: 8 }) });
    const requests = Array.from({ length: 20 }, (_, index) => spec(agent!.agentType, index));
    // The same request id twice: the second gets the first's lease, not a slot of its own.
    requests.push(spec(agent!.agentType, 100, 'req_batch_twice'), spec(agent!.agentType, 101, 'req_batch_twice'));
    const outcomes = await Promise.all(requests.map((request) => pool.repository.tryAcquireFirst(request)));
    const granted = outcomes.flatMap(({ granted }) => (granted ? [granted] : []));
    const slots = new Set(granted.map(({ lease }) => lease.slotNo));
    const leaseIds = new Set(granted.map(({ lease }) => lease.id));
    expect(leaseIds.size).toBe(slots.size);
    expect(slots.size).toBe(8);
    expect(await pool.repository.activeLeaseCount(agent!.id)).toBe(8);
    for (const { lease } of granted) expect(lease.workId).toMatch(/^tsk_batch_\d+$/);

    const released = await Promise.all(
      [...granted, granted[0]!].map(({ lease }) => pool.repository.releaseLease(lease.id, lease.epoch)),
    );
    // One release per lease ended it; the repeated one found it released.
    expect(released.filter((outcome) => 'released' in outcome && outcome.released)).toHaveLength(leaseIds.size);
    expect(released.filter((outcome) => 'released' in outcome && !outcome.released)).toHaveLength(granted.length + 1 - leaseIds.size);
    expect(await pool.repository.activeLeaseCount(agent!.id)).toBe(0);
  });

  it('hands back leases in a batch: each release ends its lease and frees its slot for that batch, a refused one grants nothing', async () => {
    const client = createClient(PoolServiceDefinition, pool.address);
    const { agent } = await client.createAgent({ agent: agentFields({ concurrency: 6 }) });
    const held = await Promise.all(
      Array.from({ length: 6 }, async (_, index) => (await pool.repository.tryAcquireFirst(spec(agent!.agentType, 300 + index))).granted!),
    );
    // Every slot is taken: the new leases can only come from the slots handed back in the same statements.
    const outcomes = await Promise.all(
      held.map(({ lease }, index) =>
        pool.repository.tryAcquireFirst({
          ...spec(agent!.agentType, 400 + index),
          releaseFirst: { leaseId: lease.id, epoch: lease.epoch + (index === 3 ? 1 : 0) },
        }),
      ),
    );
    expect(outcomes.map((outcome) => outcome.released)).toEqual([
      { released: true },
      { released: true },
      { released: true },
      { problem: 'stale' },
      { released: true },
      { released: true },
    ]);
    expect(outcomes.map((outcome) => outcome.granted !== undefined)).toEqual([true, true, true, false, true, true]);
    const slots = outcomes.flatMap(({ granted }) => (granted ? [granted.lease.slotNo] : []));
    expect(new Set(slots).size).toBe(5);
    // Five new leases and the one whose hand-back was refused.
    expect(await pool.repository.activeLeaseCount(agent!.id)).toBe(6);
  });

  it('a lease handed back twice in one batch is ended once, and every lease granted is answered', async () => {
    const client = createClient(PoolServiceDefinition, pool.address);
    const { agent } = await client.createAgent({ agent: agentFields({ concurrency: 4 }) });
    const held = (await pool.repository.tryAcquireFirst(spec(agent!.agentType, 500))).granted!;
    const handBack = { leaseId: held.lease.id, epoch: held.lease.epoch };
    // The first goes out alone; the two that arrive while it runs go out together.
    const outcomes = await Promise.all([
      pool.repository.tryAcquireFirst(spec(agent!.agentType, 501)),
      pool.repository.tryAcquireFirst({ ...spec(agent!.agentType, 502), releaseFirst: handBack }),
      pool.repository.tryAcquireFirst({ ...spec(agent!.agentType, 503), releaseFirst: handBack }),
    ]);
    expect(outcomes.slice(1).map((outcome) => outcome.released)).toEqual([{ released: true }, { released: false }]);
    const granted = outcomes.flatMap(({ granted }) => (granted ? [granted] : []));
    expect(granted).toHaveLength(3);
    // No lease the statement granted went unanswered.
    expect(await pool.repository.activeLeaseCount(agent!.id)).toBe(granted.length);
  });

  it('answers each release of a batch for itself: a stale epoch among good ones is refused alone', async () => {
    const client = createClient(PoolServiceDefinition, pool.address);
    const { agent } = await client.createAgent({ agent: agentFields({ concurrency: 4 }) });
    const granted = await Promise.all(
      Array.from({ length: 4 }, async (_, index) => (await pool.repository.tryAcquireFirst(spec(agent!.agentType, 200 + index))).granted),
    );
    const outcomes = await Promise.all(
      granted.map((item, index) => pool.repository.releaseLease(item!.lease.id, item!.lease.epoch + (index === 2 ? 1 : 0))),
    );
    expect(outcomes).toEqual([{ released: true }, { released: true }, { problem: 'stale' }, { released: true }]);
    expect(await pool.repository.activeLeaseCount(agent!.id)).toBe(1);
  });
});
