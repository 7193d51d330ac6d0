import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Status } from 'nice-grpc';
import { AsyncQueue, createClient, createLogger } from '@actor/kit';
import { rejection, testDatabase } from '@actor/kit/testing';
import { PoolServiceDefinition, type DeepPartial, type LeaseSessionRequest, type LeaseSessionResponse } from '@actor/proto/pool';
import { freePort } from '../../../scripts/platform.js';
import { LeaseSessionClient } from './client/lease-session-client.js';
import { startPool } from './pool-server.js';
import { acquireFields, agentFields, poolTestConfig, until, type PoolClient, type RunningPool } from './testing/pool-test-support.js';

const logger = createLogger('pool', 'silent');

/** A raw LeaseSession stream: send requests, read answers one at a time. */
function rawSession(client: PoolClient) {
  const requests = new AsyncQueue<DeepPartial<LeaseSessionRequest>>();
  const controller = new AbortController();
  // The call starts when its answers are first read: read them from the start, into a queue.
  const answers = new AsyncQueue<LeaseSessionResponse | 'end'>();
  void (async () => {
    try {
      for await (const answer of client.leaseSession(requests, { signal: controller.signal })) answers.push(answer);
    } catch {
      // cancelled by the test
    }
    answers.push('end');
  })();
  const reader = answers[Symbol.asyncIterator]();
  const read = async () => (await reader.next()).value as LeaseSessionResponse | 'end';
  return {
    send: (request: DeepPartial<LeaseSessionRequest>) => requests.push(request),
    next: async (): Promise<LeaseSessionResponse> => {
      const answer = await read();
      if (answer === 'end') throw new Error('the session ended');
      return answer;
    },
    /** Half-close: no more requests. */
    finish: () => requests.end(),
    /** The next read after finish: true when the server ended the stream. */
    ended: async () => (await read()) === 'end',
    cancel: () => controller.abort(),
  };
}

describe('LeaseSession', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let pool: RunningPool;
  let client: PoolClient;

  beforeAll(async () => {
    database = await testDatabase();
    pool = await startPool({ config: poolTestConfig(database), logger });
    client = createClient(PoolServiceDefinition, pool.address);
  });
  afterAll(async () => {
    await pool?.stop();
    await database?.drop();
  });

  it('acquires, renews and releases as the unary calls do, each answer naming its call', async () => {
    const { agent } = await client.createAgent({ agent: agentFields() });
    const session = rawSession(client);
    session.send({ callId: 7, acquire: acquireFields({ agentId: agent!.id }) });
    const acquired = await session.next();
    expect(acquired.callId).toBe(7);
    const lease = acquired.acquire!.lease!;
    expect(lease.agent!.id).toBe(agent!.id);
    expect(lease.epoch).toBeGreaterThan(0);
    expect((await client.isBusy({ agentId: agent!.id })).busy).toBe(true);

    session.send({ callId: 8, renew: { leaseId: lease.id, epoch: lease.epoch, ttlMs: 120_000 } });
    const renewed = await session.next();
    expect(renewed.callId).toBe(8);
    expect(renewed.renew!.lease!.expireTime!.getTime()).toBeGreaterThan(lease.expireTime!.getTime());

    session.send({ callId: 9, release: { leaseId: lease.id, epoch: lease.epoch } });
    expect(await session.next()).toEqual({ callId: 9, release: { released: true } });
    // Releasing again is harmless, as with the unary call.
    session.send({ callId: 10, release: { leaseId: lease.id, epoch: lease.epoch } });
    expect(await session.next()).toEqual({ callId: 10, release: { released: false } });
    expect((await client.isBusy({ agentId: agent!.id })).busy).toBe(false);

    session.finish();
    expect(await session.ended()).toBe(true);
  });

  it('fails an operation with the status and code the unary call would, and goes on', async () => {
    const { agent } = await client.createAgent({ agent: agentFields() });
    const session = rawSession(client);
    session.send({ callId: 1, acquire: acquireFields({ agentId: agent!.id }) });
    const lease = (await session.next()).acquire!.lease!;
    session.send({ callId: 2, release: { leaseId: lease.id, epoch: lease.epoch + 1 } });
    expect(await session.next()).toMatchObject({ callId: 2, error: { status: Status.ABORTED } });
    session.send({ callId: 3, renew: { leaseId: 'lse_missing', epoch: 1 } });
    const unknown = await session.next();
    expect(unknown.error!.status).toBe(Status.ABORTED);
    expect(unknown.error!.details).toMatch(/^actor\.lease\.[a-z_]+: /);
    session.send({ callId: 4 });
    expect(await session.next()).toMatchObject({ callId: 4, error: { status: Status.INVALID_ARGUMENT } });
    session.send({ callId: 5, acquire: { ...acquireFields({ agentId: agent!.id }), workType: '' } });
    expect(await session.next()).toMatchObject({ callId: 5, error: { status: Status.INVALID_ARGUMENT } });
    // The stream is still good.
    session.send({ callId: 6, release: { leaseId: lease.id, epoch: lease.epoch } });
    expect(await session.next()).toEqual({ callId: 6, release: { released: true } });
    session.cancel();
  });

  it('answers a release while an acquire on the same stream is queued, then grants the queued one', async () => {
    const { agent } = await client.createAgent({ agent: agentFields() });
    const session = rawSession(client);
    session.send({ callId: 1, acquire: acquireFields({ agentId: agent!.id }) });
    const held = (await session.next()).acquire!.lease!;
    session.send({ callId: 2, acquire: acquireFields({ agentId: agent!.id, wait: true, waitTimeoutMs: 30_000 }) });
    await until(async () => (await pool.repository.liveWaiterCount()) === 1, 'the second acquire to queue');
    // A reused id while call 2 is in flight is refused; call 2 goes on.
    session.send({ callId: 2, release: { leaseId: held.id, epoch: held.epoch } });
    expect(await session.next()).toMatchObject({ callId: 2, error: { status: Status.INVALID_ARGUMENT } });
    session.send({ callId: 3, release: { leaseId: held.id, epoch: held.epoch } });
    expect(await session.next()).toEqual({ callId: 3, release: { released: true } });
    const granted = await session.next();
    expect(granted.callId).toBe(2);
    expect(granted.acquire!.lease!.epoch).toBeGreaterThan(held.epoch);
    session.send({ callId: 4, release: { leaseId: granted.acquire!.lease!.id, epoch: granted.acquire!.lease!.epoch } });
    expect((await session.next()).release!.released).toBe(true);
    session.cancel();
  });

  it('cancels one queued acquire on request: it answers CANCELLED and leaves the queue', async () => {
    const { agent } = await client.createAgent({ agent: agentFields() });
    const { lease: held } = await client.acquire(acquireFields({ agentId: agent!.id }));
    const session = rawSession(client);
    session.send({ callId: 1, acquire: acquireFields({ agentId: agent!.id, wait: true, waitTimeoutMs: 30_000 }) });
    await until(async () => (await pool.repository.liveWaiterCount()) === 1, 'the acquire to queue');
    session.send({ callId: 1, cancel: {} });
    expect(await session.next()).toMatchObject({ callId: 1, error: { status: Status.CANCELLED } });
    await until(async () => (await pool.repository.liveWaiterCount()) === 0, 'the waiter to leave the queue');
    // Cancelling what is not in flight does nothing.
    session.send({ callId: 99, cancel: {} });
    session.finish();
    expect(await session.ended()).toBe(true);
    await client.release({ leaseId: held!.id, epoch: held!.epoch });
  });

  it('ends with the stream: queued acquires leave the queue, granted leases stay until released', async () => {
    const { agent } = await client.createAgent({ agent: agentFields({ concurrency: 1 }) });
    const session = rawSession(client);
    session.send({ callId: 1, acquire: acquireFields({ agentId: agent!.id }) });
    const held = (await session.next()).acquire!.lease!;
    session.send({ callId: 2, acquire: acquireFields({ agentId: agent!.id, wait: true, waitTimeoutMs: 30_000 }) });
    await until(async () => (await pool.repository.liveWaiterCount()) === 1, 'the second acquire to queue');
    session.cancel();
    await until(async () => (await pool.repository.liveWaiterCount()) === 0, 'the waiter to leave with the stream');
    const { leases } = await client.listLeases({ agentId: agent!.id });
    expect(leases.map((lease) => lease.id)).toEqual([held.id]);
    expect(await client.release({ leaseId: held.id, epoch: held.epoch })).toEqual({ released: true });
  });

  it('lets operations in flight finish when the caller closes its side', async () => {
    const { agent } = await client.createAgent({ agent: agentFields() });
    const { lease: held } = await client.acquire(acquireFields({ agentId: agent!.id }));
    const session = rawSession(client);
    session.send({ callId: 1, acquire: acquireFields({ agentId: agent!.id, wait: true, waitTimeoutMs: 30_000 }) });
    await until(async () => (await pool.repository.liveWaiterCount()) === 1, 'the acquire to queue');
    session.finish();
    await client.release({ leaseId: held!.id, epoch: held!.epoch });
    const granted = await session.next();
    expect(granted.acquire!.lease!.agent!.id).toBe(agent!.id);
    expect(await session.ended()).toBe(true);
    await client.release({ leaseId: granted.acquire!.lease!.id, epoch: granted.acquire!.lease!.epoch });
  });
});

describe('LeaseSessionClient', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let pool: RunningPool | undefined;
  let address: string;

  let dataDir: string;

  beforeAll(async () => {
    database = await testDatabase();
    // The pool restarts in one test: on PGlite its data must outlive the process's memory.
    dataDir = database.databaseUrl ? database.dataDir : mkdtempSync(join(tmpdir(), 'actor-pool-session-'));
    address = `127.0.0.1:${await freePort()}`;
    pool = await startPool({ config: poolTestConfig({ ...database, dataDir }, { POOL_ADDR: address }), logger });
  });
  afterAll(async () => {
    await pool?.stop();
    await database?.drop();
    if (!database?.databaseUrl) rmSync(dataDir, { recursive: true, force: true });
  });

  it('gives the unary calls\' answers and errors over one stream', async () => {
    const unary = createClient(PoolServiceDefinition, address);
    const sessions = new LeaseSessionClient(unary);
    const { agent } = await unary.createAgent({ agent: agentFields({ concurrency: 2 }) });
    const [first, second] = await Promise.all([
      sessions.acquire(acquireFields({ agentId: agent!.id })),
      sessions.acquire(acquireFields({ agentId: agent!.id })),
    ]);
    expect(new Set([first.lease!.id, second.lease!.id]).size).toBe(2);
    const renewed = await sessions.renew({ leaseId: first.lease!.id, epoch: first.lease!.epoch, ttlMs: 60_000 });
    expect(renewed.lease!.id).toBe(first.lease!.id);

    const stale = await rejection(sessions.release({ leaseId: second.lease!.id, epoch: second.lease!.epoch + 5 }));
    expect(stale).toMatchObject({ status: Status.ABORTED, code: 'actor.lease.stale' });
    const busy = await rejection(sessions.acquire(acquireFields({ agentId: agent!.id })));
    expect(busy).toMatchObject({ status: Status.RESOURCE_EXHAUSTED, code: 'actor.pool.busy' });

    expect(await sessions.release({ leaseId: first.lease!.id, epoch: first.lease!.epoch })).toEqual({ released: true });
    expect(await sessions.release({ leaseId: second.lease!.id, epoch: second.lease!.epoch })).toEqual({ released: true });
    sessions.close();
  });

  it('gives up on a queued acquire at its deadline or when its signal aborts, and the pool forgets it', async () => {
    const unary = createClient(PoolServiceDefinition, address);
    const sessions = new LeaseSessionClient(unary);
    const { agent } = await unary.createAgent({ agent: agentFields() });
    const held = await sessions.acquire(acquireFields({ agentId: agent!.id }));
    const queued = acquireFields({ agentId: agent!.id, wait: true, waitTimeoutMs: 60_000 });

    const late = await rejection(sessions.acquire(queued, { deadlineMs: 300 }));
    expect(late.status).toBe(Status.DEADLINE_EXCEEDED);
    await until(async () => (await pool!.repository.liveWaiterCount()) === 0, 'the timed-out waiter to leave');

    const controller = new AbortController();
    const aborted = sessions.acquire(queued, { signal: controller.signal });
    await until(async () => (await pool!.repository.liveWaiterCount()) === 1, 'the acquire to queue');
    controller.abort();
    await expect(aborted).rejects.toMatchObject({ name: 'AbortError' });
    await until(async () => (await pool!.repository.liveWaiterCount()) === 0, 'the aborted waiter to leave');

    // The slot was never given to either.
    expect((await unary.listLeases({ agentId: agent!.id })).leases.map((lease) => lease.id)).toEqual([held.lease!.id]);
    await sessions.release({ leaseId: held.lease!.id, epoch: held.lease!.epoch });
    sessions.close();
  });

  it('opens a new stream after the pool restarts, and a lease from before still releases', async () => {
    const unary = createClient(PoolServiceDefinition, address);
    const sessions = new LeaseSessionClient(unary);
    const { agent } = await unary.createAgent({ agent: agentFields() });
    const { lease } = await sessions.acquire(acquireFields({ agentId: agent!.id }));

    await pool!.stop();
    pool = await startPool({ config: poolTestConfig({ ...database, dataDir }, { POOL_ADDR: address }), logger });

    expect(await sessions.release({ leaseId: lease!.id, epoch: lease!.epoch })).toEqual({ released: true });
    sessions.close();
  });
});
