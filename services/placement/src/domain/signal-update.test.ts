import { describe, expect, it } from 'vitest';
import { circuitState } from './circuit-breaker.js';
import type { SignalState } from './placement-model.js';
import { successEstimate } from './objectives.js';
import { COST_WINDOW, LATENCY_WINDOW, SUCCESS_WINDOW, applyOutcome, emptySignal, meanCost, percentile, type Outcome } from './signal-update.js';

const start = new Date('2030-01-01T00:00:00Z');
const cooldownMs = 30_000;

function at(ms: number): Date {
  return new Date(start.getTime() + ms);
}

const success: Outcome = { success: true, verified: true, latencyMs: 100, costMicroUsd: 50, errorKind: '', judge: false };
const failure: Outcome = { success: false, verified: false, latencyMs: 2_000, costMicroUsd: 0, errorKind: 'backend', judge: false };

describe('applyOutcome', () => {
  it('counts samples, successes, verified successes, latency and cost', () => {
    let signal = emptySignal('a', 'code', start);
    signal = applyOutcome(signal, success, at(1), cooldownMs);
    signal = applyOutcome(signal, { ...success, verified: false, latencyMs: 300, costMicroUsd: 150 }, at(2), cooldownMs);
    signal = applyOutcome(signal, failure, at(3), cooldownMs);
    expect(signal).toMatchObject({ samples: 3, successes: 2, verifiedSuccesses: 1, workSamples: 3, latenciesMs: [100, 300, 2_000] });
    expect(signal.recentWork).toBeCloseTo(0.99 * 0.99 + 0.99 + 1);
    expect(signal.recentVerified).toBeCloseTo(0.99 * 0.99);
    // Recent calls weigh more: the older one counts 1 - 1/COST_WINDOW of the newer.
    expect(meanCost(signal)).toBe(Math.round((50 * (1 - 1 / COST_WINDOW) + 150) / (1 - 1 / COST_WINDOW + 1)));
    expect(signal.updatedAt).toEqual(at(3));
  });

  it('measures cost per call over recent calls, so a price change is learned within the window', () => {
    let signal = emptySignal('a', 'research', start);
    for (let call = 0; call < 200; call++) signal = applyOutcome(signal, { ...success, costMicroUsd: 1_000 }, at(call), cooldownMs);
    expect(meanCost(signal)).toBe(1_000);
    // The backend's prices triple.
    for (let call = 0; call < COST_WINDOW; call++) signal = applyOutcome(signal, { ...success, costMicroUsd: 3_000 }, at(200 + call), cooldownMs);
    const allTime = signal.totalCostMicroUsd / signal.costSamples;
    expect(allTime).toBe(1_400);
    expect(meanCost(signal)).toBeGreaterThan(2_200);
    for (let call = 0; call < 3 * COST_WINDOW; call++) signal = applyOutcome(signal, { ...success, costMicroUsd: 3_000 }, at(300 + call), cooldownMs);
    expect(meanCost(signal)).toBeGreaterThan(2_900);
  });

  it('counts a judge call toward the judge backend success only, never as a verified answer', () => {
    const signal = applyOutcome(emptySignal('judge', 'code', start), { ...success, judge: true }, at(1), cooldownMs);
    expect(signal).toMatchObject({ samples: 1, successes: 1, verifiedSuccesses: 0, workSamples: 0 });
  });

  it('weighs the verified-success evidence toward recent outcomes, so a regressed backend is re-learned', () => {
    let signal = emptySignal('a', 'general', start);
    for (let index = 0; index < 500; index += 1) signal = applyOutcome(signal, success, at(index), cooldownMs);
    expect(signal.recentWork).toBeLessThan(SUCCESS_WINDOW);
    expect(signal.recentWork).toBeGreaterThan(SUCCESS_WINDOW * 0.99);
    expect(successEstimate(1, signal)).toBeGreaterThan(0.95);
    // A model update: from now on every answer is rejected.
    for (let index = 0; index < SUCCESS_WINDOW; index += 1) {
      signal = applyOutcome(signal, { ...success, verified: false }, at(500 + index), cooldownMs);
    }
    // After one window the estimate is below half; a lifetime average would still say 5/6.
    expect(successEstimate(1, signal)).toBeLessThan(0.4);
    expect(signal.verifiedSuccesses / signal.workSamples).toBeCloseTo(500 / 600);
  });

  it('leaves the recent evidence alone for a judge call', () => {
    const signal = applyOutcome(emptySignal('judge', 'code', start), { ...success, judge: true }, at(1), cooldownMs);
    expect(signal).toMatchObject({ recentWork: 0, recentVerified: 0 });
  });

  it('ignores a cancelled call', () => {
    const signal = emptySignal('a', 'code', start);
    expect(applyOutcome(signal, { ...failure, errorKind: 'cancelled' }, at(1), cooldownMs)).toBe(signal);
  });

  it('keeps only the most recent latencies', () => {
    let signal = emptySignal('a', 'code', start);
    for (let index = 1; index <= LATENCY_WINDOW + 10; index += 1) {
      signal = applyOutcome(signal, { ...success, latencyMs: index }, at(index), cooldownMs);
    }
    expect(signal.latenciesMs).toHaveLength(LATENCY_WINDOW);
    expect(signal.latenciesMs[0]).toBe(11);
  });
});

describe('circuit breaker', () => {
  it('opens after three failures in a row, half-opens after the cooldown, closes on a success', () => {
    let signal = emptySignal('a', 'code', start);
    signal = applyOutcome(signal, failure, at(1), cooldownMs);
    signal = applyOutcome(signal, failure, at(2), cooldownMs);
    expect(circuitState(signal, at(3), cooldownMs).state).toBe('closed');
    signal = applyOutcome(signal, failure, at(3), cooldownMs);
    expect(signal.consecutiveFailures).toBe(3);
    expect(circuitState(signal, at(4), cooldownMs)).toMatchObject({ state: 'open', halfOpenAt: at(3 + cooldownMs) });
    expect(circuitState(signal, at(3 + cooldownMs), cooldownMs)).toMatchObject({ state: 'half-open', probeAvailable: true });
    signal = applyOutcome(signal, success, at(cooldownMs + 10), cooldownMs);
    expect(circuitState(signal, at(cooldownMs + 11), cooldownMs).state).toBe('closed');
    expect(signal.consecutiveFailures).toBe(0);
  });

  it('a success in between resets the count', () => {
    let signal = emptySignal('a', 'code', start);
    for (const outcome of [failure, failure, success, failure, failure]) signal = applyOutcome(signal, outcome, at(1), cooldownMs);
    expect(circuitState(signal, at(2), cooldownMs).state).toBe('closed');
  });

  it('allows one probe when half-open, and a failed probe re-opens for another cooldown', () => {
    let signal: SignalState = { ...emptySignal('a', 'code', start), consecutiveFailures: 3, openedAt: start };
    const halfOpen = at(cooldownMs + 1);
    signal = { ...signal, probeStartedAt: halfOpen };
    expect(circuitState(signal, at(cooldownMs + 2), cooldownMs)).toMatchObject({ state: 'half-open', probeAvailable: false });
    // A probe that never reports is given up after another cooldown.
    expect(circuitState(signal, at(2 * cooldownMs + 1), cooldownMs).probeAvailable).toBe(true);
    signal = applyOutcome(signal, failure, at(cooldownMs + 5), cooldownMs);
    expect(signal.openedAt).toEqual(at(cooldownMs + 5));
    expect(signal.probeStartedAt).toBeNull();
    expect(circuitState(signal, at(cooldownMs + 6), cooldownMs).state).toBe('open');
  });

  it('a failure reported while open does not extend the cooldown', () => {
    let signal: SignalState = { ...emptySignal('a', 'code', start), consecutiveFailures: 3, openedAt: start };
    signal = applyOutcome(signal, failure, at(1_000), cooldownMs);
    expect(signal.openedAt).toEqual(start);
  });
});

describe('percentile', () => {
  it('takes the nearest rank', () => {
    expect(percentile([], 0.5)).toBe(0);
    expect(percentile([5, 1, 3], 0.5)).toBe(3);
    expect(percentile([1, 2, 3, 4], 0.5)).toBe(2);
    expect(percentile(Array.from({ length: 20 }, (_, index) => index + 1), 0.95)).toBe(19);
  });

  it('agrees with sorting for windows with repeats, any order and any quantile, and leaves the window untouched', () => {
    let seed = 7;
    const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648);
    for (let round = 0; round < 500; round++) {
      const window = Array.from({ length: 1 + (next() % 60) }, () => next() % (round % 2 === 0 ? 5 : 10_000));
      const before = [...window];
      const sorted = [...window].sort((left, right) => left - right);
      for (const q of [0, 0.05, 0.5, 0.95, 0.99, 1]) {
        expect(percentile(window, q)).toBe(sorted[Math.max(1, Math.ceil(q * sorted.length)) - 1]);
      }
      expect(window).toEqual(before);
    }
  });

  it('sees only its own window after a longer one (every call shares one scratch buffer)', () => {
    const long = Array.from({ length: LATENCY_WINDOW * 2 }, (_, index) => index % 7);
    expect(percentile(long, 1)).toBe(6);
    expect(percentile([300, 100, 200], 1)).toBe(300);
    expect(percentile([300, 100, 200], 0.5)).toBe(200);
    expect(percentile(long, 0.5)).toBe(3);
  });
});
