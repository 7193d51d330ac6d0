import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { Status } from 'nice-grpc';
import { createClient, createLogger, sleep } from '@actor/kit';
import { rejection, testDatabase } from '@actor/kit/testing';
import { PoolServiceDefinition, type AcquireRequest, type Agent } from '@actor/proto/pool';
import { startPool } from './pool-server.js';
import {
  acquireFields,
  agentFields,
  poolTestConfig,
  until,
  type PoolClient,
  type RunningPool,
} from './testing/pool-test-support.js';

// The periodic sweep is switched off (one hour) so every test shows the service's answers without
// any housekeeping having run: expired leases stay unswept in the table.
function configFor(database: { databaseUrl?: string; dataDir: string }) {
  return poolTestConfig(database, { POOL_SWEEP_INTERVAL_MS: '3600000' });
}

/** The raw row of a lease, as the database holds it. */
async function leaseRow(pool: RunningPool, leaseId: string) {
  const result = await pool.database.db.execute(
    sql`select ended_at, end_reason, expires_at from pool.agent_leases where id = ${leaseId}`,
  );
  return (result as unknown as { rows: Array<{ ended_at: Date | null; end_reason: string | null; expires_at: Date }> })
    .rows[0];
}

describe('PoolService over gRPC', () => {
  let pool: RunningPool;
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let client: PoolClient;

  beforeAll(async () => {
    database = await testDatabase();
    pool = await startPool({ config: configFor(database), logger: createLogger('pool', 'silent') });
    client = createClient(PoolServiceDefinition, pool.address, { deadlineMs: 30_000 });
  });
  afterAll(async () => {
    await pool?.stop();
    await database?.drop();
  });

  async function createAgent(overrides: Partial<Agent> = {}) {
    const { agent } = await client.createAgent({ agent: agentFields(overrides) });
    return agent!;
  }

  describe('agents', () => {
    it('creates, reads, lists, updates and deletes an agent', async () => {
      const created = await createAgent({
        capabilities: ['vision', 'code'],
        configurationJson: '{"latency_ms": 10, "quality": 0.9}',
        concurrency: 0,
      });
      expect(created.id).toMatch(/^agt_[0-9A-Z]{26}$/);
      expect(created.capabilities).toEqual(['code', 'vision']);
      expect(JSON.parse(created.configurationJson)).toEqual({ latency_ms: 10, quality: 0.9 });
      expect(created.concurrency).toBe(1);
      expect(created.createTime).toBeInstanceOf(Date);

      expect((await client.getAgent({ id: created.id })).agent).toEqual(created);
      const sameType = await createAgent({ name: `a-first-${created.name}`, agentType: created.agentType });
      const { agents } = await client.listAgents({ agentType: created.agentType });
      expect(agents.map((agent) => agent.name)).toEqual([sameType.name, created.name]);

      const { agent: updated } = await client.updateAgent({
        agent: { ...created, description: 'now disabled', enabled: false, concurrency: 3, capabilities: [] },
      });
      expect(updated).toMatchObject({ id: created.id, description: 'now disabled', enabled: false, concurrency: 3, capabilities: ['*'] });
      expect(updated!.updateTime!.getTime()).toBeGreaterThanOrEqual(created.updateTime!.getTime());

      expect(await client.deleteAgent({ id: created.id })).toEqual({ deleted: true });
      expect(await client.deleteAgent({ id: created.id })).toEqual({ deleted: false });
      expect(await rejection(client.getAgent({ id: created.id }))).toMatchObject({
        status: Status.NOT_FOUND,
        code: 'actor.pool.agent_not_found',
      });
    });

    it('refuses a taken name, but a retried create returns the same agent', async () => {
      const fields = agentFields();
      const first = await client.createAgent({ agent: fields, requestId: 'create-once' });
      const retried = await client.createAgent({ agent: fields, requestId: 'create-once' });
      expect(retried.agent?.id).toBe(first.agent?.id);
      expect(await rejection(client.createAgent({ agent: fields, requestId: 'another' }))).toMatchObject({
        status: Status.ALREADY_EXISTS,
        code: 'actor.pool.agent_name_taken',
      });
      const other = await createAgent();
      expect(await rejection(client.updateAgent({ agent: { ...other, name: fields.name! } }))).toMatchObject({
        status: Status.ALREADY_EXISTS,
      });
    });

    it('refuses bad input with INVALID_ARGUMENT naming the field', async () => {
      const notJson = await rejection(client.createAgent({ agent: agentFields({ configurationJson: '{oops' }) }));
      expect(notJson).toMatchObject({ status: Status.INVALID_ARGUMENT, message: 'agent.configuration_json must be valid JSON' });
      const notObject = await rejection(client.createAgent({ agent: agentFields({ configurationJson: '[1]' }) }));
      expect(notObject.message).toBe('agent.configuration_json must be a JSON object');
      const missing = await rejection(client.createAgent({ agent: agentFields({ name: '', agentType: '' }) }));
      expect(missing.status).toBe(Status.INVALID_ARGUMENT);
      expect(missing.message).toContain('agent.name is required');
      expect(missing.message).toContain('agent.agent_type is required');
      expect((await rejection(client.createAgent({}))).message).toBe('agent is required');
      expect((await rejection(client.updateAgent({ agent: agentFields() }))).message).toBe('agent.id is required');
      expect(await rejection(client.updateAgent({ agent: { ...agentFields(), id: 'agt_missing' } }))).toMatchObject({
        status: Status.NOT_FOUND,
      });
      const badAcquire = await rejection(client.acquire({ workType: 'task', workId: '', ttlMs: -1 }));
      expect(badAcquire.status).toBe(Status.INVALID_ARGUMENT);
      expect(badAcquire.message).toContain('work_id is required');
      expect(badAcquire.message).toContain('ttl_ms must not be negative');
    });

    it('will not delete an agent while it holds an active lease', async () => {
      const agent = await createAgent();
      const { lease } = await client.acquire(acquireFields({ agentId: agent.id }));
      expect(await rejection(client.deleteAgent({ id: agent.id }))).toMatchObject({
        status: Status.FAILED_PRECONDITION,
        code: 'actor.pool.agent_leased',
      });
      expect((await client.getAgent({ id: agent.id })).agent?.id).toBe(agent.id);
      await client.release({ leaseId: lease!.id, epoch: lease!.epoch });
      expect(await client.deleteAgent({ id: agent.id })).toEqual({ deleted: true });
    });
  });

  describe('acquire resolution', () => {
    it('prefers the explicit agent, then a capability match, then any agent of the type', async () => {
      const agentType = `resolution-${Date.now()}`;
      // Names sort the research agent first, so picking the coder proves capability beats order.
      const researcher = await createAgent({ name: `${agentType}-a-research`, agentType, capabilities: ['research'] });
      const coder = await createAgent({ name: `${agentType}-b-code`, agentType, capabilities: ['code'] });

      const byCapability = await client.acquire(acquireFields({ agentType, capability: 'code' }));
      expect(byCapability.lease?.agent?.id).toBe(coder.id);
      const byType = await client.acquire(acquireFields({ agentType, capability: 'code' }));
      expect(byType.lease?.agent?.id).toBe(researcher.id);
      const busy = await rejection(client.acquire(acquireFields({ agentType, capability: 'code' })));
      expect(busy).toMatchObject({ status: Status.RESOURCE_EXHAUSTED, code: 'actor.pool.busy' });

      await client.release({ leaseId: byCapability.lease!.id, epoch: byCapability.lease!.epoch });
      await client.release({ leaseId: byType.lease!.id, epoch: byType.lease!.epoch });
      const explicit = await client.acquire(acquireFields({ agentId: researcher.id, agentType, capability: 'code' }));
      expect(explicit.lease?.agent?.id).toBe(researcher.id);
      expect(await rejection(client.acquire(acquireFields({ agentId: researcher.id })))).toMatchObject({
        status: Status.RESOURCE_EXHAUSTED,
        code: 'actor.pool.busy',
      });
      await client.release({ leaseId: explicit.lease!.id, epoch: explicit.lease!.epoch });
    });

    it('fills the agent first by name before the next, and takes every free slot of a wide agent', async () => {
      const agentType = `order-${Date.now()}`;
      const second = await createAgent({ name: `${agentType}-b`, agentType, concurrency: 2 });
      const first = await createAgent({ name: `${agentType}-a`, agentType, concurrency: 12 });
      // A slot is looked for from a random one, wrapping around: twelve grants must still find all twelve.
      const leases = [];
      for (let index = 0; index < 14; index++) leases.push((await client.acquire(acquireFields({ agentType }))).lease!);
      expect(leases.slice(0, 12).map((lease) => lease.agent!.id)).toEqual(Array(12).fill(first.id));
      expect(leases.slice(12).map((lease) => lease.agent!.id)).toEqual([second.id, second.id]);
      const slots = await pool.database.db.execute(
        sql`select distinct slot_no from pool.agent_leases where agent_id = ${first.id} and ended_at is null`,
      );
      expect((slots as unknown as { rows: unknown[] }).rows).toHaveLength(12);
      expect(await rejection(client.acquire(acquireFields({ agentType })))).toMatchObject({ code: 'actor.pool.busy' });
      for (const lease of leases) await client.release({ leaseId: lease.id, epoch: lease.epoch });
    });

    it('a capability request without a type takes any agent serving it, "*" included', async () => {
      const capability = `cap-${Date.now()}`;
      const wildcard = await createAgent({ capabilities: ['*'] });
      const { lease } = await client.acquire(acquireFields({ agentId: '', capability, agentType: wildcard.agentType }));
      expect(lease?.agent?.id).toBe(wildcard.id);
      await client.release({ leaseId: lease!.id, epoch: lease!.epoch });
    });

    it('fails with no_matching_agent when no enabled agent could ever serve the request', async () => {
      const disabled = await createAgent({ enabled: false });
      expect(await rejection(client.acquire(acquireFields({ agentType: disabled.agentType })))).toMatchObject({
        status: Status.FAILED_PRECONDITION,
        code: 'actor.pool.no_matching_agent',
      });
      expect(await rejection(client.acquire(acquireFields({ agentId: disabled.id, wait: true })))).toMatchObject({
        status: Status.FAILED_PRECONDITION,
        code: 'actor.pool.no_matching_agent',
      });
      expect(await rejection(client.acquire(acquireFields({ agentType: 'no-such-type', wait: true })))).toMatchObject({
        status: Status.FAILED_PRECONDITION,
        code: 'actor.pool.no_matching_agent',
      });
      expect(await rejection(client.acquire(acquireFields({ agentId: 'agt_unknown' })))).toMatchObject({
        status: Status.NOT_FOUND,
      });
    });
  });

  describe('leases', () => {
    it('holds at most `concurrency` leases and reports them truthfully', async () => {
      const agent = await createAgent({ concurrency: 2 });
      const first = await client.acquire(acquireFields({ agentId: agent.id, projectId: 'prj_capacity' }));
      const second = await client.acquire(acquireFields({ agentId: agent.id, projectId: 'prj_capacity' }));
      expect(await rejection(client.acquire(acquireFields({ agentId: agent.id })))).toMatchObject({
        status: Status.RESOURCE_EXHAUSTED,
      });
      expect(await client.isBusy({ agentId: agent.id })).toEqual({ busy: true, activeLeases: 2 });
      const listed = await client.listLeases({ agentId: agent.id });
      expect(listed.leases.map((lease) => lease.id)).toEqual([first.lease!.id, second.lease!.id]);
      expect((await client.listLeases({ projectId: 'prj_capacity' })).leases).toHaveLength(2);
      expect(second.lease!.epoch).toBeGreaterThan(first.lease!.epoch);
      expect(first.lease!.expireTime!.getTime() - first.lease!.acquireTime!.getTime()).toBe(30_000);

      await client.release({ leaseId: first.lease!.id, epoch: first.lease!.epoch });
      expect(await client.isBusy({ agentId: agent.id })).toEqual({ busy: true, activeLeases: 1 });
      const third = await client.acquire(acquireFields({ agentId: agent.id }));
      await client.release({ leaseId: second.lease!.id, epoch: second.lease!.epoch });
      await client.release({ leaseId: third.lease!.id, epoch: third.lease!.epoch });
      expect(await client.isBusy({ agentId: agent.id })).toEqual({ busy: false, activeLeases: 0 });
      expect((await client.listLeases({ agentId: agent.id })).leases).toEqual([]);
    });

    it('refuses a stale epoch or an unknown lease on renew and release', async () => {
      const agent = await createAgent();
      // An earlier lease on the slot, so that this one's epoch has an older, stale one below it.
      const { lease: earlier } = await client.acquire(acquireFields({ agentId: agent.id, ttlMs: 10_000 }));
      await client.release({ leaseId: earlier!.id, epoch: earlier!.epoch });
      const { lease } = await client.acquire(acquireFields({ agentId: agent.id, ttlMs: 10_000 }));
      expect(lease!.epoch).toBeGreaterThan(earlier!.epoch);
      const staleRenew = await rejection(client.renew({ leaseId: lease!.id, epoch: lease!.epoch + 1 }));
      expect(staleRenew).toMatchObject({ status: Status.ABORTED, code: 'actor.lease.stale' });
      expect(staleRenew.message).toContain(`epoch ${lease!.epoch + 1} is stale`);
      expect(await rejection(client.release({ leaseId: lease!.id, epoch: lease!.epoch - 1 }))).toMatchObject({
        status: Status.ABORTED,
        code: 'actor.lease.stale',
      });
      expect(await rejection(client.renew({ leaseId: 'lse_unknown', epoch: 1 }))).toMatchObject({
        status: Status.ABORTED,
        code: 'actor.lease.stale',
      });
      // The stale calls changed nothing: the holder still renews with its own epoch.
      const renewed = await client.renew({ leaseId: lease!.id, epoch: lease!.epoch, ttlMs: 60_000 });
      expect(renewed.lease!.expireTime!.getTime()).toBeGreaterThan(lease!.expireTime!.getTime());
      expect(renewed.lease!.epoch).toBe(lease!.epoch);
      // The renewal answers with the whole lease, its agent included (read in the same statement).
      expect(renewed.lease).toMatchObject({
        id: lease!.id,
        workId: lease!.workId,
        acquireTime: lease!.acquireTime,
        agent: { id: agent.id, name: agent.name, concurrency: agent.concurrency },
      });
      expect(await client.release({ leaseId: lease!.id, epoch: lease!.epoch })).toEqual({ released: true });
    });

    it('release is idempotent, and a released lease cannot be renewed', async () => {
      const agent = await createAgent();
      const { lease } = await client.acquire(acquireFields({ agentId: agent.id }));
      expect(await client.release({ leaseId: lease!.id, epoch: lease!.epoch })).toEqual({ released: true });
      expect(await client.release({ leaseId: lease!.id, epoch: lease!.epoch })).toEqual({ released: false });
      expect(await rejection(client.renew({ leaseId: lease!.id, epoch: lease!.epoch }))).toMatchObject({
        status: Status.ABORTED,
        code: 'actor.lease.released',
      });
    });

    it('a retried acquire with the same request id returns the same lease', async () => {
      const agent = await createAgent({ concurrency: 2 });
      const request = acquireFields({ agentId: agent.id, requestId: `acquire-${agent.id}` });
      const first = await client.acquire(request);
      const retried = await client.acquire(request);
      expect(retried.lease).toEqual(first.lease);
      expect(await client.isBusy({ agentId: agent.id })).toMatchObject({ activeLeases: 1 });
      await client.release({ leaseId: first.lease!.id, epoch: first.lease!.epoch });
    });

    it('a retried acquire returns its lease when the agent is full, and after the lease was released', async () => {
      const agent = await createAgent({ concurrency: 1 });
      const request = acquireFields({ agentId: agent.id, requestId: `full-${agent.id}` });
      const first = await client.acquire(request);
      const whileFull = await client.acquire(request);
      expect(whileFull.lease).toEqual(first.lease);
      await client.release({ leaseId: first.lease!.id, epoch: first.lease!.epoch });
      // The slot is free again: the retry must still not take a second lease.
      const afterRelease = await client.acquire(request);
      expect(afterRelease.lease).toMatchObject({ id: first.lease!.id, epoch: first.lease!.epoch });
      expect(await client.isBusy({ agentId: agent.id })).toMatchObject({ activeLeases: 0 });
    });

    describe('release_first: hand a lease back and take the next slot in one call', () => {
      it('ends the lease and grants its own slot again, with a greater epoch', async () => {
        const agent = await createAgent({ concurrency: 1 });
        const { lease: first } = await client.acquire(acquireFields({ agentId: agent.id }));
        const next = await client.acquire(
          acquireFields({ agentId: agent.id, releaseFirst: { leaseId: first!.id, epoch: first!.epoch } }),
        );
        expect(next.released).toBe(true);
        expect(next.lease!.agent!.id).toBe(agent.id);
        expect(next.lease!.epoch).toBeGreaterThan(first!.epoch);
        expect(await leaseRow(pool, first!.id)).toMatchObject({ end_reason: 'released' });
        expect(await rejection(client.renew({ leaseId: first!.id, epoch: first!.epoch }))).toMatchObject({
          code: 'actor.lease.released',
        });
        expect(await client.isBusy({ agentId: agent.id })).toEqual({ busy: true, activeLeases: 1 });
        // Without release_first the answer says nothing was released.
        expect(await client.release({ leaseId: next.lease!.id, epoch: next.lease!.epoch })).toEqual({ released: true });
        const plain = await client.acquire(acquireFields({ agentId: agent.id }));
        expect(plain.released).toBe(false);
        await client.release({ leaseId: plain.lease!.id, epoch: plain.lease!.epoch });
      });

      it('grants nothing when the release is refused (stale, unknown, expired), and keeps the lease it named', async () => {
        const agent = await createAgent({ concurrency: 2 });
        const { lease } = await client.acquire(acquireFields({ agentId: agent.id }));
        const stale = await rejection(
          client.acquire(acquireFields({ agentId: agent.id, releaseFirst: { leaseId: lease!.id, epoch: lease!.epoch + 1 } })),
        );
        expect(stale).toMatchObject({ status: Status.ABORTED, code: 'actor.lease.stale' });
        expect(await rejection(client.acquire(acquireFields({ agentId: agent.id, releaseFirst: { leaseId: 'lse_unknown', epoch: 1 } })))).toMatchObject({
          status: Status.ABORTED,
          code: 'actor.lease.stale',
        });
        // Nothing was granted and the holder still has its lease.
        expect(await client.isBusy({ agentId: agent.id })).toEqual({ busy: true, activeLeases: 1 });
        expect(await client.release({ leaseId: lease!.id, epoch: lease!.epoch })).toEqual({ released: true });

        const { lease: brief } = await client.acquire(acquireFields({ agentId: agent.id, ttlMs: 100 }));
        await sleep(300);
        expect(
          await rejection(client.acquire(acquireFields({ agentId: agent.id, releaseFirst: { leaseId: brief!.id, epoch: brief!.epoch } }))),
        ).toMatchObject({ status: Status.ABORTED, code: 'actor.lease.expired' });
        expect(await leaseRow(pool, brief!.id)).toMatchObject({ end_reason: 'expired' });
        expect(await client.isBusy({ agentId: agent.id })).toEqual({ busy: false, activeLeases: 0 });
      });

      it('a retried call returns the same lease and reports the release as done before', async () => {
        const agent = await createAgent({ concurrency: 1 });
        const { lease: first } = await client.acquire(acquireFields({ agentId: agent.id }));
        const request = acquireFields({
          agentId: agent.id,
          requestId: `hand-back-${agent.id}`,
          releaseFirst: { leaseId: first!.id, epoch: first!.epoch },
        });
        const granted = await client.acquire(request);
        const retried = await client.acquire(request);
        expect(granted.released).toBe(true);
        expect(retried).toEqual({ lease: granted.lease, released: false });
        expect(await client.isBusy({ agentId: agent.id })).toEqual({ busy: true, activeLeases: 1 });
        await client.release({ leaseId: granted.lease!.id, epoch: granted.lease!.epoch });
      });

      it('the release holds even when no slot is granted', async () => {
        const held = await createAgent({ concurrency: 1 });
        const full = await createAgent({ concurrency: 1 });
        const { lease } = await client.acquire(acquireFields({ agentId: held.id }));
        const { lease: blocker } = await client.acquire(acquireFields({ agentId: full.id }));
        expect(
          await rejection(client.acquire(acquireFields({ agentId: full.id, releaseFirst: { leaseId: lease!.id, epoch: lease!.epoch } }))),
        ).toMatchObject({ status: Status.RESOURCE_EXHAUSTED, code: 'actor.pool.busy' });
        expect(await client.isBusy({ agentId: held.id })).toEqual({ busy: false, activeLeases: 0 });
        expect(await client.release({ leaseId: lease!.id, epoch: lease!.epoch })).toEqual({ released: false });
        await client.release({ leaseId: blocker!.id, epoch: blocker!.epoch });
      });

      it('does not jump the queue: the slot it hands back goes to an older queued request first', async () => {
        const agent = await createAgent({ concurrency: 1 });
        const { lease: held } = await client.acquire(acquireFields({ agentId: agent.id, workId: 'tsk_holder' }));
        const queued = client.acquire(acquireFields({ agentId: agent.id, workId: 'tsk_queued', wait: true, waitTimeoutMs: 30_000 }));
        await until(async () => (await pool.repository.liveWaiterCount()) === 1, 'the request to queue');
        const next = client.acquire(
          acquireFields({
            agentId: agent.id,
            workId: 'tsk_holder_next',
            wait: true,
            waitTimeoutMs: 30_000,
            releaseFirst: { leaseId: held!.id, epoch: held!.epoch },
          }),
        );
        const first = await queued;
        expect(first.lease!.workId).toBe('tsk_queued');
        // The hand-back queued behind it, its release already done.
        expect(await leaseRow(pool, held!.id)).toMatchObject({ end_reason: 'released' });
        await client.release({ leaseId: first.lease!.id, epoch: first.lease!.epoch });
        const second = await next;
        expect(second).toMatchObject({ released: true, lease: { workId: 'tsk_holder_next' } });
        await client.release({ leaseId: second.lease!.id, epoch: second.lease!.epoch });
      });
    });

    it('a zombie that froze past its TTL is refused on renew and release; only the new holder counts', async () => {
      const agent = await createAgent();
      const { lease: zombie } = await client.acquire(acquireFields({ agentId: agent.id, ttlMs: 200 }));
      expect(await rejection(client.acquire(acquireFields({ agentId: agent.id })))).toMatchObject({
        status: Status.RESOURCE_EXHAUSTED,
      });
      // The holder freezes (a GC pause, a stopped VM) past its deadline; the slot is reclaimed and re-leased.
      await sleep(300);
      const { lease: successor } = await client.acquire(acquireFields({ agentId: agent.id }));
      expect(successor!.epoch).toBeGreaterThan(zombie!.epoch);

      // The zombie wakes up and tries to carry on, then to hand in its result by releasing.
      expect(await rejection(client.renew({ leaseId: zombie!.id, epoch: zombie!.epoch }))).toMatchObject({
        status: Status.ABORTED,
        code: 'actor.lease.expired',
      });
      expect(await rejection(client.release({ leaseId: zombie!.id, epoch: zombie!.epoch }))).toMatchObject({
        status: Status.ABORTED,
        code: 'actor.lease.expired',
      });
      // Its refused calls changed nothing: the successor still holds the slot and hands in its result.
      expect(await client.isBusy({ agentId: agent.id })).toEqual({ busy: true, activeLeases: 1 });
      expect((await client.listLeases({ agentId: agent.id })).leases.map((lease) => lease.id)).toEqual([successor!.id]);
      expect(await client.renew({ leaseId: successor!.id, epoch: successor!.epoch })).toMatchObject({
        lease: { id: successor!.id },
      });
      expect(await client.release({ leaseId: successor!.id, epoch: successor!.epoch })).toEqual({ released: true });

      // The record says the same: the zombie's lease ran out at its deadline, the successor's was released.
      const zombieRow = await leaseRow(pool, zombie!.id);
      expect(zombieRow).toMatchObject({ end_reason: 'expired' });
      expect(new Date(zombieRow!.ended_at!).getTime()).toBe(new Date(zombieRow!.expires_at).getTime());
      expect(await leaseRow(pool, successor!.id)).toMatchObject({ end_reason: 'released' });
      // And a retried release of the zombie's lease is still refused, not "already released".
      expect(await rejection(client.release({ leaseId: zombie!.id, epoch: zombie!.epoch }))).toMatchObject({
        code: 'actor.lease.expired',
      });
    });

    it('a holder that lost its lease without anyone taking the slot is refused too', async () => {
      const agent = await createAgent();
      const { lease } = await client.acquire(acquireFields({ agentId: agent.id, ttlMs: 150 }));
      await sleep(250);
      expect(await rejection(client.release({ leaseId: lease!.id, epoch: lease!.epoch }))).toMatchObject({
        status: Status.ABORTED,
        code: 'actor.lease.expired',
      });
      expect(await leaseRow(pool, lease!.id)).toMatchObject({ end_reason: 'expired' });
    });

    it('IsBusy and ListLeases stop counting a lease the moment it expires, before any sweep', async () => {
      const agent = await createAgent({ concurrency: 2 });
      const projectId = `prj_truth_${agent.id}`;
      const { lease: shortLived } = await client.acquire(acquireFields({ agentId: agent.id, projectId, ttlMs: 300 }));
      const { lease: longLived } = await client.acquire(acquireFields({ agentId: agent.id, projectId, ttlMs: 60_000 }));
      expect(await client.isBusy({ agentId: agent.id })).toEqual({ busy: true, activeLeases: 2 });
      expect((await client.listLeases({ projectId })).leases.map((lease) => lease.id)).toEqual([shortLived!.id, longLived!.id]);

      await sleep(400);
      // Not swept: the row still looks open, yet neither answer counts it.
      expect((await leaseRow(pool, shortLived!.id))?.ended_at).toBeNull();
      expect(await client.isBusy({ agentId: agent.id })).toEqual({ busy: true, activeLeases: 1 });
      expect((await client.listLeases({ projectId })).leases.map((lease) => lease.id)).toEqual([longLived!.id]);
      expect((await client.listLeases({ agentId: agent.id })).leases.map((lease) => lease.id)).toEqual([longLived!.id]);

      await client.release({ leaseId: longLived!.id, epoch: longLived!.epoch });
      expect(await client.isBusy({ agentId: agent.id })).toEqual({ busy: false, activeLeases: 0 });
      expect((await client.listLeases({ projectId })).leases).toEqual([]);
      // A sweep afterwards only writes down what the answers already said.
      expect((await pool.repository.sweep()).expiredLeases).toBeGreaterThanOrEqual(1);
      expect(await leaseRow(pool, shortLived!.id)).toMatchObject({ end_reason: 'expired' });
    });
  });

  describe('waiting', () => {
    it('serves queued callers in arrival order as the slot is released', async () => {
      const agent = await createAgent();
      const { lease: holder } = await client.acquire(acquireFields({ agentId: agent.id }));
      const granted: string[] = [];
      const waiters = [] as Array<Promise<{ id: string; epoch: number }>>;
      for (const name of ['first', 'second', 'third']) {
        const before = await pool.repository.liveWaiterCount();
        waiters.push(
          client.acquire(acquireFields({ agentType: agent.agentType, workId: name, wait: true })).then(({ lease }) => {
            granted.push(lease!.workId);
            return lease!;
          }),
        );
        await until(async () => (await pool.repository.liveWaiterCount()) === before + 1, `${name} to queue`);
      }

      await client.release({ leaseId: holder!.id, epoch: holder!.epoch });
      for (const [index, waiter] of waiters.entries()) {
        const lease = await waiter;
        // Several poll rounds pass while this waiter holds the slot: nobody behind it may jump ahead.
        await sleep(200);
        expect(granted).toEqual(['first', 'second', 'third'].slice(0, index + 1));
        await client.release({ leaseId: lease.id, epoch: lease.epoch });
      }
      expect(await pool.repository.liveWaiterCount()).toBe(0);
    });

    it('a caller that arrives while an older request queues elsewhere does not jump the queue', async () => {
      const agent = await createAgent();
      // A request queued through another replica that has not looked yet: only its row says it waits.
      const seq = await pool.repository.enqueueWaiter(
        { ...(acquireFields({ agentId: agent.id, wait: true }) as Required<AcquireRequest>), ttlMs: 30_000, waitTimeoutMs: 60_000, releaseFirst: null },
        10_000,
      );
      expect(await rejection(client.acquire(acquireFields({ agentType: agent.agentType })))).toMatchObject({
        status: Status.RESOURCE_EXHAUSTED,
        code: 'actor.pool.busy',
      });
      // A request for another agent is not held back by it.
      const other = await createAgent();
      const { lease: unrelated } = await client.acquire(acquireFields({ agentId: other.id }));
      await client.release({ leaseId: unrelated!.id, epoch: unrelated!.epoch });

      await pool.repository.removeWaiter(seq);
      const { lease } = await client.acquire(acquireFields({ agentType: agent.agentType }));
      expect(lease!.agent!.id).toBe(agent.id);
      await client.release({ leaseId: lease!.id, epoch: lease!.epoch });
    });

    it('a waiter gets a slot freed by expiry, without any release', async () => {
      const agent = await createAgent();
      await client.acquire(acquireFields({ agentId: agent.id, ttlMs: 300 }));
      const { lease } = await client.acquire(acquireFields({ agentId: agent.id, wait: true, waitTimeoutMs: 10_000 }));
      expect(lease!.agent!.id).toBe(agent.id);
      await client.release({ leaseId: lease!.id, epoch: lease!.epoch });
    });

    it('gives up with DEADLINE_EXCEEDED after wait_timeout_ms and leaves the queue', async () => {
      const agent = await createAgent();
      const { lease } = await client.acquire(acquireFields({ agentId: agent.id }));
      const startedAt = Date.now();
      expect(
        await rejection(client.acquire(acquireFields({ agentId: agent.id, wait: true, waitTimeoutMs: 300 }))),
      ).toMatchObject({ status: Status.DEADLINE_EXCEEDED, code: 'actor.pool.wait_timeout' });
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(300);
      expect(await pool.repository.liveWaiterCount()).toBe(0);
      await client.release({ leaseId: lease!.id, epoch: lease!.epoch });
    });

    it('a cancelled call leaves the queue and takes no slot', async () => {
      const agent = await createAgent();
      const { lease } = await client.acquire(acquireFields({ agentId: agent.id }));
      const controller = new AbortController();
      const cancelled = client.acquire(acquireFields({ agentId: agent.id, wait: true }), { signal: controller.signal });
      const settled = cancelled.catch((error: unknown) => error);
      await until(async () => (await pool.repository.liveWaiterCount()) === 1, 'the waiter to queue');
      controller.abort();
      expect(await settled).toMatchObject({ name: 'AbortError' });
      await until(async () => (await pool.repository.liveWaiterCount()) === 0, 'the waiter to leave');
      await client.release({ leaseId: lease!.id, epoch: lease!.epoch });
      expect(await client.isBusy({ agentId: agent.id })).toEqual({ busy: false, activeLeases: 0 });
    });
  });
});

// PGlite is one connection in one process; contention between replicas needs a real Postgres.
describe.runIf(process.env.DATABASE_URL)('capacity across two pool replicas on one Postgres', () => {
  let replicas: RunningPool[];
  let clients: PoolClient[];
  let database: Awaited<ReturnType<typeof testDatabase>>;

  beforeAll(async () => {
    database = await testDatabase();
    const logger = createLogger('pool', 'silent');
    replicas = [];
    for (let index = 0; index < 2; index++) replicas.push(await startPool({ config: configFor(database), logger }));
    clients = replicas.map((replica) => createClient(PoolServiceDefinition, replica.address, { deadlineMs: 60_000 }));
  });
  afterAll(async () => {
    for (const replica of replicas ?? []) await replica.stop();
    await database?.drop();
  });

  it('50 simultaneous non-waiting acquires grant exactly the 2 slots', async () => {
    const { agent } = await clients[0]!.createAgent({ agent: agentFields({ concurrency: 2 }) });
    const outcomes = await Promise.allSettled(
      Array.from({ length: 50 }, (_, index) => clients[index % 2]!.acquire(acquireFields({ agentType: agent!.agentType }))),
    );
    const granted = outcomes.filter((outcome) => outcome.status === 'fulfilled');
    expect(granted).toHaveLength(2);
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') expect(String(outcome.reason)).toContain('actor.pool.busy');
    }
    expect(await clients[1]!.isBusy({ agentId: agent!.id })).toEqual({ busy: true, activeLeases: 2 });
  });

  it('50 queued acquires from two replicas never hold more than 2 leases at once', async () => {
    const { agent } = await clients[0]!.createAgent({ agent: agentFields({ concurrency: 2 }) });
    let holding = 0;
    let mostHeld = 0;
    const epochs = await Promise.all(
      Array.from({ length: 50 }, async (_, index) => {
        const client = clients[index % 2]!;
        const { lease } = await client.acquire(
          acquireFields({ agentType: agent!.agentType, wait: true, waitTimeoutMs: 60_000 }),
        );
        holding++;
        mostHeld = Math.max(mostHeld, holding);
        await sleep(5 + (index % 4) * 5);
        holding--;
        expect(await client.release({ leaseId: lease!.id, epoch: lease!.epoch })).toEqual({ released: true });
        return lease!.epoch;
      }),
    );
    expect(new Set(epochs).size).toBe(50);
    expect(mostHeld).toBeLessThanOrEqual(2);

    // The database's own record: sweep the lease intervals and count the most that overlap.
    const result = await replicas[0]!.database.db.execute(
      sql`select acquired_at, ended_at from pool.agent_leases where agent_id = ${agent!.id}`,
    );
    const rows = (result as unknown as { rows: Array<{ acquired_at: Date; ended_at: Date }> }).rows;
    expect(rows).toHaveLength(50);
    const events = rows.flatMap((row) => [
      { at: new Date(row.acquired_at).getTime(), delta: 1 },
      { at: new Date(row.ended_at).getTime(), delta: -1 },
    ]);
    events.sort((left, right) => left.at - right.at || left.delta - right.delta);
    let overlapping = 0;
    let mostOverlapping = 0;
    for (const event of events) {
      overlapping += event.delta;
      mostOverlapping = Math.max(mostOverlapping, overlapping);
    }
    expect(mostOverlapping).toBeLessThanOrEqual(2);
    expect(mostOverlapping).toBe(2);
  });
});

describe('release commit durability', () => {
  let pool: RunningPool;
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let client: PoolClient;

  beforeAll(async () => {
    database = await testDatabase();
    // One Postgres connection, so the check below runs on the very connection the release used.
    pool = await startPool({
      config: poolTestConfig(database, { POOL_DATABASE_MAX_CONNECTIONS: '1', POOL_SWEEP_INTERVAL_MS: '3600000' }),
      logger: createLogger('pool', 'silent'),
    });
    client = createClient(PoolServiceDefinition, pool.address, { deadlineMs: 30_000 });
  });
  afterAll(async () => {
    await pool?.stop();
    await database?.drop();
  });

  it('a release that skips the WAL flush leaves later grants on its connection synchronous', async () => {
    expect(pool.config.POOL_RELEASE_SYNCHRONOUS_COMMIT).toBe(false);
    const { agent } = await client.createAgent({ agent: agentFields() });
    const synchronousCommit = async () => {
      const result = await pool.database.db.execute(sql`select current_setting('synchronous_commit') as setting`);
      return (result as unknown as { rows: Array<{ setting: string }> }).rows[0]!.setting;
    };
    const before = await synchronousCommit();
    expect(before).not.toBe('off');
    for (let round = 0; round < 3; round++) {
      const { lease } = await client.acquire(acquireFields({ agentId: agent!.id }));
      expect(await client.release({ leaseId: lease!.id, epoch: lease!.epoch })).toEqual({ released: true });
      // set_config(..., true) lasts for the release's own transaction only.
      expect(await synchronousCommit()).toBe(before);
    }
    expect(await client.isBusy({ agentId: agent!.id })).toEqual({ busy: false, activeLeases: 0 });
  });
});
