import { formatUsd } from '@actor/kit';
import { MIN_CHALLENGER_SAMPLES, type HysteresisVerdict } from './hysteresis.js';
import type { Candidate, Exclusion, PlacementRequest } from './placement-model.js';

const EXCLUSIONS_NAMED = 4;

function percent(value: number): string {
  return `${Math.round(value * 100)}%`;
}

function seconds(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** "2 backends excluded (a: budget, b: capability)", or "" when none was. */
export function summariseExclusions(exclusions: Array<Pick<Exclusion, 'backend'> & { reasonCode: string }>): string {
  if (exclusions.length === 0) return '';
  const named = exclusions.slice(0, EXCLUSIONS_NAMED).map((item) => `${item.backend}: ${item.reasonCode}`);
  const more = exclusions.length > EXCLUSIONS_NAMED ? `, and ${exclusions.length - EXCLUSIONS_NAMED} more` : '';
  return `${exclusions.length} backend${exclusions.length === 1 ? '' : 's'} excluded (${named.join(', ')}${more})`;
}

function why(request: PlacementRequest, winner: Candidate): string {
  const cost = formatUsd(winner.expectedCostMicroUsd);
  switch (request.mode) {
    case 'cheapest':
    {
      const perSuccess = winner.signals.find((signal) => signal.name === 'cost_per_verified_success_micro_usd')?.value
        ?? winner.expectedCostMicroUsd / Math.max(winner.successEstimate, 1e-6);
      return `lowest expected cost per verified success counting escalations, ${formatUsd(Math.round(perSuccess))} (${cost} a call at ${percent(winner.successEstimate)} estimated success)`;
    }
    case 'fastest':
      return `lowest expected latency (${seconds(winner.expectedLatencyMs)})`;
    case 'best':
      return `highest estimated verified success for ${request.taskClass} (${percent(winner.successEstimate)}, tier ${winner.qualityTier}, ${cost} expected)`;
    case 'balanced':
    case 'private':
      return `best blend of estimated success (${percent(winner.successEstimate)}), expected cost (${cost}) and latency (${seconds(winner.expectedLatencyMs)})`;
  }
}

export interface ExplanationInput {
  request: PlacementRequest;
  winner?: Candidate;
  ranked: Candidate[];
  exclusions: Exclusion[];
  hysteresis: HysteresisVerdict;
  sameFamilyFallback?: string;
}

/** The decision in one or two sentences, for the person reading the task. */
export function explainDecision(input: ExplanationInput): string {
  const { request, winner, exclusions } = input;
  const excluded = summariseExclusions(exclusions);
  const judged = request.purpose === 'judge' ? ' as judge' : '';
  if (!winner) {
    return `No backend can take this ${request.taskClass} ${request.purpose === 'judge' ? 'judge call' : 'task'} under ${request.mode}${request.mode === 'private' ? ' (private mode fails closed)' : ''}: ${excluded || 'no backend is declared'}.`;
  }
  const name = `${winner.backend}${winner.demo ? ' (demo backend)' : ''}`;
  const kept = input.hysteresis.kept;
  const reason = !kept
    ? why(request, winner)
    : kept.because === 'recent_failure'
      ? `kept as the incumbent (${kept.challenger} ranks higher but failed ${Math.round((kept.failedMsAgo ?? 0) / 1000)} s ago)`
      : kept.because === 'window'
        ? `kept as the incumbent (${kept.challenger} beats it by the hysteresis margin, but not yet for the whole window)`
        : `kept as the incumbent (${kept.challenger} was within the hysteresis margin)`;
  const scope = request.mode === 'private' ? ' among first-party backends' : '';
  const first = `${name} won under ${request.mode}${judged}${scope}: ${reason}${excluded ? `; ${excluded}` : ''}.`;
  const notes: string[] = [];
  if (input.hysteresis.failover) notes.push(`Failover: ${input.hysteresis.verdict.replace(/^failover: /, '')}`);
  if (request.escalateFromBackend) notes.push(`Escalated from ${request.escalateFromBackend} to a stronger tier (${winner.qualityTier})`);
  if (input.sameFamilyFallback) {
    notes.push(`No backend of another model family was left, so the judge shares the worker's family (${input.sameFamilyFallback})`);
  } else if (request.avoidModelFamily) {
    notes.push(`The judge's family (${winner.modelFamily}) differs from the worker's (${request.avoidModelFamily})`);
  }
  if (input.hysteresis.trial) {
    const { challenger, samples } = input.hysteresis.trial;
    notes.push(`Trial of ${challenger} (${samples} of ${MIN_CHALLENGER_SAMPLES} outcomes) before it may take over; the incumbent stays`);
  }
  if (winner.circuitState === 'half-open') notes.push('Its circuit is half-open: this call is the probe');
  return notes.length > 0 ? `${first} ${notes.join('; ')}.` : first;
}
