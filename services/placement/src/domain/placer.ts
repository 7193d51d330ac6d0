import { filterBackends } from './candidate-filter.js';
import { applyHysteresis, failureBackoffMs, type Challenge } from './hysteresis.js';
import { explainDecision } from './explanation.js';
import { estimate, objectiveText, rankCandidates } from './objectives.js';
import type { Backend, Candidate, Exclusion, PlacementRequest, SignalState } from './placement-model.js';

export interface PlacementInput {
  request: PlacementRequest;
  backends: Backend[];
  /** Signals of the request's task class, by backend. */
  signals: Map<string, SignalState>;
  /** The stored incumbent of the request's project x task class x mode x purpose. */
  incumbent?: string;
  now: Date;
  circuitCooldownMs: number;
  hysteresisMargin: number;
  /** How long a challenger must lead by the margin before it takes over, in ms; 0 or absent = at once. */
  hysteresisWindowMs?: number;
  /** The stored challenger of the incumbent, if any. */
  challenge?: Challenge;
  /** Half-open backends whose single probe another placement has just taken. */
  probesTaken?: Set<string>;
}

export interface PlacementResult {
  /** Absent when nothing was placeable. */
  winner?: Candidate;
  /** Every candidate, the winner first, then the others best first. */
  candidates: Candidate[];
  exclusions: Exclusion[];
  objective: string;
  hysteresis: string;
  explanation: string;
  /** The backend to store as incumbent; undefined leaves it unchanged. */
  newIncumbent?: string;
  /** The challenge to store: a value, null to clear it, undefined to leave it unchanged. */
  challenge?: Challenge | null;
  /** When the newest signal used was written; undefined when no signal existed. */
  signalsTime?: Date;
}

/**
 * One placement decision, computed without I/O: hard filters, estimates, the mode's objective,
 * hysteresis, and the explanation. The service feeds it what the registry and the database know.
 */
export function decidePlacement(input: PlacementInput): PlacementResult {
  const { request } = input;
  const filtered = filterBackends(input.backends, request, {
    signals: input.signals,
    now: input.now,
    circuitCooldownMs: input.circuitCooldownMs,
    probesTaken: input.probesTaken,
  });
  const estimates = filtered.eligible.map((item) =>
    estimate(item.backend, input.signals.get(item.backend.type), request.estimatedInputTokens, item.circuit.state),
  );
  const ranked = rankCandidates(request.mode, estimates);
  const skippedBecause = request.escalateFromBackend
    ? 'an escalation does not move the incumbent'
    : request.purpose === 'judge'
      ? 'a judge placement does not move the incumbent'
      : undefined;
  const nowMs = input.now.getTime();
  const recentFailures = new Map<string, number>();
  let newestSignalMs: number | undefined;
  for (const signal of input.signals.values()) {
    const updatedMs = signal.updatedAt.getTime();
    if (newestSignalMs === undefined || updatedMs > newestSignalMs) newestSignalMs = updatedMs;
    const failedMsAgo = Math.max(0, nowMs - updatedMs);
    if (failedMsAgo < failureBackoffMs(signal.consecutiveFailures, input.circuitCooldownMs)) {
      recentFailures.set(signal.backend, failedMsAgo);
    }
  }
  // Hysteresis looks up one or two backends' evidence, so it reads the signals instead of a copy of them.
  const evidence = { get: (backend: string) => input.signals.get(backend)?.workSamples };
  const verdict = applyHysteresis({
    ranked,
    exclusions: filtered.exclusions,
    incumbent: input.incumbent,
    margin: input.hysteresisMargin,
    applies: skippedBecause === undefined,
    skippedBecause,
    recentFailures,
    evidence,
    windowMs: input.hysteresisWindowMs,
    challenge: input.challenge,
    now: input.now,
  });
  const winner = verdict.winner;
  const candidates = winner ? [winner, ...ranked.filter((candidate) => candidate !== winner)] : ranked;
  return {
    winner,
    candidates,
    exclusions: filtered.exclusions,
    objective: objectiveText[request.mode],
    hysteresis: verdict.verdict,
    explanation: explainDecision({
      request,
      winner,
      ranked,
      exclusions: filtered.exclusions,
      hysteresis: verdict,
      sameFamilyFallback: filtered.sameFamilyFallback,
    }),
    newIncumbent: verdict.newIncumbent,
    challenge: verdict.challenge,
    signalsTime: newestSignalMs === undefined ? undefined : new Date(newestSignalMs),
  };
}
