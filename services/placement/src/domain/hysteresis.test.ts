import { describe, expect, it } from 'vitest';
import { applyHysteresis, relativeImprovement, type HysteresisInput } from './hysteresis.js';
import type { Candidate, Exclusion } from './placement-model.js';

function candidate(backend: string, score: number): Candidate {
  return {
    backend,
    modelFamily: 'alpha',
    qualityTier: 2,
    demo: false,
    score,
    signals: [],
    expectedCostMicroUsd: 0,
    worstCaseCostMicroUsd: 0,
    expectedLatencyMs: 0,
    successEstimate: 0.5,
    rateCardRevision: 1,
    circuitState: 'closed',
  };
}

function verdict(overrides: Partial<HysteresisInput>) {
  return applyHysteresis({ ranked: [], exclusions: [], margin: 0.1, applies: true, ...overrides });
}

describe('relativeImprovement', () => {
  it('measures against the size of the incumbent score, negative scores included', () => {
    expect(relativeImprovement(0.66, 0.6)).toBeCloseTo(0.1);
    // cheapest scores are minus cost per success: 800 instead of 1000 is 20% better.
    expect(relativeImprovement(-800, -1_000)).toBeCloseTo(0.2);
    expect(relativeImprovement(-1_000, -800)).toBe(0);
    expect(relativeImprovement(0.1, 0)).toBe(Number.POSITIVE_INFINITY);
  });
});

describe('applyHysteresis', () => {
  it('makes the top candidate the incumbent when there is none', () => {
    const result = verdict({ ranked: [candidate('a', 0.7), candidate('b', 0.6)] });
    expect(result).toMatchObject({ winner: { backend: 'a' }, newIncumbent: 'a', failover: false });
    expect(result.verdict).toBe('no incumbent yet: a becomes the incumbent');
  });

  it('keeps the incumbent while a challenger is within the margin', () => {
    const result = verdict({ ranked: [candidate('challenger', 0.65), candidate('incumbent', 0.6)], incumbent: 'incumbent' });
    expect(result.winner?.backend).toBe('incumbent');
    expect(result.newIncumbent).toBeUndefined();
    expect(result.verdict).toBe('incumbent incumbent kept: challenger challenger is only 8% better (margin 10%)');
  });

  it('lets a challenger that beats the margin take over', () => {
    const result = verdict({ ranked: [candidate('challenger', 0.7), candidate('incumbent', 0.6)], incumbent: 'incumbent' });
    expect(result).toMatchObject({ winner: { backend: 'challenger' }, newIncumbent: 'challenger', failover: false });
    expect(result.verdict).toContain('beats incumbent incumbent by 17% (margin 10%)');
  });

  it('fails over at once when the incumbent is unfit (circuit open, already tried, not ready)', () => {
    for (const reasonCode of ['health', 'excluded', 'not_ready'] as const) {
      const exclusions: Exclusion[] = [{ backend: 'incumbent', reasonCode, reason: 'why' }];
      const result = verdict({ ranked: [candidate('other', 0.1)], exclusions, incumbent: 'incumbent' });
      expect(result).toMatchObject({ winner: { backend: 'other' }, newIncumbent: 'other', failover: true });
      expect(result.verdict).toMatch(/^failover: incumbent incumbent is unfit/);
    }
  });

  it('leaves the incumbent in place when only this task rules it out', () => {
    const exclusions: Exclusion[] = [{ backend: 'incumbent', reasonCode: 'budget', reason: 'too dear' }];
    const result = verdict({ ranked: [candidate('other', 0.1)], exclusions, incumbent: 'incumbent' });
    expect(result).toMatchObject({ winner: { backend: 'other' }, failover: false });
    expect(result.newIncumbent).toBeUndefined();
    expect(result.verdict).toContain('incumbent unchanged');
  });

  it('replaces an incumbent that is no longer declared', () => {
    const result = verdict({ ranked: [candidate('other', 0.1)], incumbent: 'gone' });
    expect(result.newIncumbent).toBe('other');
  });

  it('neither keeps nor moves the incumbent for escalations and judges', () => {
    const result = verdict({
      ranked: [candidate('challenger', 0.61), candidate('incumbent', 0.6)],
      incumbent: 'incumbent',
      applies: false,
      skippedBecause: 'an escalation does not move the incumbent',
    });
    expect(result.winner?.backend).toBe('challenger');
    expect(result.newIncumbent).toBeUndefined();
    expect(result.verdict).toBe('not applied: an escalation does not move the incumbent');
  });
});
