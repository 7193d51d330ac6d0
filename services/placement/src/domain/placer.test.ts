import { describe, expect, it } from 'vitest';
import { decidePlacement, type PlacementInput } from './placer.js';
import type { SignalState } from './placement-model.js';
import { emptySignal } from './signal-update.js';
import { testBackend, testRequest } from './test-backends.js';

const now = new Date('2030-01-01T00:00:00Z');

const alphaMini = testBackend('demo:alpha-mini', { demo: true, qualityTier: 1 });
const betaLarge = testBackend('demo:beta-large', {
  demo: true,
  modelFamily: 'beta',
  qualityTier: 4,
  rateCard: { revision: 2, inputMicroUsdPerMtok: 10_000_000, outputMicroUsdPerMtok: 40_000_000, microUsdPerSecond: 0, microUsdPerTask: 0 },
});

function decide(overrides: Partial<PlacementInput> = {}) {
  return decidePlacement({
    request: testRequest(),
    backends: [alphaMini, betaLarge],
    signals: new Map(),
    now,
    circuitCooldownMs: 30_000,
    hysteresisMargin: 0.1,
    ...overrides,
  });
}

describe('decidePlacement', () => {
  it('explains the winner, the mode and why, names demo backends and the exclusions', () => {
    // beta-large's worst case: 1000 x $10/Mtok + 1000 x $40/Mtok = $0.05.
    const result = decide({ request: testRequest({ mode: 'cheapest', taskBudgetLeftMicroUsd: 10_000 }) });
    expect(result.winner?.backend).toBe('demo:alpha-mini');
    expect(result.exclusions).toEqual([
      { backend: 'demo:beta-large', reasonCode: 'budget', reason: 'worst case $0.05 (50000 micro-USD) exceeds the $0.01 (10000 micro-USD) left for the task' },
    ]);
    expect(result.explanation).toBe(
      'demo:alpha-mini (demo backend) won under cheapest: lowest expected cost per verified success counting escalations, $0.002727 ($0.0015 a call at 55% estimated success); 1 backend excluded (demo:beta-large: budget).',
    );
    expect(result.objective).toBe('lowest expected cost per verified success, counting the escalations that follow a rejected answer');
    expect(result.newIncumbent).toBe('demo:alpha-mini');
  });

  it('puts the winner first even when hysteresis keeps a lower-ranked incumbent', () => {
    const result = decide({ request: testRequest({ mode: 'best' }), incumbent: 'demo:alpha-mini', hysteresisMargin: 1 });
    expect(result.candidates.map((candidate) => candidate.backend)).toEqual(['demo:alpha-mini', 'demo:beta-large']);
    expect(result.winner?.backend).toBe('demo:alpha-mini');
    expect(result.hysteresis).toMatch(/^incumbent demo:alpha-mini kept: challenger demo:beta-large is only \d+% better \(margin 100%\)$/);
    expect(result.explanation).toContain('kept as the incumbent');
  });

  it('returns no winner with every exclusion when nothing fits, and says private mode fails closed', () => {
    const result = decide({
      request: testRequest({ mode: 'private' }),
      backends: [testBackend('vendor', { trust: 'external' })],
    });
    expect(result.winner).toBeUndefined();
    expect(result.candidates).toEqual([]);
    expect(result.explanation).toBe(
      'No backend can take this code task under private (private mode fails closed): 1 backend excluded (vendor: trust).',
    );
  });

  it('a judge says which family it avoided, or that it had to share it', () => {
    const judge = decide({ request: testRequest({ purpose: 'judge', avoidModelFamily: 'alpha' }) });
    expect(judge.winner?.backend).toBe('demo:beta-large');
    expect(judge.hysteresis).toBe('not applied: a judge placement does not move the incumbent');
    expect(judge.newIncumbent).toBeUndefined();
    expect(judge.explanation).toContain("differs from the worker's (alpha)");
    const shared = decide({ request: testRequest({ purpose: 'judge', avoidModelFamily: 'alpha' }), backends: [alphaMini] });
    expect(shared.winner?.backend).toBe('demo:alpha-mini');
    expect(shared.explanation).toContain("the judge shares the worker's family (alpha)");
  });

  it('after a failover, the next placement stays on the backend that took over until a cooldown has passed', () => {
    const failedAt = new Date(now.getTime() - 10_000);
    const failed: SignalState = { ...emptySignal('demo:beta-large', 'code', failedAt), samples: 1, workSamples: 1, recentWork: 1, consecutiveFailures: 1 };
    const signals = new Map([[failed.backend, failed]]);
    const request = testRequest({ mode: 'best' });
    const kept = decide({ request, incumbent: 'demo:alpha-mini', signals });
    expect(kept.winner?.backend).toBe('demo:alpha-mini');
    expect(kept.newIncumbent).toBeUndefined();
    expect(kept.hysteresis).toBe(
      'incumbent demo:alpha-mini kept: challenger demo:beta-large failed 10 s ago and may not displace it until a cooldown has passed',
    );
    expect(kept.explanation).toContain('kept as the incumbent (demo:beta-large ranks higher but failed 10 s ago)');
    // Once the cooldown has passed, the better backend gets trial tasks while it has too few outcomes...
    const later = decide({ request, incumbent: 'demo:alpha-mini', signals, now: new Date(failedAt.getTime() + 30_000) });
    expect(later.winner?.backend).toBe('demo:beta-large');
    expect(later.newIncumbent).toBeUndefined();
    expect(later.hysteresis).toMatch(/^trial: challenger demo:beta-large beats incumbent demo:alpha-mini by \d+% \(margin 10%\) but has 1 of the 5 outcomes needed/);
    expect(later.explanation).toContain('Trial of demo:beta-large (1 of 5 outcomes) before it may take over; the incumbent stays');
    // ...and takes over once it has enough.
    const proven = new Map([[failed.backend, { ...failed, samples: 5, workSamples: 5, verifiedSuccesses: 4, recentWork: 5, recentVerified: 4 }]]);
    const takeover = decide({ request, incumbent: 'demo:alpha-mini', signals: proven, now: new Date(failedAt.getTime() + 30_000) });
    expect(takeover.newIncumbent).toBe('demo:beta-large');
    // A success since the failure clears it at once.
    const recovered = new Map([[failed.backend, { ...failed, consecutiveFailures: 0 }]]);
    expect(decide({ request, incumbent: 'demo:alpha-mini', signals: recovered }).winner?.backend).toBe('demo:beta-large');
  });

  it('one error of the incumbent sends the tasks of a cooldown to a stand-in without moving the incumbent', () => {
    const failedAt = new Date(now.getTime() - 5_000);
    const proven: SignalState = { ...emptySignal('demo:beta-large', 'code', failedAt), samples: 20, workSamples: 20, verifiedSuccesses: 19, recentWork: 20, recentVerified: 19 };
    const request = testRequest({ mode: 'best' });
    // Within the task that met the error, the incumbent is excluded: a stand-in takes the retry.
    const retry = decide({ request: { ...request, excludeBackends: ['demo:beta-large'] }, incumbent: 'demo:beta-large', signals: new Map([[proven.backend, proven]]) });
    expect(retry).toMatchObject({ winner: { backend: 'demo:alpha-mini' }, newIncumbent: undefined });
    expect(retry.hysteresis).toBe('failover: incumbent demo:beta-large was already tried by this task; demo:alpha-mini stands in, incumbent unchanged');
    // The next task, 5 s after the error: still a stand-in, the incumbent stays.
    const erred = new Map([[proven.backend, { ...proven, samples: 21, workSamples: 21, recentWork: 21, consecutiveFailures: 1 }]]);
    const next = decide({ request, incumbent: 'demo:beta-large', signals: erred });
    expect(next).toMatchObject({ winner: { backend: 'demo:alpha-mini' }, newIncumbent: undefined });
    expect(next.hysteresis).toBe('failover: incumbent demo:beta-large failed 5 s ago and is inside its failure backoff; demo:alpha-mini stands in, incumbent unchanged');
    expect(next.explanation).toContain('Failover: incumbent demo:beta-large failed 5 s ago');
    // After the cooldown the incumbent gets its tasks back, still the incumbent: no flip happened.
    const back = decide({ request, incumbent: 'demo:beta-large', signals: erred, now: new Date(failedAt.getTime() + 30_000) });
    expect(back.winner?.backend).toBe('demo:beta-large');
    expect(back.hysteresis).toBe('incumbent demo:beta-large kept: it ranks first');
  });

  it('reports the failover and the time of the newest signal used', () => {
    const open: SignalState = { ...emptySignal('demo:beta-large', 'code', now), consecutiveFailures: 3, openedAt: now, updatedAt: now };
    const result = decide({ request: testRequest({ mode: 'best' }), incumbent: 'demo:beta-large', signals: new Map([[open.backend, open]]) });
    expect(result.winner?.backend).toBe('demo:alpha-mini');
    expect(result.newIncumbent).toBe('demo:alpha-mini');
    expect(result.explanation).toContain('Failover: incumbent demo:beta-large is unfit (health');
    expect(result.signalsTime).toEqual(now);
  });
});
