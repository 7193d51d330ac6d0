import { FAILURES_TO_OPEN, circuitState } from './circuit-breaker.js';
import type { SignalState } from './placement-model.js';

/** How many recent latencies the percentiles are computed over. */
export const LATENCY_WINDOW = 50;

/**
 * The effective window of the verified-success evidence, in work outcomes: each one weighs the older
 * evidence down by 1 - 1/SUCCESS_WINDOW, so the recent-work count tends to this and an outcome this
 * many outcomes old counts about a third (1/e) of a new one.
 */
export const SUCCESS_WINDOW = 100;
const SUCCESS_DECAY = 1 - 1 / SUCCESS_WINDOW;

/** The effective window of the measured cost per call, in calls (as SUCCESS_WINDOW is for outcomes). */
export const COST_WINDOW = 50;
const COST_DECAY = 1 - 1 / COST_WINDOW;

/** One reported attempt or judge call. */
export interface Outcome {
  success: boolean;
  verified: boolean;
  latencyMs: number;
  costMicroUsd: number;
  errorKind: string;
  /** A judge call: counts toward the judge backend's own success, never as a verified answer. */
  judge: boolean;
}

/** A fresh signal for a backend x task class that has seen no outcome yet. */
export function emptySignal(backend: string, taskClass: string, now: Date): SignalState {
  return {
    backend,
    taskClass,
    samples: 0,
    successes: 0,
    verifiedSuccesses: 0,
    workSamples: 0,
    recentVerified: 0,
    recentWork: 0,
    latenciesMs: [],
    costSamples: 0,
    totalCostMicroUsd: 0,
    recentCostSamples: 0,
    recentCostMicroUsd: 0,
    consecutiveFailures: 0,
    openedAt: null,
    probeStartedAt: null,
    updatedAt: now,
  };
}

/**
 * The signal after one outcome. A cancelled call says nothing about the backend and changes nothing.
 * A failure counts toward the circuit: the FAILURES_TO_OPEN-th in a row opens it, and a failed
 * half-open probe re-opens it for another cooldown. Any success closes it.
 */
export function applyOutcome(signal: SignalState, outcome: Outcome, now: Date, cooldownMs: number): SignalState {
  if (!outcome.success && outcome.errorKind === 'cancelled') return signal;
  const verifiedAnswer = !outcome.judge && outcome.success && outcome.verified;
  const next: SignalState = {
    ...signal,
    samples: signal.samples + 1,
    successes: signal.successes + (outcome.success ? 1 : 0),
    workSamples: signal.workSamples + (outcome.judge ? 0 : 1),
    verifiedSuccesses: signal.verifiedSuccesses + (verifiedAnswer ? 1 : 0),
    recentVerified: outcome.judge ? signal.recentVerified : signal.recentVerified * SUCCESS_DECAY + (verifiedAnswer ? 1 : 0),
    recentWork: outcome.judge ? signal.recentWork : signal.recentWork * SUCCESS_DECAY + 1,
    updatedAt: now,
  };
  if (outcome.latencyMs > 0) next.latenciesMs = [...signal.latenciesMs, outcome.latencyMs].slice(-LATENCY_WINDOW);
  if (outcome.costMicroUsd > 0) {
    next.costSamples = signal.costSamples + 1;
    next.totalCostMicroUsd = signal.totalCostMicroUsd + outcome.costMicroUsd;
    next.recentCostSamples = signal.recentCostSamples * COST_DECAY + 1;
    next.recentCostMicroUsd = signal.recentCostMicroUsd * COST_DECAY + outcome.costMicroUsd;
  }
  if (outcome.success) {
    next.consecutiveFailures = 0;
    next.openedAt = null;
    next.probeStartedAt = null;
    return next;
  }
  next.consecutiveFailures = signal.consecutiveFailures + 1;
  const circuit = circuitState(signal, now, cooldownMs);
  const opens = circuit.state === 'closed' && next.consecutiveFailures >= FAILURES_TO_OPEN;
  if (opens || circuit.state === 'half-open') {
    next.openedAt = now;
    next.probeStartedAt = null;
  }
  return next;
}

/**
 * One scratch buffer for every percentile: allocating a typed array per call cost more than the
 * selection itself (placement takes a percentile of every candidate's window in every decision).
 * Safe to share because percentile is synchronous and never re-entered.
 */
let scratch = new Float64Array(LATENCY_WINDOW);

/** The q-quantile (0..1) of a latency window by nearest rank; 0 for an empty window. */
export function percentile(values: number[], q: number): number {
  if (values.length === 0) return 0;
  const rank = Math.max(1, Math.ceil(q * values.length));
  if (scratch.length < values.length) scratch = new Float64Array(values.length);
  for (let index = 0; index < values.length; index++) scratch[index] = values[index]!;
  return selectSmallest(scratch, values.length, rank - 1);
}

/**
 * The k-th smallest of the first `count` items (k from 0), by quickselect in place: linear on average,
 * where a sort is n log n.
 */
function selectSmallest(items: Float64Array, count: number, k: number): number {
  let low = 0;
  let high = count - 1;
  while (low < high) {
    const pivot = items[(low + high) >> 1]!;
    let left = low;
    let right = high;
    while (left <= right) {
      while (items[left]! < pivot) left++;
      while (items[right]! > pivot) right--;
      if (left <= right) {
        const swap = items[left]!;
        items[left] = items[right]!;
        items[right] = swap;
        left++;
        right--;
      }
    }
    if (k <= right) high = right;
    else if (k >= left) low = left;
    else return items[k]!;
  }
  return items[k]!;
}

/**
 * Measured cost per call over the recent calls (see SignalState.recentCostSamples), in micro-USD;
 * undefined before any cost was reported.
 */
export function meanCost(signal: Pick<SignalState, 'recentCostSamples' | 'recentCostMicroUsd'>): number | undefined {
  return signal.recentCostSamples > 0 ? Math.round(signal.recentCostMicroUsd / signal.recentCostSamples) : undefined;
}
