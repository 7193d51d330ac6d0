import { describe, expect, it } from 'vitest';
import { MIN_CHALLENGER_SAMPLES, applyHysteresis, failureBackoffMs, relativeImprovement, type HysteresisInput } from './hysteresis.js';
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

  it('with a window, a challenger takes over only after leading by the margin for the whole window', () => {
    const ranked = [candidate('challenger', 0.7), candidate('incumbent', 0.6)];
    const start = new Date('2030-01-01T00:00:00Z');
    const at = (ms: number) => new Date(start.getTime() + ms);
    const first = verdict({ ranked, incumbent: 'incumbent', windowMs: 60_000, now: start });
    expect(first).toMatchObject({ winner: { backend: 'incumbent' }, kept: { because: 'window' }, challenge: { backend: 'challenger', since: start } });
    expect(first.newIncumbent).toBeUndefined();
    expect(first.verdict).toBe(
      'incumbent incumbent kept: challenger challenger beats it by 17% (margin 10%), but only for 0 s of the 60 s window (since 2030-01-01T00:00:00.000Z)',
    );
    const midway = verdict({ ranked, incumbent: 'incumbent', windowMs: 60_000, now: at(59_000), challenge: first.challenge! });
    expect(midway).toMatchObject({ winner: { backend: 'incumbent' }, challenge: { backend: 'challenger', since: start } });
    const done = verdict({ ranked, incumbent: 'incumbent', windowMs: 60_000, now: at(60_000), challenge: midway.challenge! });
    expect(done).toMatchObject({ winner: { backend: 'challenger' }, newIncumbent: 'challenger', challenge: null });
    expect(done.verdict).toContain('has for 60 s (window 60 s): it becomes the incumbent');
    // Another challenger's lead does not count for this one: its window starts now.
    const other = verdict({ ranked, incumbent: 'incumbent', windowMs: 60_000, now: at(90_000), challenge: { backend: 'someone-else', since: start } });
    expect(other).toMatchObject({ winner: { backend: 'incumbent' }, challenge: { backend: 'challenger', since: at(90_000) } });
    // A half-open challenger gets its probe at once, but the probe does not make it the incumbent.
    const probing = verdict({ ranked: [{ ...candidate('challenger', 0.7), circuitState: 'half-open' }, candidate('incumbent', 0.6)], incumbent: 'incumbent', windowMs: 60_000, now: start });
    expect(probing).toMatchObject({ winner: { backend: 'challenger' }, failover: false });
    expect(probing.newIncumbent).toBeUndefined();
    expect(probing.verdict).toBe('probe: challenger challenger is half-open and gets this task as its one probe call; incumbent incumbent unchanged');
    // A placement where the challenger is back within the margin clears the lead.
    const within = verdict({ ranked: [candidate('challenger', 0.62), candidate('incumbent', 0.6)], incumbent: 'incumbent', windowMs: 60_000, now: at(30_000), challenge: first.challenge! });
    expect(within).toMatchObject({ winner: { backend: 'incumbent' }, challenge: null });
  });

  it('keeps the incumbent over a challenger whose latest call failed within the cooldown, however much better it scores', () => {
    const ranked = [candidate('challenger', 0.9), candidate('incumbent', 0.6)];
    const result = verdict({ ranked, incumbent: 'incumbent', recentFailures: new Map([['challenger', 12_000]]) });
    expect(result).toMatchObject({ winner: { backend: 'incumbent' }, failover: false, kept: { challenger: 'challenger', because: 'recent_failure' } });
    expect(result.newIncumbent).toBeUndefined();
    expect(result.verdict).toBe('incumbent incumbent kept: challenger challenger failed 12 s ago and may not displace it until a cooldown has passed');
  });

  it('stands in for an incumbent inside its failure backoff without replacing it', () => {
    // The incumbent ranks first but failed 1 s ago: the best candidate that did not fail takes this task.
    const ranked = [candidate('incumbent', 0.9), candidate('failed-too', 0.8), candidate('other', 0.5)];
    const recentFailures = new Map([['incumbent', 1_000], ['failed-too', 2_000]]);
    const result = verdict({ ranked, incumbent: 'incumbent', recentFailures });
    expect(result).toMatchObject({ winner: { backend: 'other' }, failover: true });
    expect(result.newIncumbent).toBeUndefined();
    expect(result.challenge).toBeUndefined();
    expect(result.verdict).toBe('failover: incumbent incumbent failed 1 s ago and is inside its failure backoff; other stands in, incumbent unchanged');
    // When every candidate failed recently, the incumbent keeps the task.
    const allFailed = verdict({ ranked: ranked.slice(0, 2), incumbent: 'incumbent', recentFailures });
    expect(allFailed).toMatchObject({ winner: { backend: 'incumbent' }, failover: false });
  });

  it('a suspect backend stays suspect for one circuit cooldown after its latest failure', () => {
    expect(failureBackoffMs(0, 30_000)).toBe(0);
    expect(failureBackoffMs(1, 30_000)).toBe(30_000);
    expect(failureBackoffMs(2, 30_000)).toBe(30_000);
  });

  it('replaces an incumbent at once when it is unfit for a while (circuit open, not ready)', () => {
    for (const reasonCode of ['health', 'not_ready'] as const) {
      const exclusions: Exclusion[] = [{ backend: 'incumbent', reasonCode, reason: 'why' }];
      const result = verdict({ ranked: [candidate('other', 0.1)], exclusions, incumbent: 'incumbent' });
      expect(result).toMatchObject({ winner: { backend: 'other' }, newIncumbent: 'other', failover: true });
      expect(result.verdict).toMatch(/^failover: incumbent incumbent is unfit/);
    }
  });

  it('fails over for this task only when the task already tried the incumbent', () => {
    const exclusions: Exclusion[] = [{ backend: 'incumbent', reasonCode: 'excluded', reason: 'already tried' }];
    const result = verdict({ ranked: [candidate('other', 0.1)], exclusions, incumbent: 'incumbent' });
    expect(result).toMatchObject({ winner: { backend: 'other' }, failover: true });
    expect(result.newIncumbent).toBeUndefined();
    expect(result.verdict).toBe('failover: incumbent incumbent was already tried by this task; other stands in, incumbent unchanged');
  });

  it('a challenger with too few observed outcomes gets trial tasks, and takes over once it has enough', () => {
    const ranked = [candidate('challenger', 0.7), candidate('incumbent', 0.6)];
    const now = new Date('2030-01-01T00:00:00Z');
    const short = verdict({ ranked, incumbent: 'incumbent', evidence: new Map([['challenger', MIN_CHALLENGER_SAMPLES - 1]]), now });
    expect(short).toMatchObject({ winner: { backend: 'challenger' }, failover: false, trial: { challenger: 'challenger', samples: MIN_CHALLENGER_SAMPLES - 1 } });
    expect(short.newIncumbent).toBeUndefined();
    expect(short.verdict).toBe(
      `trial: challenger challenger beats incumbent incumbent by 17% (margin 10%) but has ${MIN_CHALLENGER_SAMPLES - 1} of the ${MIN_CHALLENGER_SAMPLES} outcomes needed to take over; it gets this task, incumbent unchanged`,
    );
    // No signal at all counts as no evidence.
    expect(verdict({ ranked, incumbent: 'incumbent', evidence: new Map(), now }).trial?.samples).toBe(0);
    const enough = verdict({ ranked, incumbent: 'incumbent', evidence: new Map([['challenger', MIN_CHALLENGER_SAMPLES]]), now });
    expect(enough).toMatchObject({ winner: { backend: 'challenger' }, newIncumbent: 'challenger' });
    // Within the margin, evidence does not matter: the incumbent keeps the task.
    const close = verdict({ ranked: [candidate('challenger', 0.62), candidate('incumbent', 0.6)], incumbent: 'incumbent', evidence: new Map(), now });
    expect(close).toMatchObject({ winner: { backend: 'incumbent' }, kept: { because: 'margin' } });
    // With a window, trials start only once the lead has lasted the window.
    const start = verdict({ ranked, incumbent: 'incumbent', evidence: new Map(), windowMs: 60_000, now });
    expect(start).toMatchObject({ winner: { backend: 'incumbent' }, kept: { because: 'window' } });
    const after = verdict({ ranked, incumbent: 'incumbent', evidence: new Map(), windowMs: 60_000, now: new Date(now.getTime() + 60_000), challenge: start.challenge! });
    expect(after).toMatchObject({ winner: { backend: 'challenger' }, trial: { samples: 0 }, challenge: { backend: 'challenger', since: now } });
    expect(after.newIncumbent).toBeUndefined();
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
