import { describe, expect, it } from 'vitest';
import { BALANCED_WEIGHTS, escalationChains, estimate, priorSuccess, rankCandidates, successEstimate, type Estimate } from './objectives.js';
import type { Backend, ModeName, SignalState } from './placement-model.js';
import { emptySignal } from './signal-update.js';
import { testBackend } from './test-backends.js';

const now = new Date('2030-01-01T00:00:00Z');

function signal(backend: string, overrides: Partial<SignalState>): SignalState {
  return { ...emptySignal(backend, 'code', now), ...overrides };
}

function estimateOf(backend: Backend, observed?: SignalState): Estimate {
  return estimate(backend as Backend & { rateCard: NonNullable<Backend['rateCard']> }, observed, 1_000, 'closed');
}

function order(mode: ModeName, estimates: Estimate[]): string[] {
  return rankCandidates(mode, estimates).map((candidate) => candidate.backend);
}

// cheap: tier 1 at $1/$2 per Mtok; strong: tier 4 at ten times the price.
const cheap = testBackend('cheap', { qualityTier: 1 });
const strong = testBackend('strong', {
  qualityTier: 4,
  rateCard: { revision: 3, inputMicroUsdPerMtok: 10_000_000, outputMicroUsdPerMtok: 20_000_000, microUsdPerSecond: 0, microUsdPerTask: 0 },
});

describe('success estimate', () => {
  it('starts at the tier prior and moves with verified outcomes', () => {
    expect(priorSuccess(1)).toBeCloseTo(0.55);
    expect(priorSuccess(5)).toBeCloseTo(0.95);
    expect(successEstimate(2, undefined)).toBeCloseTo(0.65);
    expect(successEstimate(2, { recentVerified: 6, recentWork: 6 })).toBeCloseTo((0.65 * 4 + 6) / 10);
    expect(successEstimate(2, { recentVerified: 0, recentWork: 6 })).toBeCloseTo((0.65 * 4) / 10);
  });
});

describe('estimate', () => {
  it('prices the prompt plus a quarter of the maximum output, and the worst case at the maximum', () => {
    const result = estimateOf(cheap);
    // 1000 input tokens x $1/Mtok + 250 output tokens x $2/Mtok.
    expect(result.expectedCostMicroUsd).toBe(1_500);
    expect(result.worstCaseCostMicroUsd).toBe(3_000);
  });

  it('caps the expected cost by the measured mean cost', () => {
    expect(estimateOf(cheap, signal('cheap', { recentCostSamples: 2, recentCostMicroUsd: 1_000 })).expectedCostMicroUsd).toBe(500);
    expect(estimateOf(cheap, signal('cheap', { recentCostSamples: 2, recentCostMicroUsd: 9_000 })).expectedCostMicroUsd).toBe(1_500);
  });

  it('uses the observed median latency, else 1 s per tier capped by the timeout', () => {
    expect(estimateOf(strong).expectedLatencyMs).toBe(4_000);
    expect(estimateOf(testBackend('quick-timeout', { qualityTier: 5, timeoutMs: 2_000 })).expectedLatencyMs).toBe(2_000);
    const observed = estimateOf(strong, signal('strong', { latenciesMs: [100, 300, 200, 9_000] }));
    expect(observed).toMatchObject({ expectedLatencyMs: 200, latencyObserved: true });
  });

  it('prices per-second backends by the expected latency', () => {
    const timed = testBackend('timed', {
      qualityTier: 2,
      rateCard: { revision: 1, inputMicroUsdPerMtok: 0, outputMicroUsdPerMtok: 0, microUsdPerSecond: 1_000, microUsdPerTask: 50 },
    });
    expect(estimateOf(timed).expectedCostMicroUsd).toBe(2_050);
    expect(estimateOf(timed, signal('timed', { latenciesMs: [500] })).expectedCostMicroUsd).toBe(550);
  });
});

describe('objectives', () => {
  it('cheapest ranks by cost per verified success, so a cheap backend that rarely passes loses', () => {
    expect(order('cheapest', [estimateOf(strong), estimateOf(cheap)])).toEqual(['cheap', 'strong']);
    const failing = signal('cheap', { workSamples: 40, verifiedSuccesses: 0, recentWork: 40, recentVerified: 0 });
    expect(order('cheapest', [estimateOf(strong), estimateOf(cheap, failing)])).toEqual(['strong', 'cheap']);
    const [winner] = rankCandidates('cheapest', [estimateOf(cheap)]);
    expect(winner!.score).toBeCloseTo(-1_500 / 0.55);
  });

  it('cheapest counts the escalation chain that follows a failure, not just one call', () => {
    const given = (type: string, qualityTier: number, costMicroUsd: number, success: number): Estimate => ({
      ...estimateOf(testBackend(type, { qualityTier })),
      expectedCostMicroUsd: costMicroUsd,
      successEstimate: success,
    });
    // One call alone: tiny 1000/0.3 = 3333 per success, small 2000/0.7 = 2857: small would win.
    // With escalation: small's failures go to huge (small: 2000 + 0.3 x 100000 = 32000 for 0.985), tiny's to
    // small's chain (tiny: 1000 + 0.7 x 32000 = 23400 for 0.9895): tiny is the cheaper way to a verified success.
    const estimates = [given('huge', 5, 100_000, 0.95), given('small', 2, 2_000, 0.7), given('tiny', 1, 1_000, 0.3)];
    const chains = escalationChains(estimates);
    expect(chains[0]).toEqual({ costMicroUsd: 100_000, success: 0.95, next: undefined });
    expect(chains[1]!.next).toBe('huge');
    expect(chains[1]!.costMicroUsd).toBeCloseTo(32_000);
    expect(chains[1]!.success).toBeCloseTo(0.985);
    expect(chains[2]!.next).toBe('small');
    expect(chains[2]!.costMicroUsd).toBeCloseTo(23_400);
    expect(chains[2]!.success).toBeCloseTo(0.9895);
    const ranked = rankCandidates('cheapest', estimates);
    expect(ranked.map((candidate) => candidate.backend)).toEqual(['tiny', 'small', 'huge']);
    expect(ranked[0]!.score).toBeCloseTo(-23_400 / 0.9895);
    const sum = ranked[0]!.signals.reduce((total, item) => total + item.contribution, 0);
    expect(ranked[0]!.score).toBeCloseTo(sum);
    // A cheaper next step makes the chain after small cheaper too, and small wins once tiny rarely passes.
    const flaky = [given('huge', 5, 100_000, 0.95), given('small', 2, 2_000, 0.7), given('tiny', 1, 1_000, 0.02)];
    expect(order('cheapest', flaky)).toEqual(['small', 'tiny', 'huge']);
    // Same-tier candidates never escalate to each other.
    const twins = escalationChains([given('a', 3, 1_000, 0.5), given('b', 3, 2_000, 0.9)]);
    expect(twins.map((chain) => chain.next)).toEqual([undefined, undefined]);
  });

  it('fastest follows observed latency over the tier prior', () => {
    expect(order('fastest', [estimateOf(strong), estimateOf(cheap)])).toEqual(['cheap', 'strong']);
    const slow = signal('cheap', { latenciesMs: [5_000, 6_000, 5_500] });
    expect(order('fastest', [estimateOf(strong), estimateOf(cheap, slow)])).toEqual(['strong', 'cheap']);
  });

  it('best picks the highest success estimate, cost breaking ties', () => {
    expect(order('best', [estimateOf(cheap), estimateOf(strong)])).toEqual(['strong', 'cheap']);
    const twin = testBackend('twin', { qualityTier: 4 });
    expect(order('best', [estimateOf(strong), estimateOf(twin)])).toEqual(['twin', 'strong']);
    const disappointing = signal('strong', { workSamples: 30, verifiedSuccesses: 3, recentWork: 30, recentVerified: 3 });
    expect(order('best', [estimateOf(strong, disappointing), estimateOf(cheap)])).toEqual(['cheap', 'strong']);
  });

  it('balanced blends success, relative cost and relative latency, and contributions sum to the score', () => {
    const [first, second] = rankCandidates('balanced', [estimateOf(cheap), estimateOf(strong)]);
    for (const candidate of [first!, second!]) {
      const sum = candidate.signals.reduce((total, item) => total + item.contribution, 0);
      expect(candidate.score).toBeCloseTo(sum);
      expect(candidate.score).toBeGreaterThan(0);
      expect(candidate.score).toBeLessThanOrEqual(1);
    }
    // cheap: 0.6 x 0.55 + 0.25 x (1 - 0.1) + 0.15 x (1 - 0.25); strong: 0.6 x 0.85 + 0 + 0.
    expect(first!.backend).toBe('cheap');
    expect(first!.score).toBeCloseTo(BALANCED_WEIGHTS.success * 0.55 + BALANCED_WEIGHTS.cost * 0.9 + BALANCED_WEIGHTS.latency * 0.75);
    expect(second!.score).toBeCloseTo(BALANCED_WEIGHTS.success * 0.85);
    const proven = signal('strong', { workSamples: 50, verifiedSuccesses: 50, recentWork: 50, recentVerified: 50, latenciesMs: [900] });
    const unreliable = signal('cheap', { workSamples: 50, verifiedSuccesses: 10, recentWork: 50, recentVerified: 10 });
    expect(order('balanced', [estimateOf(cheap, unreliable), estimateOf(strong, proven)])).toEqual(['strong', 'cheap']);
  });

  it('private scores like balanced', () => {
    const estimates = [estimateOf(cheap), estimateOf(strong)];
    expect(rankCandidates('private', estimates).map((item) => item.score)).toEqual(
      rankCandidates('balanced', estimates).map((item) => item.score),
    );
  });
});
