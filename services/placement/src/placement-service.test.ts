import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Status } from 'nice-grpc';
import { createClient, createLogger, sleep } from '@actor/kit';
import { rejection, testDatabase } from '@actor/kit/testing';
import { Mode, PlacementServiceDefinition, Purpose, type PlaceRequest } from '@actor/proto/placement';
import { COST_WINDOW } from './domain/signal-update.js';
import { RegistryServiceDefinition, TrustClass, type Adapter } from '@actor/proto/registry';
import { loadRegistryConfig } from '../../registry/src/config.js';
import { startRegistry } from '../../registry/src/registry-server.js';
import { loadPlacementConfig } from './config.js';
import { startPlacement } from './placement-server.js';

const COOLDOWN_MS = 2_500;
const logger = createLogger('placement-test', 'silent');

type TestDatabase = Awaited<ReturnType<typeof testDatabase>>;

function adapter(type: string, overrides: Partial<Adapter>): Partial<Adapter> {
  return {
    type,
    displayName: type,
    capabilities: ['general', 'code', 'research', 'action'],
    limits: { contextTokens: 32_000, maxOutputTokens: 1_000, concurrency: 4, timeoutMs: 10_000, egress: false },
    trustClass: TrustClass.TRUST_CLASS_FIRST_PARTY,
    demo: true,
    ready: true,
    ...overrides,
  };
}

// Worst cases at 1000 input tokens (prompt + 1000 output tokens): alpha-mini $0.0005, beta-fast
// $0.0015, alpha-pro $0.005, beta-large $0.025.
const adapters: Array<{ adapter: Partial<Adapter>; prices?: [number, number] }> = [
  { adapter: adapter('demo:alpha-mini', { modelFamily: 'demo-alpha', qualityTier: 1, limits: { contextTokens: 4_000, maxOutputTokens: 1_000, concurrency: 4, timeoutMs: 10_000, egress: false } }), prices: [100_000, 400_000] },
  { adapter: adapter('demo:alpha-pro', { modelFamily: 'demo-alpha', qualityTier: 3, capabilities: ['general', 'code', 'research', 'action', 'vision'] }), prices: [1_000_000, 4_000_000] },
  { adapter: adapter('demo:beta-fast', { modelFamily: 'demo-beta', qualityTier: 2, trustClass: TrustClass.TRUST_CLASS_EXTERNAL }), prices: [300_000, 1_200_000] },
  { adapter: adapter('demo:beta-large', { modelFamily: 'demo-beta', qualityTier: 4, trustClass: TrustClass.TRUST_CLASS_PARTNER }), prices: [5_000_000, 20_000_000] },
  // Strongest of all, but never priced: it must never be placed.
  { adapter: adapter('demo:gamma-unpriced', { modelFamily: 'demo-gamma', qualityTier: 5, trustClass: TrustClass.TRUST_CLASS_USER_OWNED }) },
];

describe('PlacementService over gRPC, with a real registry', () => {
  let registryDatabase: TestDatabase;
  let placementDatabase: TestDatabase;
  let registry: Awaited<ReturnType<typeof startRegistry>>;
  let placement: Awaited<ReturnType<typeof startPlacement>>;
  let registryClient: ReturnType<typeof createClient<typeof RegistryServiceDefinition>>;
  let client: ReturnType<typeof createClient<typeof PlacementServiceDefinition>>;
  let projectCounter = 0;

  beforeAll(async () => {
    [registryDatabase, placementDatabase] = await Promise.all([testDatabase(), testDatabase()]);
    registry = await startRegistry({
      config: loadRegistryConfig({
        REGISTRY_ADDR: '127.0.0.1:0',
        DATABASE_URL: registryDatabase.databaseUrl,
        ACTOR_DATA_DIR: registryDatabase.dataDir,
      }),
      secretKey: 'test-key',
      logger,
    });
    registryClient = createClient(RegistryServiceDefinition, registry.address);
    for (const { adapter: declaration, prices } of adapters) {
      await registryClient.putAdapter({ adapter: declaration });
      if (prices) {
        await registryClient.putRateCard({
          rateCard: { adapterType: declaration.type, inputMicroUsdPerMtok: prices[0], outputMicroUsdPerMtok: prices[1], source: 'demo: fictional prices', reviewer: 'test' },
          reviewerKind: 'operator',
        });
      }
    }
    placement = await startPlacement({
      config: loadPlacementConfig({
        PLACEMENT_ADDR: '127.0.0.1:0',
        REGISTRY_ADDR: registry.address,
        DATABASE_URL: placementDatabase.databaseUrl,
        ACTOR_DATA_DIR: placementDatabase.dataDir,
        PLACEMENT_CIRCUIT_COOLDOWN_MS: String(COOLDOWN_MS),
        // Long enough that only WatchRegistry can explain seeing a registry change quickly.
        PLACEMENT_ADAPTER_CACHE_MS: '600000',
      }),
      logger,
    });
    client = createClient(PlacementServiceDefinition, placement.address);
  });

  afterAll(async () => {
    await placement?.stop();
    await registry?.stop();
    await Promise.all([registryDatabase?.drop(), placementDatabase?.drop()]);
  });

  /** A Place request in a project of its own, so incumbents never leak between tests. */
  function request(overrides: Partial<PlaceRequest> = {}): Partial<PlaceRequest> {
    projectCounter += 1;
    return {
      projectId: `prj_test_${projectCounter}`,
      taskId: `tsk_test_${projectCounter}`,
      taskClass: 'code',
      estimatedInputTokens: 1_000,
      mode: Mode.MODE_BALANCED,
      taskBudgetLeftMicroUsd: 1_000_000,
      dayBudgetLeftMicroUsd: 10_000_000,
      ...overrides,
    };
  }

  async function winner(overrides: Partial<PlaceRequest>) {
    const { decision } = await client.place(request(overrides));
    return decision!;
  }

  let outcomeCounter = 0;
  async function report(backend: string, taskClass: string, outcome: { success: boolean; verified?: boolean; latencyMs?: number; costMicroUsd?: number; judge?: boolean }) {
    outcomeCounter += 1;
    return client.reportOutcome({
      requestId: `out_${outcomeCounter}`,
      backend,
      taskClass,
      success: outcome.success,
      verified: outcome.verified ?? outcome.success,
      latencyMs: outcome.latencyMs ?? 500,
      costMicroUsd: outcome.costMicroUsd ?? 0,
      errorKind: outcome.success ? '' : 'backend',
      judge: outcome.judge ?? false,
    });
  }

  it('cheapest picks the cheap backend and explains why, naming demo backends and exclusions', async () => {
    const decision = await winner({ mode: Mode.MODE_CHEAPEST, allowedBackends: adapters.map((item) => item.adapter.type!) });
    expect(decision.winner?.backend).toBe('demo:alpha-mini');
    expect(decision.id).toMatch(/^dec_/);
    expect(decision.mode).toBe(Mode.MODE_CHEAPEST);
    expect(decision.winner).toMatchObject({ demo: true, rateCardRevision: 1, worstCaseCostMicroUsd: 500, circuitState: 'closed' });
    expect(decision.winner?.signals.map((signal) => signal.name)).toContain('cost_per_verified_success_micro_usd');
    expect(decision.candidates.map((candidate) => candidate.backend)).toEqual([
      'demo:alpha-mini',
      'demo:beta-fast',
      'demo:alpha-pro',
      'demo:beta-large',
    ]);
    expect(decision.exclusions).toEqual([
      { backend: 'demo:gamma-unpriced', reasonCode: 'not_ready', reason: 'no rate card: it cannot be priced' },
    ]);
    expect(decision.explanation).toMatch(
      /^demo:alpha-mini \(demo backend\) won under cheapest: lowest expected cost per verified success counting escalations, \$[\d.]+ \(\$[\d.]+ a call at 55% estimated success\); 1 backend excluded \(demo:gamma-unpriced: not_ready\)\.$/,
    );
    expect(decision.hysteresis).toBe('no incumbent yet: demo:alpha-mini becomes the incumbent');
    expect(decision.createTime).toBeInstanceOf(Date);
  });

  it('best picks the highest tier; an unspecified mode is balanced', async () => {
    expect((await winner({ mode: Mode.MODE_BEST })).winner?.backend).toBe('demo:beta-large');
    const balanced = await winner({ mode: Mode.MODE_UNSPECIFIED });
    expect(balanced.mode).toBe(Mode.MODE_BALANCED);
    expect(balanced.objective).toContain('balanced blend');
  });

  it('fastest follows the latencies reported, not the declared tiers', async () => {
    expect((await winner({ mode: Mode.MODE_FASTEST, taskClass: 'research' })).winner?.backend).toBe('demo:alpha-mini');
    for (let index = 0; index < 3; index += 1) {
      await report('demo:alpha-mini', 'research', { success: true, latencyMs: 5_000 });
      await report('demo:beta-large', 'research', { success: true, latencyMs: 150 });
    }
    const decision = await winner({ mode: Mode.MODE_FASTEST, taskClass: 'research' });
    expect(decision.winner).toMatchObject({ backend: 'demo:beta-large', expectedLatencyMs: 150 });
    expect(decision.explanation).toContain('lowest expected latency (150 ms)');
    expect(decision.signalsTime).toBeInstanceOf(Date);
  });

  it('records every exclusion with its reason', async () => {
    const decision = await winner({
      allowedBackends: ['demo:alpha-mini', 'demo:alpha-pro', 'demo:beta-large'],
      excludeBackends: ['demo:alpha-mini'],
      requiredCapabilities: ['vision'],
    });
    expect(decision.winner?.backend).toBe('demo:alpha-pro');
    expect(Object.fromEntries(decision.exclusions.map((item) => [item.backend, item.reasonCode]))).toEqual({
      'demo:alpha-mini': 'excluded',
      'demo:beta-fast': 'not_allowed',
      'demo:beta-large': 'capability',
      'demo:gamma-unpriced': 'not_allowed',
    });
    const tooLong = await winner({ estimatedInputTokens: 6_000, availableBackends: ['demo:alpha-mini', 'demo:alpha-pro'] });
    expect(tooLong.exclusions.find((item) => item.backend === 'demo:alpha-mini')).toMatchObject({ reasonCode: 'limits' });
    expect(tooLong.exclusions.find((item) => item.backend === 'demo:beta-fast')).toMatchObject({ reasonCode: 'no_slot' });
    expect(tooLong.exclusions.find((item) => item.backend === 'demo:gamma-unpriced')).toMatchObject({ reasonCode: 'trust' });
  });

  it('excludes backends whose worst case exceeds the task or the day budget', async () => {
    const task = await winner({ mode: Mode.MODE_BEST, taskBudgetLeftMicroUsd: 2_000 });
    expect(task.winner?.backend).toBe('demo:beta-fast');
    expect(task.exclusions.filter((item) => item.reasonCode === 'budget').map((item) => item.backend).sort()).toEqual([
      'demo:alpha-pro',
      'demo:beta-large',
    ]);
    expect(task.exclusions.find((item) => item.backend === 'demo:beta-large')?.reason).toBe(
      'worst case $0.03 (25000 micro-USD) exceeds the $0.002 (2000 micro-USD) left for the task',
    );
    const day = await winner({ mode: Mode.MODE_BEST, dayBudgetLeftMicroUsd: 1_000 });
    expect(day.winner?.backend).toBe('demo:alpha-mini');
    expect(day.exclusions.find((item) => item.backend === 'demo:beta-fast')?.reason).toContain('left today');
  });

  it('refuses with actor.budget.exceeded when capable backends exist but none fits the budget', async () => {
    const refused = await rejection(
      client.place(request({ requestId: 'budget-refusal', mode: Mode.MODE_CHEAPEST, taskBudgetLeftMicroUsd: 1 })),
    );
    expect(refused.status).toBe(Status.RESOURCE_EXHAUSTED);
    expect(refused.code).toBe('actor.budget.exceeded');
    expect(refused.message).toMatch(/decision dec_/);
  });

  it('private mode places only first-party backends and fails closed, storing the refused decision', async () => {
    const placed = await winner({ mode: Mode.MODE_PRIVATE });
    expect(['demo:alpha-mini', 'demo:alpha-pro']).toContain(placed.winner?.backend);
    expect(placed.exclusions.filter((item) => item.reasonCode === 'trust').map((item) => item.backend).sort()).toEqual([
      'demo:beta-fast',
      'demo:beta-large',
      'demo:gamma-unpriced',
    ]);
    const refused = await rejection(
      client.place(request({ mode: Mode.MODE_PRIVATE, allowedBackends: ['demo:beta-large', 'demo:beta-fast'] })),
    );
    expect(refused).toMatchObject({ status: Status.FAILED_PRECONDITION, code: 'actor.no_capable_backend' });
    expect(refused.message).toContain('demo:beta-large: trust');
    const decisionId = /decision (dec_\w+)/.exec(refused.message)?.[1];
    expect(decisionId).toBeDefined();
    const { decision } = await client.getDecision({ id: decisionId! });
    expect(decision?.winner).toBeUndefined();
    expect(decision?.exclusions).toHaveLength(5);
    expect(decision?.explanation).toContain('private mode fails closed');
  });

  it('an escalation places a strictly stronger backend and leaves the incumbent alone', async () => {
    const base = request({ mode: Mode.MODE_CHEAPEST });
    const first = (await client.place({ ...base, requestId: 'first' })).decision!;
    expect(first.winner?.backend).toBe('demo:alpha-mini');
    const escalated = (
      await client.place({ ...base, requestId: 'escalation', escalateFromBackend: 'demo:alpha-pro', excludeBackends: ['demo:alpha-pro'] })
    ).decision!;
    expect(escalated.winner).toMatchObject({ backend: 'demo:beta-large', qualityTier: 4 });
    expect(escalated.exclusions.filter((item) => item.reasonCode === 'not_stronger').map((item) => item.backend).sort()).toEqual([
      'demo:alpha-mini',
      'demo:beta-fast',
    ]);
    expect(escalated.hysteresis).toBe('not applied: an escalation does not move the incumbent');
    expect(escalated.explanation).toContain('Escalated from demo:alpha-pro');
    const again = (await client.place({ ...base, requestId: 'again' })).decision!;
    expect(again.hysteresis).toBe('incumbent demo:alpha-mini kept: it ranks first');
  });

  it('a judge avoids the worker family', async () => {
    const judge = await winner({ purpose: Purpose.PURPOSE_JUDGE, avoidModelFamily: 'demo-alpha', mode: Mode.MODE_BEST });
    expect(judge.purpose).toBe(Purpose.PURPOSE_JUDGE);
    expect(judge.winner?.modelFamily).toBe('demo-beta');
    expect(judge.exclusions.filter((item) => item.reasonCode === 'same_family').map((item) => item.backend).sort()).toEqual([
      'demo:alpha-mini',
      'demo:alpha-pro',
    ]);
    const shared = await winner({
      purpose: Purpose.PURPOSE_JUDGE,
      avoidModelFamily: 'demo-alpha',
      allowedBackends: ['demo:alpha-mini', 'demo:alpha-pro'],
    });
    expect(shared.winner?.modelFamily).toBe('demo-alpha');
    expect(shared.explanation).toContain("shares the worker's family (demo-alpha)");
  });

  it('opens the circuit after three failures, probes once when half-open, and closes on a success', async () => {
    const base = request({ mode: Mode.MODE_CHEAPEST, taskClass: 'action' });
    let sequence = 0;
    const place = async () => (await client.place({ ...base, requestId: `circuit-${(sequence += 1)}` })).decision!;
    expect((await place()).winner?.backend).toBe('demo:alpha-mini');
    for (let index = 0; index < 3; index += 1) await report('demo:alpha-mini', 'action', { success: false });
    const { signals } = await client.getSignals({ backend: 'demo:alpha-mini', taskClass: 'action' });
    expect(signals).toHaveLength(1);
    expect(signals[0]).toMatchObject({ circuitState: 'open', consecutiveFailures: 3, samples: 3, successes: 0 });

    const whileOpen = await place();
    expect(whileOpen.winner?.backend).not.toBe('demo:alpha-mini');
    expect(whileOpen.exclusions.find((item) => item.backend === 'demo:alpha-mini')).toMatchObject({ reasonCode: 'health' });
    expect(whileOpen.hysteresis).toMatch(/^failover: incumbent demo:alpha-mini is unfit \(health/);

    await sleep(COOLDOWN_MS + 200);
    const probe = await place();
    expect(probe.winner).toMatchObject({ backend: 'demo:alpha-mini', circuitState: 'half-open' });
    expect(probe.explanation).toContain('this call is the probe');
    const duringProbe = await place();
    expect(duringProbe.exclusions.find((item) => item.backend === 'demo:alpha-mini')?.reason).toContain('probe call is already in flight');

    const closed = await report('demo:alpha-mini', 'action', { success: true });
    expect(closed.signal).toMatchObject({ circuitState: 'closed', consecutiveFailures: 0 });
    expect((await place()).winner).toMatchObject({ backend: 'demo:alpha-mini', circuitState: 'closed' });
  });

  it('one error of the incumbent sends the next task to a stand-in, and the incumbent stays incumbent', async () => {
    const base = request({ mode: Mode.MODE_CHEAPEST, taskClass: 'research' });
    let sequence = 0;
    const place = async (extra: Partial<PlaceRequest> = {}) =>
      (await client.place({ ...base, ...extra, requestId: `stand-in-${(sequence += 1)}` })).decision!;
    expect((await place()).hysteresis).toBe('no incumbent yet: demo:alpha-mini becomes the incumbent');
    await report('demo:alpha-mini', 'research', { success: false });
    // The task that met the error fails over at once, without moving the incumbent.
    const retry = await place({ excludeBackends: ['demo:alpha-mini'] });
    expect(retry.winner?.backend).not.toBe('demo:alpha-mini');
    expect(retry.hysteresis).toMatch(/^failover: incumbent demo:alpha-mini was already tried by this task; .+ stands in, incumbent unchanged$/);
    // So does the next task, while the error is less than a cooldown old.
    const next = await place();
    expect(next.winner?.backend).toBe(retry.winner?.backend);
    expect(next.hysteresis).toMatch(/^failover: incumbent demo:alpha-mini failed \d+ s ago and is inside its failure backoff; .+ stands in, incumbent unchanged$/);
    // After the cooldown, the incumbent (never replaced) takes its tasks again.
    await sleep(COOLDOWN_MS + 200);
    const back = await place();
    expect(back.winner?.backend).toBe('demo:alpha-mini');
    expect(back.hysteresis).toBe('incumbent demo:alpha-mini kept: it ranks first');
  });

  it('returns the stored decision for a retried request id and from GetDecision', async () => {
    const placeRequest = request({ requestId: 'retry-me', mode: Mode.MODE_BEST });
    const first = (await client.place(placeRequest)).decision!;
    const retried = (await client.place(placeRequest)).decision!;
    expect(retried).toEqual(first);
    const { decision } = await client.getDecision({ id: first.id });
    expect(decision).toEqual(first);
    const missing = await rejection(client.getDecision({ id: 'dec_missing' }));
    expect(missing).toMatchObject({ status: Status.NOT_FOUND, code: 'actor.decision.not_found' });
  });

  it('counts a retried outcome once, keeps judge verdicts out of verified successes, and loses no concurrent report', async () => {
    const outcome = { requestId: 'dup-1', backend: 'demo:beta-fast', taskClass: 'general', success: true, verified: true, latencyMs: 400, costMicroUsd: 900 };
    await client.reportOutcome(outcome);
    const retried = await client.reportOutcome(outcome);
    expect(retried.signal).toMatchObject({ samples: 1, verifiedSuccesses: 1, meanCostMicroUsd: 900, latencyP50Ms: 400 });
    await report('demo:beta-fast', 'general', { success: true, verified: false, judge: true, costMicroUsd: 100 });
    await Promise.all(
      Array.from({ length: 10 }, () => report('demo:beta-fast', 'general', { success: true, verified: true, latencyMs: 100 })),
    );
    const { signals } = await client.getSignals({ backend: 'demo:beta-fast', taskClass: 'general' });
    // Two work outcomes of 11 verified out of 11, on a tier-2 prior (0.65 x 4). Two costs (900, then
    // 100), the older weighed by 1 - 1/COST_WINDOW.
    const decay = 1 - 1 / COST_WINDOW;
    expect(signals[0]).toMatchObject({ samples: 12, successes: 12, verifiedSuccesses: 11, meanCostMicroUsd: Math.round((900 * decay + 100) / (decay + 1)) });
    expect(signals[0]!.successEstimate).toBeCloseTo((0.65 * 4 + 11) / (4 + 11));
    const all = await client.getSignals({});
    expect(all.signals.length).toBeGreaterThan(1);
    expect(all.signals.map((signal) => `${signal.backend}/${signal.taskClass}`)).toEqual(
      [...all.signals.map((signal) => `${signal.backend}/${signal.taskClass}`)].sort(),
    );
  });

  it('sees a new rate card at once through WatchRegistry', async () => {
    await registryClient.putRateCard({
      rateCard: { adapterType: 'demo:beta-fast', inputMicroUsdPerMtok: 1, outputMicroUsdPerMtok: 1, source: 'demo: price cut', reviewer: 'test' },
      reviewerKind: 'operator',
    });
    let revision = 0;
    for (let attempt = 0; attempt < 50 && revision !== 2; attempt += 1) {
      const decision = await winner({ mode: Mode.MODE_CHEAPEST, allowedBackends: ['demo:beta-fast'] });
      revision = decision.winner!.rateCardRevision;
      if (revision !== 2) await sleep(100);
    }
    expect(revision).toBe(2);
  });

  it('rejects a request without a task class', async () => {
    const refused = await rejection(client.place(request({ taskClass: '' })));
    expect(refused.status).toBe(Status.INVALID_ARGUMENT);
  });

  describe('across a restart', () => {
    let dataDir: string | undefined;
    let restartDatabase: TestDatabase;

    beforeAll(async () => {
      restartDatabase = await testDatabase();
      // PGlite in memory would not survive the restart: give it a directory.
      if (!restartDatabase.databaseUrl) dataDir = mkdtempSync(join(tmpdir(), 'actor-placement-'));
    });
    afterAll(async () => {
      await restartDatabase?.drop();
      if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    });

    function start() {
      return startPlacement({
        config: loadPlacementConfig({
          PLACEMENT_ADDR: '127.0.0.1:0',
          REGISTRY_ADDR: registry.address,
          DATABASE_URL: restartDatabase.databaseUrl,
          ACTOR_DATA_DIR: dataDir ?? restartDatabase.dataDir,
          PLACEMENT_HYSTERESIS_WINDOW_MS: '60000',
        }),
        logger,
      });
    }

    function windowRequest(): Partial<PlaceRequest> {
      return { projectId: 'prj_restart_window', taskId: 'tsk_restart_window', taskClass: 'general', estimatedInputTokens: 1_000, mode: Mode.MODE_BEST, taskBudgetLeftMicroUsd: 1_000_000, dayBudgetLeftMicroUsd: 10_000_000 };
    }

    it('keeps signals, circuits, decisions and the challenger of an incumbent', async () => {
      const first = await start();
      let decisionId: string;
      let challengeSince: string;
      try {
        const firstClient = createClient(PlacementServiceDefinition, first.address);
        for (let index = 0; index < 3; index += 1) {
          await firstClient.reportOutcome({ requestId: `restart-${index}`, backend: 'demo:alpha-pro', taskClass: 'code', success: false, errorKind: 'timeout', latencyMs: 9_000 });
        }
        await firstClient.reportOutcome({ requestId: 'restart-ok', backend: 'demo:beta-fast', taskClass: 'code', success: true, verified: true, latencyMs: 700 });
        const { decision } = await firstClient.place(request({ mode: Mode.MODE_BEST }));
        decisionId = decision!.id;

        // A challenger's lead over the incumbent, measured over the hysteresis window, is stored too.
        expect((await firstClient.place(windowRequest())).decision?.winner?.backend).toBe('demo:beta-large');
        for (let index = 0; index < 10; index += 1) {
          await firstClient.reportOutcome({ requestId: `restart-rejected-${index}`, backend: 'demo:beta-large', taskClass: 'general', success: true, verified: false, latencyMs: 900 });
        }
        const held = (await firstClient.place(windowRequest())).decision!;
        expect(held.winner?.backend).toBe('demo:beta-large');
        expect(held.hysteresis).toMatch(/^incumbent demo:beta-large kept: challenger demo:alpha-pro beats it by \d+% \(margin 10%\), but only for 0 s of the 60 s window \(since .+\)$/);
        challengeSince = held.hysteresis.match(/\(since (.+)\)$/)![1]!;
      } finally {
        await first.stop();
      }

      const second = await start();
      try {
        const secondClient = createClient(PlacementServiceDefinition, second.address);
        const { signals } = await secondClient.getSignals({ taskClass: 'code' });
        expect(signals.map((signal) => [signal.backend, signal.samples, signal.circuitState])).toEqual([
          ['demo:alpha-pro', 3, 'open'],
          ['demo:beta-fast', 1, 'closed'],
        ]);
        expect(signals[1]!.latencyP50Ms).toBe(700);
        const { decision } = await secondClient.getDecision({ id: decisionId });
        expect(decision?.winner?.backend).toBe('demo:beta-large');
        const after = (await secondClient.place(request({ mode: Mode.MODE_BALANCED }))).decision!;
        expect(after.exclusions.find((item) => item.backend === 'demo:alpha-pro')).toMatchObject({ reasonCode: 'health' });
        const stillHeld = (await secondClient.place(windowRequest())).decision!;
        expect(stillHeld.winner?.backend).toBe('demo:beta-large');
        expect(stillHeld.hysteresis).toContain(`of the 60 s window (since ${challengeSince})`);
      } finally {
        await second.stop();
      }
    }, 180_000); // two cold starts of file-backed PGlite
  });
});
