import { priceUsage, worstCaseCost } from '@actor/kit';
import type { CircuitStateName, Backend, Candidate, ModeName, SignalScore, SignalState } from './placement-model.js';
import { meanCost, percentile } from './signal-update.js';

/**
 * The modes as objectives over estimates. Every estimate comes from the backend's declaration (the
 * prior) corrected by what placement has observed for the task class (the signals):
 *
 * - success_estimate: the mean of a Beta posterior. The prior mean is 0.45 + 0.1 x quality tier
 *   (tier 1 = 0.55 .. tier 5 = 0.95) with the weight of PRIOR_WEIGHT outcomes, so a new backend is
 *   neither ignored nor trusted blindly:
 *       (prior_mean x PRIOR_WEIGHT + verified_successes) / (PRIOR_WEIGHT + work_samples)
 * - expected_cost_micro_usd: the rate card applied to the estimated input tokens plus
 *   EXPECTED_OUTPUT_SHARE of the declared maximum output (and the expected latency for per-second
 *   prices), capped by the measured mean cost once outcomes have reported costs.
 * - expected_latency_ms: the p50 of the rolling latency window once there is one, before that a prior
 *   of 1000 ms x quality tier (stronger backends are assumed slower), capped by the declared timeout.
 *
 * Scores (higher is better):
 * - cheapest: -(chain_cost / chain_success), the expected cost of one verified success when a rejected
 *   answer escalates, as the engine does, to a strictly stronger backend (see escalationChains):
 *       chain_cost(b)    = expected_cost(b) + (1 - success_estimate(b)) x chain_cost(next(b))
 *       chain_success(b) = success_estimate(b) + (1 - success_estimate(b)) x chain_success(next(b))
 *   where next(b) is the candidate of a strictly higher tier with the lowest chain_cost / chain_success
 *   (none for the highest tier: chain_cost = expected_cost, chain_success = success_estimate). A cheap
 *   backend that often fails is charged for the stronger call that follows its failures, and a cheap
 *   backend whose failures escalate to a good, cheap next step is not penalised as if a failure were
 *   simply lost;
 * - fastest:  -expected_latency_ms;
 * - best:     success_estimate (cost breaks ties, see compareCandidates);
 * - balanced: BALANCED_WEIGHTS.success x success_estimate
 *           + BALANCED_WEIGHTS.cost    x (1 - expected_cost / highest expected_cost among candidates)
 *           + BALANCED_WEIGHTS.latency x (1 - expected_latency / highest expected_latency among candidates)
 *   a number in 0..1; costs and latencies are normalised over the candidates of this placement;
 * - private:  balanced (over the first-party/named user-owned set the trust filter leaves).
 *
 * Each candidate's `signals` lists every estimate with its contribution; contributions sum to the score.
 */

export const PRIOR_WEIGHT = 4;
export const EXPECTED_OUTPUT_SHARE = 0.25;
export const PRIOR_LATENCY_MS_PER_TIER = 1_000;
export const BALANCED_WEIGHTS = { success: 0.6, cost: 0.25, latency: 0.15 } as const;

/** The objective of each mode, in words (stored on the decision). */
export const objectiveText: Record<ModeName, string> = {
  cheapest: 'lowest expected cost per verified success, counting the escalations that follow a rejected answer',
  fastest: 'lowest expected latency',
  best: 'highest estimated verified-success rate for the task class, cost as tie-break',
  balanced: `balanced blend: ${BALANCED_WEIGHTS.success} x success estimate + ${BALANCED_WEIGHTS.cost} x relative cheapness + ${BALANCED_WEIGHTS.latency} x relative speed`,
  private: `balanced blend over first-party (and named user-owned) backends only`,
};

/** The prior mean of a backend's verified-success rate from its declared tier. */
export function priorSuccess(qualityTier: number): number {
  return Math.min(0.95, Math.max(0.05, 0.45 + 0.1 * qualityTier));
}

/** The Beta-posterior mean of the verified-success rate from a prior mean and the observed outcomes. */
export function posteriorSuccess(
  priorMean: number,
  signal: Pick<SignalState, 'recentVerified' | 'recentWork'> | undefined,
): number {
  const verified = signal?.recentVerified ?? 0;
  const samples = signal?.recentWork ?? 0;
  return (priorMean * PRIOR_WEIGHT + verified) / (PRIOR_WEIGHT + samples);
}

/** The smoothed verified-success estimate of a backend of the given tier, 0..1. */
export function successEstimate(
  qualityTier: number,
  signal: Pick<SignalState, 'recentVerified' | 'recentWork'> | undefined,
): number {
  return posteriorSuccess(priorSuccess(qualityTier), signal);
}

/** What a candidate is expected to do, before any objective is applied. */
export interface Estimate {
  backend: Backend;
  successEstimate: number;
  expectedCostMicroUsd: number;
  worstCaseCostMicroUsd: number;
  expectedLatencyMs: number;
  /** Latency came from observed calls (not from the tier prior). */
  latencyObserved: boolean;
  circuitState: CircuitStateName;
}

/** The estimates of one priced backend for a request of `inputTokens` tokens. */
export function estimate(
  backend: Backend & { rateCard: NonNullable<Backend['rateCard']> },
  signal: SignalState | undefined,
  inputTokens: number,
  circuit: CircuitStateName,
): Estimate {
  const latencyObserved = (signal?.latenciesMs.length ?? 0) > 0;
  let expectedLatencyMs = latencyObserved
    ? percentile(signal!.latenciesMs, 0.5)
    : PRIOR_LATENCY_MS_PER_TIER * Math.max(1, backend.qualityTier);
  if (!latencyObserved && backend.timeoutMs > 0) expectedLatencyMs = Math.min(expectedLatencyMs, backend.timeoutMs);
  const priced = priceUsage(backend.rateCard, {
    inputTokens,
    outputTokens: Math.round(backend.maxOutputTokens * EXPECTED_OUTPUT_SHARE),
    durationMs: backend.rateCard.microUsdPerSecond > 0 ? expectedLatencyMs : 0,
    calls: 1,
  });
  const measured = signal ? meanCost(signal) : undefined;
  return {
    backend,
    successEstimate: successEstimate(backend.qualityTier, signal),
    expectedCostMicroUsd: measured === undefined ? priced : Math.min(priced, measured),
    worstCaseCostMicroUsd: worstCaseCost(backend.rateCard, backend, inputTokens),
    expectedLatencyMs: Math.round(expectedLatencyMs),
    latencyObserved,
    circuitState: circuit,
  };
}

/** A candidate's escalation chain under cheapest: what it and the escalations after its failures cost. */
export interface EscalationChain {
  /** Expected cost of the call plus, weighted by the chance it fails, the chain that follows, micro-USD. */
  costMicroUsd: number;
  /** Chance that the chain ends with a verified success, 0..1. */
  success: number;
  /** The backend an escalation after this one's failure is expected to go to; undefined at the top tier. */
  next?: string;
}

/**
 * Every estimate's escalation chain (see the cheapest objective above), computed from the highest tier
 * down so that each tier reuses the best chain among strictly higher tiers: O(n log n) for n candidates.
 */
export function escalationChains(estimates: Estimate[]): EscalationChain[] {
  const order = estimates.map((_, index) => index).sort((left, right) => estimates[right]!.backend.qualityTier - estimates[left]!.backend.qualityTier);
  const chains: EscalationChain[] = new Array(estimates.length);
  let best: { chain: EscalationChain; backend: string; perSuccess: number } | undefined;
  for (let start = 0; start < order.length; ) {
    const tier = estimates[order[start]!]!.backend.qualityTier;
    let end = start;
    while (end < order.length && estimates[order[end]!]!.backend.qualityTier === tier) end++;
    // Every candidate of this tier escalates to the best chain of the strictly higher tiers seen so far.
    const next = best;
    for (let position = start; position < end; position++) {
      const index = order[position]!;
      const item = estimates[index]!;
      const fail = 1 - item.successEstimate;
      chains[index] = {
        costMicroUsd: item.expectedCostMicroUsd + (next ? fail * next.chain.costMicroUsd : 0),
        success: item.successEstimate + (next ? fail * next.chain.success : 0),
        next: next?.backend,
      };
    }
    for (let position = start; position < end; position++) {
      const index = order[position]!;
      const chain = chains[index]!;
      const perSuccess = chain.costMicroUsd / Math.max(chain.success, 1e-6);
      if (!best || perSuccess < best.perSuccess) best = { chain, backend: estimates[index]!.backend.type, perSuccess };
    }
    start = end;
  }
  return chains;
}

function signalScore(name: string, value: number, contribution = 0): SignalScore {
  return { name, value, contribution };
}

/** Scores every estimate under the mode's objective and returns candidates, best first. */
export function rankCandidates(mode: ModeName, estimates: Estimate[]): Candidate[] {
  let highestCost = 0;
  let highestLatency = 0;
  for (const item of estimates) {
    highestCost = Math.max(highestCost, item.expectedCostMicroUsd);
    highestLatency = Math.max(highestLatency, item.expectedLatencyMs);
  }
  const chains = mode === 'cheapest' ? escalationChains(estimates) : undefined;
  const candidates = estimates.map((item, index): Candidate => {
    const success = signalScore('success_estimate', item.successEstimate);
    const cost = signalScore('expected_cost_micro_usd', item.expectedCostMicroUsd);
    const latency = signalScore('expected_latency_ms', item.expectedLatencyMs);
    // Each list is built at its final length: growing it by push costs more than the scores it holds.
    let signals: SignalScore[];
    switch (mode) {
      case 'cheapest': {
        const chain = chains![index]!;
        const perSuccess = chain.costMicroUsd / Math.max(chain.success, 1e-6);
        signals = [
          success,
          cost,
          latency,
          signalScore('chain_cost_micro_usd', chain.costMicroUsd),
          signalScore('chain_success_estimate', chain.success),
          signalScore('cost_per_verified_success_micro_usd', perSuccess, -perSuccess),
        ];
        break;
      }
      case 'fastest':
        latency.contribution = -item.expectedLatencyMs;
        signals = [success, cost, latency];
        break;
      case 'best':
        success.contribution = item.successEstimate;
        signals = [success, cost, latency];
        break;
      case 'balanced':
      case 'private':
        success.contribution = BALANCED_WEIGHTS.success * item.successEstimate;
        cost.contribution =
          BALANCED_WEIGHTS.cost * (highestCost > 0 ? 1 - item.expectedCostMicroUsd / highestCost : 1);
        latency.contribution =
          BALANCED_WEIGHTS.latency * (highestLatency > 0 ? 1 - item.expectedLatencyMs / highestLatency : 1);
        signals = [success, cost, latency];
        break;
    }
    // Summed in list order, from 0, so that the score is exactly the sum a reader of the breakdown gets.
    let score = 0;
    for (const signal of signals) score += signal.contribution;
    return {
      backend: item.backend.type,
      modelFamily: item.backend.modelFamily,
      qualityTier: item.backend.qualityTier,
      demo: item.backend.demo,
      score,
      signals,
      expectedCostMicroUsd: item.expectedCostMicroUsd,
      worstCaseCostMicroUsd: item.worstCaseCostMicroUsd,
      expectedLatencyMs: item.expectedLatencyMs,
      successEstimate: item.successEstimate,
      rateCardRevision: item.backend.rateCard!.revision,
      circuitState: item.circuitState,
    };
  });
  return candidates.sort(compareCandidates);
}

/**
 * Best first: higher score; then (ties) lower expected cost, higher success estimate, lower latency,
 * and the backend name so that equal candidates always rank the same way.
 */
export function compareCandidates(left: Candidate, right: Candidate): number {
  return (
    right.score - left.score ||
    left.expectedCostMicroUsd - right.expectedCostMicroUsd ||
    right.successEstimate - left.successEstimate ||
    left.expectedLatencyMs - right.expectedLatencyMs ||
    (left.backend < right.backend ? -1 : left.backend > right.backend ? 1 : 0)
  );
}
