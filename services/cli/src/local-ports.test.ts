import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PortRefusal, type PlaceRequest } from '@actor/engine';
import { demoAdapterDefinitions } from '@actor/execution/src/agents/demo/demo-catalog.js';
import { LocalBillingPort } from './local-billing-port.js';
import { LocalPlacementPort } from './local-placement-port.js';
import { LocalPoolPort } from './local-pool-port.js';

const definitions = demoAdapterDefinitions();
const slotTypes = definitions.map((definition) => definition.declaration.type);
const never = new AbortController().signal;

function placeRequest(overrides: Partial<PlaceRequest> = {}): PlaceRequest {
  return {
    taskId: 'tsk_1',
    projectId: 'local',
    requestId: `tsk_1:${Math.random()}`,
    taskClass: 'general',
    requiredCapabilities: [],
    estimatedInputTokens: 100,
    mode: 'balanced',
    taskBudgetLeftMicroUsd: 500_000,
    dayBudgetLeftMicroUsd: 10_000_000,
    allowedBackends: [],
    excludeBackends: [],
    purpose: 'work',
    ...overrides,
  };
}

async function refusal(promise: Promise<unknown>): Promise<PortRefusal> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(PortRefusal);
  return error as PortRefusal;
}

describe('LocalPlacementPort (the placement service rules over the discovered adapters)', () => {
  it('ranks by the mode and keeps the whole decision', async () => {
    const placement = new LocalPlacementPort({ definitions, slotTypes });
    const best = await placement.place(placeRequest({ mode: 'best' }), never);
    expect(best).toMatchObject({ backend: 'demo:beta-large', qualityTier: 4, demo: true });
    expect((best.detail as { candidates: unknown[] }).candidates).toHaveLength(4);
    const cheapest = await placement.place(placeRequest({ mode: 'cheapest' }), never);
    expect(cheapest.backend).toBe('demo:alpha-mini');
    expect(cheapest.worstCaseCostMicroUsd).toBeLessThan(best.worstCaseCostMicroUsd);
  });

  it('escalates above a rejected backend and judges with another family', async () => {
    const placement = new LocalPlacementPort({ definitions, slotTypes });
    const stronger = await placement.place(
      placeRequest({ escalateFromBackend: 'demo:beta-small', excludeBackends: ['demo:beta-small'] }),
      never,
    );
    expect(stronger.qualityTier).toBeGreaterThan(2);
    const judge = await placement.place(placeRequest({ purpose: 'judge', avoidModelFamily: 'demo-beta', excludeBackends: ['demo:beta-small'] }), never);
    expect(judge.modelFamily).toBe('demo-alpha');
  });

  it('refuses with actor.budget.exceeded when only the budget stands in the way, else actor.no_capable_backend', async () => {
    const placement = new LocalPlacementPort({ definitions, slotTypes });
    expect((await refusal(placement.place(placeRequest({ taskBudgetLeftMicroUsd: 10 }), never))).code).toBe('actor.budget.exceeded');
    expect((await refusal(placement.place(placeRequest({ requiredCapabilities: ['vision'] }), never))).code).toBe('actor.no_capable_backend');
  });

  it('learns from outcomes: a backend that keeps failing is left out (circuit open)', async () => {
    const placement = new LocalPlacementPort({ definitions, slotTypes });
    const first = await placement.place(placeRequest({ mode: 'cheapest' }), never);
    for (let index = 0; index < 3; index++) {
      await placement.reportOutcome({
        requestId: `r${index}`,
        backend: first.backend,
        taskClass: 'general',
        success: false,
        verified: false,
        latencyMs: 100,
        costMicroUsd: 0,
        errorKind: 'backend',
        decisionId: first.decisionId,
        judge: false,
      });
    }
    expect(placement.learned()).toEqual([expect.objectContaining({ backend: first.backend, consecutiveFailures: 3 })]);
    const next = await placement.place(placeRequest({ mode: 'cheapest' }), never);
    expect(next.backend).not.toBe(first.backend);
  });
});

describe('LocalBillingPort', () => {
  let directory: string;
  const rates = new Map(definitions.map((definition) => [definition.declaration.type, definition.rateCard]));

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'actor-cli-billing-'));
  });
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  const reserve = (billing: LocalBillingPort, taskId: string, amountMicroUsd: number, perTask = 1_000, perDay = 10_000) =>
    billing.reserve({
      requestId: `${taskId}:${Math.random()}`,
      projectId: 'local',
      taskId,
      attemptId: 'att_1',
      amountMicroUsd,
      perTaskLimitMicroUsd: perTask,
      perDayLimitMicroUsd: perDay,
    });

  it('holds reservations against the task limit and bills at most what was reserved', async () => {
    const billing = new LocalBillingPort({ directory, rates });
    const held = await reserve(billing, 'tsk_a', 600);
    expect((await refusal(reserve(billing, 'tsk_a', 600))).code).toBe('actor.budget.exceeded');
    const { costMicroUsd } = await billing.settle({
      reservationId: held.reservationId,
      backend: 'demo:alpha-pro',
      rateCardRevision: 1,
      usage: { inputTokens: 1_000_000, outputTokens: 0, durationMs: 10, calls: 1 },
      producedOutput: true,
    });
    expect(costMicroUsd).toBe(600);
    expect(billing.held()).toBe(0);
    expect(await billing.spend('local', 'tsk_a')).toEqual({ taskMicroUsd: 600, dayMicroUsd: 600 });
  });

  it("keeps the day's spend in a file that a later process counts", async () => {
    const later = new LocalBillingPort({ directory, rates });
    expect(await later.settledToday()).toBe(600);
    const day = (await readFile(join(directory, `${new Date().toISOString().slice(0, 10)}.jsonl`), 'utf8')).trim().split('\n');
    expect(day.map((line) => JSON.parse(line) as { micro_usd: number; task_id: string })).toEqual([
      expect.objectContaining({ task_id: 'tsk_a', micro_usd: 600, backend: 'demo:alpha-pro' }),
    ]);
    // 600 already spent today: 500 more would pass the task limit but not a 1 000 day limit.
    const error = await refusal(reserve(later, 'tsk_b', 500, 1_000, 1_000));
    expect(error.message).toContain("today's budget");
    const released = await reserve(later, 'tsk_b', 400, 1_000, 1_000);
    await later.release(released.reservationId);
    expect(await later.spend('local', 'tsk_b')).toEqual({ taskMicroUsd: 0, dayMicroUsd: 600 });
  });
});

describe('LocalPoolPort', () => {
  const acquire = (pool: LocalPoolPort, agentType: string, signal = never) =>
    pool.acquire({ requestId: Math.random().toString(), workType: 'task', workId: 'tsk_1', projectId: 'local', agentType }, signal);

  it('lets `concurrency` calls run at once and hands a freed slot to the oldest waiter', async () => {
    const pool = new LocalPoolPort({ agentTypes: slotTypes, concurrency: 1, configuration: { quality: 1 } });
    const first = await acquire(pool, 'demo:alpha-mini');
    expect(first).toMatchObject({ agentId: 'local:demo:alpha-mini', configuration: { quality: 1 } });
    const order: string[] = [];
    const second = acquire(pool, 'demo:beta-small').then((lease) => (order.push('second'), lease));
    const third = acquire(pool, 'demo:alpha-pro').then((lease) => (order.push('third'), lease));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(order).toEqual([]);
    await pool.release(first);
    await pool.release(await second);
    await pool.release(await third);
    expect(order).toEqual(['second', 'third']);
    expect(pool.busy()).toBe(0);
  });

  it('stops waiting when the run is cancelled, and refuses types it has no slot for', async () => {
    const pool = new LocalPoolPort({ agentTypes: slotTypes, concurrency: 1 });
    const held = await acquire(pool, 'demo:alpha-mini');
    const controller = new AbortController();
    const waiting = acquire(pool, 'demo:alpha-mini', controller.signal);
    controller.abort(new Error('cancelled'));
    await expect(waiting).rejects.toThrow('cancelled');
    await pool.release(held);
    expect(pool.busy()).toBe(0);
    expect((await refusal(acquire(pool, 'script'))).code).toBe('actor.pool.no_matching_agent');
  });
});
