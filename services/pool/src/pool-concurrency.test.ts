import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { Status, createChannel, createClientFactory, type Channel } from 'nice-grpc';
import { createLogger } from '@actor/kit';
import { testDatabase } from '@actor/kit/testing';
import { remoteError } from '@actor/kit';
import { PoolServiceDefinition, type Agent, type Lease } from '@actor/proto/pool';
import { startPool } from './pool-server.js';
import { agentFields, poolTestConfig, type PoolClient, type RunningPool } from './testing/pool-test-support.js';

/** A small seeded generator (mulberry32), so a failing run can be replayed with POOL_MODEL_SEED. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = state;
    mixed = Math.imul(mixed ^ (mixed >>> 15), mixed | 1);
    mixed ^= mixed + Math.imul(mixed ^ (mixed >>> 7), mixed | 61);
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** What the model believes one client holds. */
interface HeldLease {
  id: string;
  epoch: number;
  agentId: string;
  workId: string;
  expiresAtMs: number;
}

interface ModelClient {
  index: number;
  client: PoolClient;
  incarnation: number;
  held: Map<string, HeldLease>;
}

// Clocks: the service computes deadlines from the database clock and the test compares them with its
// own; both are this machine's clock. A lease is "surely alive" only this long before its deadline and
// "surely gone" only this long after it, so scheduling delays between a call and a check never count
// as a violation.
const clockMarginMs = 150;

describe.runIf(process.env.DATABASE_URL)('leases under random concurrent use (model-based, two replicas)', () => {
  const seed = Number(process.env.POOL_MODEL_SEED ?? 20_261_129);
  const clientCount = 8;
  const rounds = 300;
  const timeBudgetMs = 120_000;
  const projectId = 'prj_model';

  let database: Awaited<ReturnType<typeof testDatabase>>;
  let replicas: RunningPool[];
  let channels: Channel[];

  beforeAll(async () => {
    database = await testDatabase();
    const logger = createLogger('pool', 'silent');
    replicas = [];
    for (let index = 0; index < 2; index++) {
      replicas.push(
        // No periodic sweep: sweeping is one of the model's steps.
        await startPool({ config: poolTestConfig(database, { POOL_SWEEP_INTERVAL_MS: '3600000' }), logger }),
      );
    }
    channels = [];
  });
  afterAll(async () => {
    for (const channel of channels ?? []) channel.close();
    for (const replica of replicas ?? []) await replica.stop();
    await database?.drop();
  });

  it(`${clientCount} clients, ${rounds} rounds: capacity and one holder per slot hold after every round`, { timeout: timeBudgetMs + 60_000 }, async () => {
    const random = seededRandom(seed);
    const pick = <Item>(items: readonly Item[]): Item => items[Math.floor(random() * items.length)]!;
    const context = (round: number) => `seed ${seed}, round ${round}`;

    // Each client has its own channel (no shared subchannel) to one of the two replicas.
    const clients: ModelClient[] = Array.from({ length: clientCount }, (_, index) => {
      const channel = createChannel(replicas[index % 2]!.address, undefined, { 'grpc.use_local_subchannel_pool': 1 });
      channels.push(channel);
      return { index, client: createClientFactory().create(PoolServiceDefinition, channel), incarnation: 0, held: new Map() };
    });
    const admin = clients[0]!.client;

    const agentType = `model-${seed}`;
    const agents: Agent[] = [];
    for (const concurrency of [1, 2, 3, 1]) {
      const { agent } = await admin.createAgent({ agent: agentFields({ agentType, concurrency }) });
      agents.push(agent!);
    }
    const capacity = new Map(agents.map((agent) => [agent.id, agent.concurrency]));
    // Leases of crashed clients: nobody holds them any more, yet they stay active until they expire.
    const abandoned = new Map<string, HeldLease>();
    const tally = { granted: 0, handedBack: 0, busy: 0, waitTimeouts: 0, renewed: 0, released: 0, lost: 0, crashes: 0, sweeps: 0 };

    const expectLost = (lease: HeldLease, error: unknown, round: number) => {
      const remote = remoteError(error);
      expect(remote?.status, `${context(round)}: ${String(error)}`).toBe(Status.ABORTED);
      expect(remote?.code, context(round)).toBe('actor.lease.expired');
      // Only a lease past its deadline may be lost.
      expect(Date.now(), `${context(round)}: lease ${lease.id} refused while alive`).toBeGreaterThan(
        lease.expiresAtMs - clockMarginMs,
      );
      tally.lost++;
    };

    const remember = (model: ModelClient, lease: Lease) => {
      model.held.set(lease.id, {
        id: lease.id,
        epoch: lease.epoch,
        agentId: lease.agent!.id,
        workId: lease.workId,
        expiresAtMs: lease.expireTime!.getTime(),
      });
    };

    const step = async (model: ModelClient, round: number) => {
      const roll = random();
      const leases = [...model.held.values()];
      if (roll < 0.4) {
        // Acquire a work item this incarnation does not hold: a named agent or any of the type. Now
        // and then handing back a lease it holds in the same call (release_first), whose work item
        // it may take again at once.
        const handBack = leases.length > 0 && random() < 0.3 ? pick(leases) : undefined;
        const workIds = [0, 1, 2].map((item) => `c${model.index}-i${model.incarnation}-w${item}`);
        const free = workIds.filter((workId) => !leases.some((lease) => lease.workId === workId && lease !== handBack));
        if (free.length === 0) return;
        const waiting = random() < 0.15;
        const request = {
          workType: pick(['task', 'judge', 'report', 'scheduled-job']),
          workId: pick(free),
          projectId,
          agentId: random() < 0.5 ? pick(agents).id : '',
          agentType,
          ttlMs: pick([250, 500, 2_000]),
          wait: waiting,
          waitTimeoutMs: waiting ? 200 : 0,
          releaseFirst: handBack && { leaseId: handBack.id, epoch: handBack.epoch },
        };
        // Handed back, it is gone whatever the grant does: only a refusal of the release keeps nothing.
        if (handBack) model.held.delete(handBack.id);
        try {
          const { lease, released } = await model.client.acquire(request);
          expect(released, context(round)).toBe(handBack !== undefined);
          if (handBack) tally.handedBack++;
          remember(model, lease!);
          tally.granted++;
        } catch (error) {
          const remote = remoteError(error);
          if (handBack && remote?.status === Status.ABORTED) expectLost(handBack, error, round);
          else if (remote?.status === Status.RESOURCE_EXHAUSTED && !waiting) tally.busy++;
          else if (remote?.status === Status.DEADLINE_EXCEEDED && waiting) tally.waitTimeouts++;
          else throw new Error(`${context(round)}: acquire failed unexpectedly: ${String(error)}`);
        }
      } else if (roll < 0.6) {
        if (leases.length === 0) return;
        const lease = pick(leases);
        try {
          const { lease: renewed } = await model.client.renew({ leaseId: lease.id, epoch: lease.epoch, ttlMs: pick([250, 500, 2_000]) });
          expect(renewed!.epoch, context(round)).toBe(lease.epoch);
          remember(model, renewed!);
          tally.renewed++;
        } catch (error) {
          model.held.delete(lease.id);
          expectLost(lease, error, round);
        }
      } else if (roll < 0.85) {
        if (leases.length === 0) return;
        const lease = pick(leases);
        model.held.delete(lease.id);
        try {
          expect(await model.client.release({ leaseId: lease.id, epoch: lease.epoch }), context(round)).toEqual({ released: true });
          tally.released++;
        } catch (error) {
          expectLost(lease, error, round);
        }
      } else if (roll < 0.92) {
        // Crash: the client forgets everything it held and comes back as a new incarnation.
        for (const lease of leases) abandoned.set(lease.id, lease);
        model.held.clear();
        model.incarnation++;
        tally.crashes++;
      } else if (roll < 0.94) {
        // Rare on purpose: between sweeps, expired leases sit unswept and the answers must not count them.
        await pick(replicas).repository.sweep();
        tally.sweeps++;
      }
    };

    const check = async (round: number) => {
      // 1. The database's record, straight from the tables.
      const perAgent = (await replicas[0]!.database.db.execute(sql`
        select agent_id, count(*)::int as active from pool.agent_leases
        where ended_at is null and expires_at > statement_timestamp() group by agent_id`)) as unknown as {
        rows: Array<{ agent_id: string; active: number }>;
      };
      for (const row of perAgent.rows) {
        expect(row.active, `${context(round)}: agent ${row.agent_id} over capacity`).toBeLessThanOrEqual(capacity.get(row.agent_id)!);
      }
      // Never two holders of one slot (open rows, expired-but-unswept included), nor two active leases
      // for one work item.
      const doubled = (await replicas[1]!.database.db.execute(sql`
        select 'slot' as kind, agent_id || '#' || slot_no as key, count(*)::int as open from pool.agent_leases
        where ended_at is null group by agent_id, slot_no having count(*) > 1
        union all
        select 'work', work_id, count(*)::int from pool.agent_leases
        where ended_at is null and expires_at > statement_timestamp() group by work_id having count(*) > 1`)) as unknown as {
        rows: unknown[];
      };
      expect(doubled.rows, context(round)).toEqual([]);

      // 2. ListLeases: exactly the leases someone holds (or a crashed client left) that are alive.
      const listedAt = Date.now();
      const { leases: listed } = await pick(clients).client.listLeases({ projectId });
      const known = new Map<string, HeldLease>(abandoned);
      for (const model of clients) for (const lease of model.held.values()) known.set(lease.id, lease);
      for (const lease of listed) {
        const ours = known.get(lease.id);
        expect(ours, `${context(round)}: ListLeases shows ${lease.id}, which nobody was granted`).toBeDefined();
        expect(lease.epoch, context(round)).toBe(ours!.epoch);
        expect(lease.expireTime!.getTime(), `${context(round)}: ListLeases shows expired ${lease.id}`).toBeGreaterThan(
          listedAt - clockMarginMs,
        );
      }
      const listedIds = new Set(listed.map((lease) => lease.id));
      for (const lease of known.values()) {
        if (lease.expiresAtMs > Date.now() + clockMarginMs) {
          expect(listedIds.has(lease.id), `${context(round)}: ListLeases misses live ${lease.id}`).toBe(true);
        }
      }
      const perSlotHolder = new Map<string, number>();
      for (const lease of listed) perSlotHolder.set(lease.agent!.id, (perSlotHolder.get(lease.agent!.id) ?? 0) + 1);
      for (const [agentId, count] of perSlotHolder) expect(count, context(round)).toBeLessThanOrEqual(capacity.get(agentId)!);

      // 3. IsBusy agrees with what is listed, allowing only for leases that expire in between.
      for (const agent of agents) {
        const ofAgent = listed.filter((lease) => lease.agent!.id === agent.id);
        const { busy, activeLeases } = await pick(clients).client.isBusy({ agentId: agent.id });
        const surelyAlive = ofAgent.filter((lease) => lease.expireTime!.getTime() > Date.now() + clockMarginMs).length;
        expect(activeLeases, `${context(round)}: IsBusy(${agent.id})`).toBeLessThanOrEqual(ofAgent.length);
        expect(activeLeases, `${context(round)}: IsBusy(${agent.id})`).toBeGreaterThanOrEqual(surelyAlive);
        expect(busy, context(round)).toBe(activeLeases > 0);
      }
      for (const [id, lease] of abandoned) if (lease.expiresAtMs < Date.now() - 10_000) abandoned.delete(id);
    };

    const startedAt = Date.now();
    let round = 0;
    for (; round < rounds && Date.now() - startedAt < timeBudgetMs; round++) {
      await Promise.all(clients.map((model) => step(model, round)));
      await check(round);
    }
    console.info(`model run (seed ${seed}): ${round} rounds, ${round * clientCount} steps in ${Date.now() - startedAt} ms`, tally);

    // The run did exercise what it claims to: contention, losses, crashes and sweeps all happened.
    expect(round, 'rounds completed within the time budget').toBeGreaterThanOrEqual(100);
    expect(tally.granted).toBeGreaterThan(100);
    expect(tally.handedBack).toBeGreaterThan(10);
    expect(tally.busy).toBeGreaterThan(0);
    expect(tally.lost).toBeGreaterThan(0);
    expect(tally.crashes).toBeGreaterThan(0);
    expect(tally.sweeps).toBeGreaterThan(0);

    for (const model of clients) {
      for (const lease of model.held.values()) {
        await model.client.release({ leaseId: lease.id, epoch: lease.epoch }).catch((error: unknown) => expectLost(lease, error, round));
      }
    }
  });
});
