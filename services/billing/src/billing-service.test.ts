import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Status } from 'nice-grpc';
import { costJson, createClient, createLogger, openDatabase, remoteError, sleep, startGrpcServer } from '@actor/kit';
import { rejection, testDatabase } from '@actor/kit/testing';
import { BillingServiceDefinition, ReservationState, type ReserveRequest } from '@actor/proto/billing';
import { RegistryServiceDefinition, TrustClass } from '@actor/proto/registry';
import { loadRegistryConfig } from '../../registry/src/config.js';
import { startRegistry } from '../../registry/src/registry-server.js';
import { loadBillingConfig } from './config.js';
import { startBilling } from './billing-server.js';
import { createBillingService } from './billing-service.js';
import { BillingRepository } from './db/billing-repository.js';
import { schema } from './db/schema.js';
import { RateCardSource } from './rate-card-source.js';

type Billing = Awaited<ReturnType<typeof startBilling>>;
type BillingClient = ReturnType<typeof createClient<typeof BillingServiceDefinition>>;
type RegistryClient = ReturnType<typeof createClient<typeof RegistryServiceDefinition>>;

const logger = createLogger('billing-test', 'silent');

// Rate card revision 1 of the main test adapter: $1.10 / $4.40 per million tokens, 50 micro-USD a
// second, 100 micro-USD a call.
const revisionOne = { inputMicroUsdPerMtok: 1_100_000, outputMicroUsdPerMtok: 4_400_000, microUsdPerSecond: 50, microUsdPerTask: 100 };

async function putAdapter(registry: RegistryClient, type: string, prices?: typeof revisionOne) {
  await registry.putAdapter({
    adapter: {
      type,
      displayName: type,
      modelFamily: 'demo-alpha',
      capabilities: ['general'],
      limits: { contextTokens: 8_000, maxOutputTokens: 1_000, concurrency: 2, timeoutMs: 10_000 },
      trustClass: TrustClass.TRUST_CLASS_FIRST_PARTY,
      qualityTier: 1,
      demo: true,
      ready: true,
    },
  });
  if (prices) await putPrices(registry, type, prices);
}

async function putPrices(registry: RegistryClient, type: string, prices: typeof revisionOne) {
  const { rateCard } = await registry.putRateCard({
    rateCard: { adapterType: type, ...prices, source: 'billing test', reviewer: 'alice' },
    reviewerKind: 'human',
  });
  return rateCard!.revision;
}

function startBillingOn(registryAddress: string, database: { databaseUrl?: string; dataDir: string }, sweepIntervalMs: number) {
  return startBilling({
    config: loadBillingConfig({
      BILLING_ADDR: '127.0.0.1:0',
      REGISTRY_ADDR: registryAddress,
      DATABASE_URL: database.databaseUrl,
      ACTOR_DATA_DIR: database.dataDir,
      BILLING_SWEEP_INTERVAL_MS: String(sweepIntervalMs),
    }),
    logger,
  });
}

let sequence = 0;
function reserveRequest(overrides: Partial<ReserveRequest>): Partial<ReserveRequest> {
  sequence += 1;
  return { requestId: `req-${sequence}-${Math.random()}`, taskId: 'tsk_default', attemptId: `att_${sequence}`, ...overrides };
}

describe('BillingService over gRPC', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let registry: Awaited<ReturnType<typeof startRegistry>> | undefined;
  let billing: Billing;
  let client: BillingClient;
  let registryClient: RegistryClient;

  beforeAll(async () => {
    database = await testDatabase();
    registry = await startRegistry({
      config: loadRegistryConfig({ REGISTRY_ADDR: '127.0.0.1:0', DATABASE_URL: database.databaseUrl, ACTOR_DATA_DIR: database.dataDir }),
      secretKey: 'test-key',
      logger,
    });
    registryClient = createClient(RegistryServiceDefinition, registry.address);
    await putAdapter(registryClient, 'demo:billing-mini', revisionOne);
    billing = await startBillingOn(registry.address, database, 100);
    client = createClient(BillingServiceDefinition, billing.address);
  });
  afterAll(async () => {
    await billing?.stop();
    await registry?.stop();
    await database?.drop();
  });

  it('quotes a usage sample exactly, rounded up to the micro-dollar', async () => {
    // 1,234 x $1.10/M + 567 x $4.40/M = 1,357.4 + 2,494.8 = 3,852.2 micro-USD -> 3,853.
    const tokensOnly = await client.quote({
      adapterType: 'demo:billing-mini',
      usage: { inputTokens: 1_234, outputTokens: 567 },
    });
    expect(tokensOnly).toEqual({ costMicroUsd: 3_853, rateCardRevision: 1 });
    // + 2.5 s x 50 + 1 call x 100 = 3,852.2 + 125 + 100 = 4,077.2 -> 4,078.
    const everything = await client.quote({
      adapterType: 'demo:billing-mini',
      rateCardRevision: 1,
      usage: { inputTokens: 1_234, outputTokens: 567, durationMs: 2_500, calls: 1 },
    });
    expect(everything).toEqual({ costMicroUsd: 4_078, rateCardRevision: 1 });
  });

  it('refuses to quote a revision or an adapter it cannot price', async () => {
    const unknownRevision = await rejection(client.quote({ adapterType: 'demo:billing-mini', rateCardRevision: 9 }));
    expect(unknownRevision.status).toBe(Status.NOT_FOUND);
    await putAdapter(registryClient, 'demo:billing-unpriced');
    const unpriced = await rejection(client.quote({ adapterType: 'demo:billing-unpriced' }));
    expect(unpriced).toMatchObject({ status: Status.NOT_FOUND, code: 'actor.rate_card.not_found' });
    const noAdapter = await rejection(client.quote({ adapterType: '' }));
    expect(noAdapter.status).toBe(Status.INVALID_ARGUMENT);
  });

  it('holds a reservation within its limits and shows it as reserved spend of the UTC day', async () => {
    const { reservation } = await client.reserve(
      reserveRequest({ projectId: 'prj_hold', amountMicroUsd: 250_000, perTaskLimitMicroUsd: 1_000_000, perDayLimitMicroUsd: 5_000_000 }),
    );
    expect(reservation).toMatchObject({ projectId: 'prj_hold', amountMicroUsd: 250_000, state: ReservationState.RESERVATION_STATE_HELD });
    expect(reservation!.id).toMatch(/^res_[0-9A-Z]{26}$/);
    // ttl_ms 0 means ten minutes, measured on the database clock.
    expect(reservation!.expireTime!.getTime() - reservation!.createTime!.getTime()).toBe(600_000);
    const spend = await client.getSpend({ projectId: 'prj_hold' });
    expect(spend).toMatchObject({ day: reservation!.day, spentMicroUsd: 0, reservedMicroUsd: 250_000 });
    expect(reservation!.day).toBe(new Date(reservation!.createTime!).toISOString().slice(0, 10));
  });

  it('refuses a reservation over the per-task limit across attempts, naming the limit in dollars', async () => {
    const task = { projectId: 'prj_task_limit', taskId: 'tsk_limited', perTaskLimitMicroUsd: 1_000_000 };
    const first = await client.reserve(reserveRequest({ ...task, amountMicroUsd: 600_000 }));
    const refused = await rejection(client.reserve(reserveRequest({ ...task, amountMicroUsd: 500_000 })));
    expect(refused.status).toBe(Status.RESOURCE_EXHAUSTED);
    expect(refused.code).toBe('actor.budget.exceeded');
    expect(refused.message).toContain('per-task budget of $1.00 for task tsk_limited');
    expect(refused.message).toContain('$0.60 held');
    expect(refused.message).toContain('$0.50 asked');
    // Nothing was held by the refusal.
    expect((await client.getSpend({ projectId: 'prj_task_limit' })).reservedMicroUsd).toBe(600_000);
    // Another task of the same project has its own limit.
    await client.reserve(reserveRequest({ ...task, taskId: 'tsk_other', amountMicroUsd: 500_000 }));
    // Freeing the first attempt makes room for the second.
    await client.releaseReservation({ reservationId: first.reservation!.id });
    await client.reserve(reserveRequest({ ...task, amountMicroUsd: 500_000 }));
  });

  it('refuses a reservation over the per-day limit across tasks, counting settled spend', async () => {
    const project = { projectId: 'prj_day_limit', perDayLimitMicroUsd: 2_000_000 };
    const first = await client.reserve(reserveRequest({ ...project, taskId: 'tsk_a', amountMicroUsd: 1_500_000 }));
    const refused = await rejection(client.reserve(reserveRequest({ ...project, taskId: 'tsk_b', amountMicroUsd: 600_000 })));
    expect(refused).toMatchObject({ status: Status.RESOURCE_EXHAUSTED, code: 'actor.budget.exceeded' });
    expect(refused.message).toContain('per-day budget of $2.00 for project prj_day_limit');
    expect(refused.message).toContain('$1.50 held');
    expect(refused.message).toContain('$0.60 asked');
    // Settling at the actual (small) cost frees the rest of the hold: now it fits.
    const settled = await client.settle({
      reservationId: first.reservation!.id,
      adapterType: 'demo:billing-mini',
      rateCardRevision: 1,
      usage: { inputTokens: 1_234, outputTokens: 567, durationMs: 2_500, calls: 1 },
      producedOutput: true,
    });
    expect(settled.usage!.costMicroUsd).toBe(4_078);
    await client.reserve(reserveRequest({ ...project, taskId: 'tsk_b', amountMicroUsd: 600_000 }));
    const spend = await client.getSpend({ projectId: 'prj_day_limit' });
    expect(spend).toMatchObject({ spentMicroUsd: 4_078, reservedMicroUsd: 600_000 });
    // What is spent counts too: $2.00 - $0.004078 spent - $0.60 held leaves less than $1.40.
    const overSpent = await rejection(client.reserve(reserveRequest({ ...project, taskId: 'tsk_c', amountMicroUsd: 1_400_000 })));
    expect(overSpent.message).toContain('$0.004078 spent');
  });

  it('settles by the named rate-card revision even after a newer one is written', async () => {
    await putAdapter(registryClient, 'demo:billing-revised', revisionOne);
    const doubled = { inputMicroUsdPerMtok: 2_200_000, outputMicroUsdPerMtok: 8_800_000, microUsdPerSecond: 100, microUsdPerTask: 200 };
    expect(await putPrices(registryClient, 'demo:billing-revised', doubled)).toBe(2);
    const usage = { inputTokens: 1_234, outputTokens: 567, durationMs: 2_500, calls: 1 };
    const old = await client.reserve(reserveRequest({ projectId: 'prj_revisions', amountMicroUsd: 10_000 }));
    const byRevisionOne = await client.settle({
      reservationId: old.reservation!.id,
      adapterType: 'demo:billing-revised',
      rateCardRevision: 1,
      usage,
      producedOutput: true,
    });
    expect(byRevisionOne.usage).toMatchObject({ rateCardRevision: 1, costMicroUsd: 4_078, backend: 'demo:billing-revised' });
    const current = await client.reserve(reserveRequest({ projectId: 'prj_revisions', amountMicroUsd: 10_000 }));
    const byCurrent = await client.settle({
      reservationId: current.reservation!.id,
      adapterType: 'demo:billing-revised',
      usage,
      producedOutput: true,
    });
    // 2 x 3,852.2 + 250 + 200 = 8,154.4 -> 8,155.
    expect(byCurrent.usage).toMatchObject({ rateCardRevision: 2, costMicroUsd: 8_155 });
  });

  it('makes Reserve idempotent by request id, also under concurrent retries', async () => {
    const request = reserveRequest({ projectId: 'prj_idempotent', amountMicroUsd: 300_000, perDayLimitMicroUsd: 1_000_000 });
    const responses = await Promise.all(Array.from({ length: 5 }, () => client.reserve(request)));
    const ids = new Set(responses.map((response) => response.reservation!.id));
    expect(ids.size).toBe(1);
    const again = await client.reserve(request);
    expect(ids.has(again.reservation!.id)).toBe(true);
    expect((await client.getSpend({ projectId: 'prj_idempotent' })).reservedMicroUsd).toBe(300_000);
    const reused = await rejection(client.reserve({ ...request, amountMicroUsd: 400_000 }));
    expect(reused).toMatchObject({ status: Status.INVALID_ARGUMENT, code: 'actor.request_id.reused' });
  });

  it('settles once: a second Settle returns the first record and charges nothing more', async () => {
    const { reservation } = await client.reserve(reserveRequest({ projectId: 'prj_settle_twice', amountMicroUsd: 50_000 }));
    const settle = { reservationId: reservation!.id, adapterType: 'demo:billing-mini', rateCardRevision: 1, producedOutput: true };
    const first = await client.settle({ ...settle, usage: { inputTokens: 1_234, outputTokens: 567 } });
    const second = await client.settle({ ...settle, usage: { inputTokens: 99_999, outputTokens: 99_999 } });
    expect(second.usage).toEqual(first.usage);
    expect(first.usage!.id).toMatch(/^use_/);
    expect(await client.getSpend({ projectId: 'prj_settle_twice' })).toMatchObject({ spentMicroUsd: 3_853, reservedMicroUsd: 0 });
    expect((await client.releaseReservation({ reservationId: reservation!.id })).released).toBe(false);
  });

  it('releases once, and refuses to settle what was released', async () => {
    const { reservation } = await client.reserve(reserveRequest({ projectId: 'prj_release', amountMicroUsd: 70_000 }));
    expect((await client.releaseReservation({ reservationId: reservation!.id })).released).toBe(true);
    expect((await client.releaseReservation({ reservationId: reservation!.id })).released).toBe(false);
    expect((await client.getSpend({ projectId: 'prj_release' })).reservedMicroUsd).toBe(0);
    const settleReleased = await rejection(
      client.settle({ reservationId: reservation!.id, adapterType: 'demo:billing-mini', usage: { inputTokens: 10 } }),
    );
    expect(settleReleased).toMatchObject({ status: Status.FAILED_PRECONDITION, code: 'actor.reservation.not_held' });
    expect(settleReleased.message).toContain('released');
    const unknown = await rejection(client.releaseReservation({ reservationId: 'res_nope' }));
    expect(unknown.status).toBe(Status.NOT_FOUND);
  });

  it("releases a task's held reservations at once, leaving settled ones and other tasks alone", async () => {
    const projectId = 'prj_release_task';
    const limits = { projectId, perTaskLimitMicroUsd: 100_000, perDayLimitMicroUsd: 1_000_000 };
    const settled = await client.reserve(reserveRequest({ ...limits, taskId: 'tsk_dead_run', amountMicroUsd: 20_000 }));
    await client.settle({
      reservationId: settled.reservation!.id,
      adapterType: 'demo:billing-mini',
      rateCardRevision: 1,
      usage: { inputTokens: 1_234, outputTokens: 567 },
      producedOutput: true,
    });
    const heldWork = await client.reserve(reserveRequest({ ...limits, taskId: 'tsk_dead_run', amountMicroUsd: 40_000 }));
    const heldJudge = await client.reserve(reserveRequest({ ...limits, taskId: 'tsk_dead_run', amountMicroUsd: 30_000 }));
    const otherTask = await client.reserve(reserveRequest({ ...limits, taskId: 'tsk_other', amountMicroUsd: 5_000 }));
    // The dead run's holds block the task's budget: 3,853 spent + 70,000 held + 40,000 > 100,000.
    const blocked = await rejection(client.reserve(reserveRequest({ ...limits, taskId: 'tsk_dead_run', amountMicroUsd: 40_000 })));
    expect(blocked.code).toBe('actor.budget.exceeded');

    const released = await client.releaseTaskReservations({ projectId, taskId: 'tsk_dead_run' });
    expect(new Set(released.reservationIds)).toEqual(new Set([heldWork.reservation!.id, heldJudge.reservation!.id]));
    expect(released.releasedMicroUsd).toBe(70_000);
    expect(await client.releaseTaskReservations({ projectId, taskId: 'tsk_dead_run' })).toEqual({
      reservationIds: [],
      releasedMicroUsd: 0,
    });
    expect(await client.getSpend({ projectId })).toMatchObject({ spentMicroUsd: 3_853, reservedMicroUsd: 5_000 });
    expect((await client.releaseReservation({ reservationId: otherTask.reservation!.id })).released).toBe(true);
    const again = await client.reserve(reserveRequest({ ...limits, taskId: 'tsk_dead_run', amountMicroUsd: 40_000 }));
    expect(again.reservation!.state).toBe(ReservationState.RESERVATION_STATE_HELD);
    const missing = await rejection(client.releaseTaskReservations({ projectId, taskId: '' }));
    expect(missing.status).toBe(Status.INVALID_ARGUMENT);
  });

  it('expires an abandoned reservation and frees its amount without anyone asking', async () => {
    const { reservation } = await client.reserve(
      // Long enough that the two checks below run before it lapses even on a loaded machine.
      reserveRequest({ projectId: 'prj_abandoned', amountMicroUsd: 900_000, perDayLimitMicroUsd: 1_000_000, ttlMs: 3_000 }),
    );
    expect((await client.getSpend({ projectId: 'prj_abandoned' })).reservedMicroUsd).toBe(900_000);
    const blocked = await rejection(client.reserve(reserveRequest({ projectId: 'prj_abandoned', amountMicroUsd: 900_000, perDayLimitMicroUsd: 1_000_000 })));
    expect(blocked.code).toBe('actor.budget.exceeded');
    // The bound is ttl + one sweep interval (100 ms here); allow generous slack for a loaded machine.
    for (let waited = 0; waited < 20_000; waited += 100) {
      if ((await client.getSpend({ projectId: 'prj_abandoned' })).reservedMicroUsd === 0) break;
      await sleep(100);
    }
    expect((await client.getSpend({ projectId: 'prj_abandoned' })).reservedMicroUsd).toBe(0);
    const late = await rejection(
      client.settle({ reservationId: reservation!.id, adapterType: 'demo:billing-mini', usage: { inputTokens: 10 } }),
    );
    expect(late).toMatchObject({ status: Status.FAILED_PRECONDITION, code: 'actor.reservation.not_held' });
    expect(late.message).toContain('expired');
    await client.reserve(reserveRequest({ projectId: 'prj_abandoned', amountMicroUsd: 900_000, perDayLimitMicroUsd: 1_000_000 }));
  });

  it('flags output with zero usage, and a cost above its reservation', async () => {
    const zero = await client.reserve(reserveRequest({ projectId: 'prj_flags', amountMicroUsd: 10_000 }));
    const zeroSettled = await client.settle({
      reservationId: zero.reservation!.id,
      adapterType: 'demo:billing-mini',
      rateCardRevision: 1,
      usage: { inputTokens: 0, outputTokens: 0, durationMs: 0, calls: 1 },
      producedOutput: true,
    });
    expect(zeroSettled.usage!.flags).toEqual(['zero_usage_with_output']);
    const over = await client.reserve(reserveRequest({ projectId: 'prj_flags', amountMicroUsd: 1_000 }));
    const overSettled = await client.settle({
      reservationId: over.reservation!.id,
      adapterType: 'demo:billing-mini',
      rateCardRevision: 1,
      usage: { inputTokens: 1_234, outputTokens: 567 },
      producedOutput: true,
    });
    expect(overSettled.usage).toMatchObject({ costMicroUsd: 3_853, flags: ['over_reservation'] });
    // The whole cost is spent, not just what was reserved.
    expect((await client.getSpend({ projectId: 'prj_flags' })).spentMicroUsd).toBe(100 + 3_853);
  });

  it('reports spend per backend and lists usage oldest first, per project and per task', async () => {
    await putAdapter(registryClient, 'demo:billing-large', {
      inputMicroUsdPerMtok: 3_000_000,
      outputMicroUsdPerMtok: 15_000_000,
      microUsdPerSecond: 0,
      microUsdPerTask: 0,
    });
    const runs = [
      { taskId: 'tsk_one', adapterType: 'demo:billing-mini', inputTokens: 1_234, outputTokens: 567 }, // 3,853
      { taskId: 'tsk_two', adapterType: 'demo:billing-large', inputTokens: 1_000, outputTokens: 1_000 }, // 18,000
      { taskId: 'tsk_one', adapterType: 'demo:billing-large', inputTokens: 1, outputTokens: 1 }, // 18
      { taskId: 'tsk_one', adapterType: 'demo:billing-mini', inputTokens: 1_000_000, outputTokens: 0 }, // 1,100,000
    ];
    const recordIds: string[] = [];
    for (const run of runs) {
      const { reservation } = await client.reserve(reserveRequest({ projectId: 'prj_report', taskId: run.taskId, amountMicroUsd: 2_000_000 }));
      const { usage } = await client.settle({
        reservationId: reservation!.id,
        adapterType: run.adapterType,
        usage: { inputTokens: run.inputTokens, outputTokens: run.outputTokens, calls: 0 },
        producedOutput: true,
      });
      recordIds.push(usage!.id);
    }
    const held = await client.reserve(reserveRequest({ projectId: 'prj_report', taskId: 'tsk_two', amountMicroUsd: 123_456 }));
    const spend = await client.getSpend({ projectId: 'prj_report', day: held.reservation!.day });
    expect(spend).toEqual({
      day: held.reservation!.day,
      spentMicroUsd: 3_853 + 18_000 + 18 + 1_100_000,
      reservedMicroUsd: 123_456,
      byBackend: [
        { backend: 'demo:billing-large', costMicroUsd: 18_018, calls: 2 },
        { backend: 'demo:billing-mini', costMicroUsd: 1_103_853, calls: 2 },
      ],
    });
    expect(await client.getSpend({ projectId: 'prj_report', day: '2000-01-01' })).toEqual({
      day: '2000-01-01',
      spentMicroUsd: 0,
      reservedMicroUsd: 0,
      byBackend: [],
    });
    expect((await rejection(client.getSpend({ projectId: 'prj_report', day: '2025-02-30' }))).status).toBe(Status.INVALID_ARGUMENT);

    const all = await client.listUsage({ projectId: 'prj_report' });
    expect(all.usage.map((record) => record.id)).toEqual(recordIds);
    expect(all.usage[1]).toMatchObject({
      projectId: 'prj_report',
      taskId: 'tsk_two',
      backend: 'demo:billing-large',
      rateCardRevision: 1,
      usage: { inputTokens: 1_000, outputTokens: 1_000, durationMs: 0, calls: 0 },
      costMicroUsd: 18_000,
      day: held.reservation!.day,
      flags: [],
    });
    const taskOne = await client.listUsage({ projectId: 'prj_report', taskId: 'tsk_one' });
    expect(taskOne.usage.map((record) => record.id)).toEqual([recordIds[0], recordIds[2], recordIds[3]]);
    expect((await client.listUsage({ projectId: 'prj_nobody' })).usage).toEqual([]);
  });

  it('never admits more than the per-day limit under concurrent Reserves on one instance', async () => {
    const attempts = Array.from({ length: 40 }, (_, index) =>
      client.reserve(reserveRequest({ projectId: 'prj_burst', taskId: `tsk_${index}`, amountMicroUsd: 100_000, perDayLimitMicroUsd: 1_000_000 })),
    );
    const results = await Promise.allSettled(attempts);
    const admitted = results.filter((result) => result.status === 'fulfilled');
    const refusals = results.flatMap((result) => (result.status === 'rejected' ? [remoteError(result.reason)?.code] : []));
    expect(admitted).toHaveLength(10);
    expect(refusals).toEqual(Array(30).fill('actor.budget.exceeded'));
    expect((await client.getSpend({ projectId: 'prj_burst' })).reservedMicroUsd).toBe(1_000_000);
  });

  it('prices the same usage to the same micro-dollar whichever way the run reported it', async () => {
    // A streamed run sends its summed deltas and often no cost of its own; a non-streamed run sends
    // the response's totals, maybe with a lower backend-reported cost. Billing prices the totals by
    // the rate card either way.
    const usage = { inputTokens: 1_234, outputTokens: 567, durationMs: 2_500, calls: 1 };
    const quoted = await client.quote({ adapterType: 'demo:billing-mini', rateCardRevision: 1, usage });
    const streamed = await client.reserve(reserveRequest({ projectId: 'prj_streaming', taskId: 'tsk_same', attemptId: 'att_streamed', amountMicroUsd: 10_000 }));
    const whole = await client.reserve(reserveRequest({ projectId: 'prj_streaming', taskId: 'tsk_same', attemptId: 'att_whole', amountMicroUsd: 50_000 }));
    const settleAs = (reservationId: string, reportedCostMicroUsd: number) =>
      client.settle({ reservationId, adapterType: 'demo:billing-mini', rateCardRevision: 1, usage, reportedCostMicroUsd, producedOutput: true });
    const streamedCost = (await settleAs(streamed.reservation!.id, 0)).usage!;
    const wholeCost = (await settleAs(whole.reservation!.id, 4_000)).usage!;
    expect(quoted.costMicroUsd).toBe(4_078);
    expect(streamedCost).toMatchObject({ costMicroUsd: 4_078, flags: [] });
    expect(wholeCost).toMatchObject({ costMicroUsd: 4_078, flags: [] });
    expect((await client.getSpend({ projectId: 'prj_streaming' })).spentMicroUsd).toBe(2 * 4_078);
    // A stream that ended without its usage report: output, time measured by the caller, no tokens.
    const unmetered = await client.reserve(reserveRequest({ projectId: 'prj_streaming', taskId: 'tsk_same', attemptId: 'att_unmetered', amountMicroUsd: 10_000 }));
    const flagged = await client.settle({
      reservationId: unmetered.reservation!.id,
      adapterType: 'demo:billing-mini',
      rateCardRevision: 1,
      usage: { inputTokens: 0, outputTokens: 0, durationMs: 2_500, calls: 1 },
      producedOutput: true,
    });
    expect(flagged.usage).toMatchObject({ costMicroUsd: 225, flags: ['zero_usage_with_output'] });
  });

  it('compares budgets in exact micro-dollars, never in rounded cents', async () => {
    const project = { projectId: 'prj_exact_limit', perDayLimitMicroUsd: 5_000_000 };
    await client.reserve(reserveRequest({ ...project, taskId: 'tsk_a', amountMicroUsd: 4_990_000 }));
    // $4.99 + $0.010001 is $5.00 in cents, but one micro-dollar over the limit.
    const over = await rejection(client.reserve(reserveRequest({ ...project, taskId: 'tsk_b', amountMicroUsd: 10_001 })));
    expect(over.code).toBe('actor.budget.exceeded');
    // Exactly the limit fits.
    await client.reserve(reserveRequest({ ...project, taskId: 'tsk_b', amountMicroUsd: 10_000 }));
    const full = await rejection(client.reserve(reserveRequest({ ...project, taskId: 'tsk_c', amountMicroUsd: 1 })));
    expect(full.code).toBe('actor.budget.exceeded');
    expect((await client.getSpend({ projectId: 'prj_exact_limit' })).reservedMicroUsd).toBe(5_000_000);
  });

  it('keeps spend exact; dollars are rounded half-up to the cent once, on the total', async () => {
    // 33.34 s x 50 micro-USD/s = 1,667 micro-USD a sample: $0.001667, which shows as $0.00 alone.
    const usage = { inputTokens: 0, outputTokens: 0, durationMs: 33_340, calls: 0 };
    const costs: number[] = [];
    for (let sample = 0; sample < 3; sample += 1) {
      const { reservation } = await client.reserve(reserveRequest({ projectId: 'prj_cents', amountMicroUsd: 2_000 }));
      const settled = await client.settle({ reservationId: reservation!.id, adapterType: 'demo:billing-mini', rateCardRevision: 1, usage, producedOutput: true });
      costs.push(settled.usage!.costMicroUsd);
    }
    expect(costs).toEqual([1_667, 1_667, 1_667]);
    const spend = await client.getSpend({ projectId: 'prj_cents' });
    expect(spend.spentMicroUsd).toBe(5_001);
    expect(spend.byBackend).toEqual([{ backend: 'demo:billing-mini', costMicroUsd: 5_001, calls: 3 }]);
    // What the gateway shows: the exact total rounded once ($0.005001 -> $0.01), not a sum of
    // rounded samples (3 x $0.00).
    expect(costJson(costs[0]!)).toEqual({ usd: 0, micro_usd: 1_667 });
    expect(costJson(spend.spentMicroUsd)).toEqual({ usd: 0.01, micro_usd: 5_001 });
  });

  // Last: it stops the registry.
  it('keeps pricing revisions it has read while the registry is down', async () => {
    await client.quote({ adapterType: 'demo:billing-mini', rateCardRevision: 1 });
    await registry!.stop();
    registry = undefined;
    const cached = await client.quote({ adapterType: 'demo:billing-mini', rateCardRevision: 1, usage: { inputTokens: 1_234, outputTokens: 567 } });
    expect(cached.costMicroUsd).toBe(3_853);
    // No retries from the test client: the answer billing gives after its own retries is the point.
    const current = await rejection(
      client.quote({ adapterType: 'demo:billing-mini', usage: { inputTokens: 1 } }, { retryMaxAttempts: 0 }),
    );
    expect(current.status).toBe(Status.UNAVAILABLE);
  });
});

describe.runIf(process.env.DATABASE_URL)('Billing replicas sharing one Postgres', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let registry: Awaited<ReturnType<typeof startRegistry>>;
  let replicas: Billing[] = [];
  let clients: BillingClient[] = [];

  beforeAll(async () => {
    database = await testDatabase();
    registry = await startRegistry({
      config: loadRegistryConfig({ REGISTRY_ADDR: '127.0.0.1:0', DATABASE_URL: database.databaseUrl, ACTOR_DATA_DIR: database.dataDir }),
      secretKey: 'test-key',
      logger,
    });
    // Sweepers are triggered by hand here, so that the test decides when they race. (Budgets under
    // 1,000 concurrent Reserves from three billing OS processes are main.test.ts's.)
    replicas = await Promise.all([0, 1, 2].map(() => startBillingOn(registry.address, database, 3_600_000)));
    clients = replicas.map((replica) => createClient(BillingServiceDefinition, replica.address, { deadlineMs: 60_000 }));
  });
  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.stop()));
    await registry?.stop();
    await database?.drop();
  });

  it('frees each expired reservation exactly once when every replica sweeps at the same time', async () => {
    const count = 300;
    await Promise.all(
      Array.from({ length: count }, (_, index) =>
        clients[index % clients.length]!.reserve(
          reserveRequest({ projectId: 'prj_race_sweep', taskId: `tsk_${index % 7}`, amountMicroUsd: 1_000, ttlMs: 1 }),
        ),
      ),
    );
    expect((await clients[0]!.getSpend({ projectId: 'prj_race_sweep' })).reservedMicroUsd).toBe(count * 1_000);
    await sleep(20);
    const expired = await Promise.all(replicas.flatMap((replica) => [replica.sweeper.sweepOnce(), replica.sweeper.sweepOnce()]));
    expect(expired.reduce((sum, value) => sum + value, 0)).toBe(count);
    expect((await clients[0]!.getSpend({ projectId: 'prj_race_sweep' })).reservedMicroUsd).toBe(0);
    // The per-task holds were freed too: a full-limit reservation fits each task again.
    await clients[1]!.reserve(
      reserveRequest({ projectId: 'prj_race_sweep', taskId: 'tsk_0', amountMicroUsd: 1_000_000, perTaskLimitMicroUsd: 1_000_000 }),
    );
  });
});

// The billing day is the UTC day of the database clock. The clock is the only thing replaced here,
// so that the test can stand on either side of midnight; everything else is the real service.
class ClockedBillingRepository extends BillingRepository {
  now = new Date(0);

  override async databaseNow(): Promise<Date> {
    return this.now;
  }
}

describe('BillingService across a UTC midnight', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let opened: Awaited<ReturnType<typeof openDatabase<typeof schema>>>;
  let registry: Awaited<ReturnType<typeof startRegistry>>;
  let server: Awaited<ReturnType<typeof startGrpcServer>>;
  let repository: ClockedBillingRepository;
  let client: BillingClient;

  beforeAll(async () => {
    database = await testDatabase();
    registry = await startRegistry({
      config: loadRegistryConfig({ REGISTRY_ADDR: '127.0.0.1:0', DATABASE_URL: database.databaseUrl, ACTOR_DATA_DIR: database.dataDir }),
      secretKey: 'test-key',
      logger,
    });
    await putAdapter(createClient(RegistryServiceDefinition, registry.address), 'demo:billing-mini', revisionOne);
    opened = await openDatabase({
      service: 'billing',
      databaseUrl: database.databaseUrl,
      dataDir: database.dataDir,
      migrationsFolder: fileURLToPath(new URL('../migrations', import.meta.url)),
      schema,
    });
    repository = new ClockedBillingRepository(opened.db);
    const rateCards = new RateCardSource(createClient(RegistryServiceDefinition, registry.address));
    server = await startGrpcServer({
      name: 'billing',
      address: '127.0.0.1:0',
      logger,
      serviceNames: [BillingServiceDefinition.fullName],
      register: (grpcServer) => grpcServer.add(BillingServiceDefinition, createBillingService({ repository, rateCards, logger })),
    });
    client = createClient(BillingServiceDefinition, server.address);
  });
  afterAll(async () => {
    await server?.shutdown();
    await opened?.close();
    await registry?.stop();
    await database?.drop();
  });

  it('gives each UTC day its own per-day budget; a task budget spans midnight; a cost stays on the day it was reserved', async () => {
    const limits = { projectId: 'prj_midnight', perDayLimitMicroUsd: 5_000_000, perTaskLimitMicroUsd: 4_500_000 };
    // 01:59:59.999 in Paris on 2 March is still 1 March in UTC.
    repository.now = new Date('2025-03-02T01:59:59.999+02:00');
    const lateFirst = await client.reserve(reserveRequest({ ...limits, taskId: 'tsk_first', amountMicroUsd: 4_000_000 }));
    expect(lateFirst.reservation!.day).toBe('2025-03-01');
    const sameDay = await rejection(client.reserve(reserveRequest({ ...limits, taskId: 'tsk_second', amountMicroUsd: 2_000_000 })));
    expect(sameDay.message).toContain('per-day budget of $5.00 for project prj_midnight on 2025-03-01');

    // UTC midnight: a fresh per-day budget.
    repository.now = new Date('2025-03-02T00:00:00.000Z');
    const earlySecond = await client.reserve(reserveRequest({ ...limits, taskId: 'tsk_second', amountMicroUsd: 2_000_000 }));
    expect(earlySecond.reservation!.day).toBe('2025-03-02');
    // The per-task budget is not per day: tsk_first's hold from yesterday still counts.
    const taskOver = await rejection(client.reserve(reserveRequest({ ...limits, taskId: 'tsk_first', amountMicroUsd: 600_000 })));
    expect(taskOver.message).toContain('per-task budget of $4.50 for task tsk_first');

    // Settled after midnight, yesterday's reservation is yesterday's spend.
    const settled = await client.settle({
      reservationId: lateFirst.reservation!.id,
      adapterType: 'demo:billing-mini',
      rateCardRevision: 1,
      usage: { inputTokens: 1_234, outputTokens: 567 },
      producedOutput: true,
    });
    expect(settled.usage).toMatchObject({ day: '2025-03-01', costMicroUsd: 3_853 });
    expect(await client.getSpend({ projectId: 'prj_midnight', day: '2025-03-01' })).toMatchObject({ spentMicroUsd: 3_853, reservedMicroUsd: 0 });
    // No day asked for: today on the database clock.
    expect(await client.getSpend({ projectId: 'prj_midnight' })).toMatchObject({ day: '2025-03-02', spentMicroUsd: 0, reservedMicroUsd: 2_000_000 });
  });
});
