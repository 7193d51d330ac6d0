import type { Candidate, Exclusion, ReasonCode } from './placement-model.js';

/**
 * Exclusions that say the incumbent itself is unfit for a while (its circuit is open, it is no longer
 * ready): the incumbent is replaced at once. `excluded` (this task already tried it: it erred or its
 * answer was rejected) only makes this task fail over to a stand-in; whether the incumbent stays is
 * then up to its circuit and its failure backoff (see `recentFailures`), so one transient error does
 * not move the incumbent. Other exclusions (budget, capability, slots...) are about this one task too.
 */
const failoverReasons: ReadonlySet<ReasonCode> = new Set(['health', 'not_ready']);

/** Observed work outcomes a challenger needs for the task class before it may displace an incumbent. */
export const MIN_CHALLENGER_SAMPLES = 5;

export interface HysteresisInput {
  /** Candidates, best first. */
  ranked: Candidate[];
  exclusions: Exclusion[];
  /** The stored incumbent of this project x task class x mode x purpose, if any. */
  incumbent?: string;
  /** Relative score improvement a challenger needs, e.g. 0.1 = 10%. */
  margin: number;
  /**
   * How long, in ms, the same challenger must keep beating the incumbent by the margin before it takes
   * over; 0 = at once. Measured from `challenge.since` to `now`.
   */
  windowMs?: number;
  /** The challenger stored as leading by the margin since some time, if any. */
  challenge?: Challenge;
  now?: Date;
  /** Whether this placement may keep or move the incumbent (escalations and judges do not). */
  applies: boolean;
  /** Why hysteresis does not apply, in words. */
  skippedBecause?: string;
  /**
   * Backends still inside their failure backoff (see failureBackoffMs), with how long ago their latest
   * call failed, in ms. Such a backend is suspect: a suspect incumbent is stood in for by the best
   * candidate that is not suspect (the incumbent stays incumbent), and a suspect challenger may not
   * displace a fit incumbent.
   */
  recentFailures?: Map<string, number>;
  /**
   * Observed work outcomes per backend for the task class (the smoothed estimate's sample count). A
   * challenger with fewer than MIN_CHALLENGER_SAMPLES that has led for the window gets trial placements
   * (the incumbent stays) until it has them; absent = every challenger counts as having enough.
   */
  evidence?: Pick<ReadonlyMap<string, number>, 'get'>;
}

/** A challenger that has beaten the incumbent by the margin at every placement since `since`. */
export interface Challenge {
  backend: string;
  since: Date;
}

export interface HysteresisVerdict {
  winner?: Candidate;
  /** The verdict in words. */
  verdict: string;
  /** The backend to store as the new incumbent; undefined leaves the stored one unchanged. */
  newIncumbent?: string;
  /**
   * True when this placement moved away from an incumbent that is unfit: replaced (circuit open, not
   * ready, undeclared) or stood in for (tried by this task, or suspect after a recent failure).
   */
  failover: boolean;
  /** Set when a fit incumbent was kept over a higher-ranked challenger, and why. */
  kept?: { challenger: string; because: 'margin' | 'recent_failure' | 'window'; failedMsAgo?: number };
  /** Set when the challenger got this task as a trial to gather evidence; the incumbent stays. */
  trial?: { challenger: string; samples: number };
  /**
   * The challenge to store: a value to store, null to clear the stored one, undefined to leave it as
   * it is (placements that do not apply hysteresis).
   */
  challenge?: Challenge | null;
}

function percent(value: number): string {
  return `${Math.round(value * 100)}%`;
}

function seconds(ms: number): string {
  return `${Math.max(0, Math.round(ms / 1000))} s`;
}

/**
 * How much better `challenger` scores than `incumbent`, relative to the incumbent's score. Scores
 * can be negative (cheapest and fastest score minus a cost or a latency), hence the absolute value.
 */
export function relativeImprovement(challenger: number, incumbent: number): number {
  if (challenger <= incumbent) return 0;
  if (incumbent === 0) return Number.POSITIVE_INFINITY;
  return (challenger - incumbent) / Math.abs(incumbent);
}

/**
 * Keeps the incumbent unless a challenger beats it by the margin at every placement over the window;
 * fails over at once when the incumbent is unfit.
 */
export function applyHysteresis(input: HysteresisInput): HysteresisVerdict {
  const [top] = input.ranked;
  if (!top) return { verdict: 'no candidate', failover: false };
  if (!input.applies) {
    return { winner: top, verdict: `not applied: ${input.skippedBecause ?? 'placement does not move the incumbent'}`, failover: false };
  }
  const incumbentName = input.incumbent;
  if (!incumbentName) {
    return { winner: top, verdict: `no incumbent yet: ${top.backend} becomes the incumbent`, newIncumbent: top.backend, failover: false, challenge: null };
  }
  const incumbent = input.ranked.find((candidate) => candidate.backend === incumbentName);
  if (!incumbent) {
    const exclusion = input.exclusions.find((item) => item.backend === incumbentName);
    if (!exclusion) {
      return {
        winner: top,
        verdict: `incumbent ${incumbentName} is no longer declared: ${top.backend} becomes the incumbent`,
        newIncumbent: top.backend,
        failover: true,
        challenge: null,
      };
    }
    if (exclusion.reasonCode === 'excluded') {
      return {
        winner: top,
        verdict: `failover: incumbent ${incumbentName} was already tried by this task; ${top.backend} stands in, incumbent unchanged`,
        failover: true,
      };
    }
    if (failoverReasons.has(exclusion.reasonCode)) {
      return {
        winner: top,
        verdict: `failover: incumbent ${incumbentName} is unfit (${exclusion.reasonCode}: ${exclusion.reason}); ${top.backend} takes over at once`,
        newIncumbent: top.backend,
        failover: true,
        challenge: null,
      };
    }
    return {
      winner: top,
      verdict: `incumbent ${incumbentName} cannot take this task (${exclusion.reasonCode}); ${top.backend} placed, incumbent unchanged`,
      failover: false,
    };
  }
  const incumbentFailedMsAgo = input.recentFailures?.get(incumbent.backend);
  if (incumbentFailedMsAgo !== undefined) {
    const standIn = input.ranked.find((candidate) => candidate !== incumbent && !input.recentFailures!.has(candidate.backend));
    if (standIn) {
      return {
        winner: standIn,
        verdict: `failover: incumbent ${incumbent.backend} failed ${seconds(incumbentFailedMsAgo)} ago and is inside its failure backoff; ${standIn.backend} stands in, incumbent unchanged`,
        failover: true,
      };
    }
  }
  if (incumbent === top) return { winner: top, verdict: `incumbent ${top.backend} kept: it ranks first`, failover: false, challenge: null };
  const failedMsAgo = input.recentFailures?.get(top.backend);
  if (failedMsAgo !== undefined) {
    return {
      winner: incumbent,
      verdict: `incumbent ${incumbent.backend} kept: challenger ${top.backend} failed ${seconds(failedMsAgo)} ago and may not displace it until a cooldown has passed`,
      failover: false,
      kept: { challenger: top.backend, because: 'recent_failure', failedMsAgo },
      challenge: null,
    };
  }
  if (top.circuitState === 'half-open') {
    // The probe tells whether the backend recovered; it takes over only later, as any challenger, once
    // a success has closed its circuit.
    return {
      winner: top,
      verdict: `probe: challenger ${top.backend} is half-open and gets this task as its one probe call; incumbent ${incumbent.backend} unchanged`,
      failover: false,
    };
  }
  const improvement = relativeImprovement(top.score, incumbent.score);
  const by = `${Number.isFinite(improvement) ? percent(improvement) : 'far'} (margin ${percent(input.margin)})`;
  if (improvement <= input.margin) {
    return {
      winner: incumbent,
      verdict: `incumbent ${incumbent.backend} kept: challenger ${top.backend} is only ${percent(improvement)} better (margin ${percent(input.margin)})`,
      failover: false,
      kept: { challenger: top.backend, because: 'margin' },
      challenge: null,
    };
  }
  const windowMs = input.windowMs ?? 0;
  if (windowMs > 0) {
    const now = input.now ?? new Date();
    const since = input.challenge?.backend === top.backend && input.challenge.since <= now ? input.challenge.since : now;
    const ledMs = now.getTime() - since.getTime();
    if (ledMs < windowMs) {
      return {
        winner: incumbent,
        verdict: `incumbent ${incumbent.backend} kept: challenger ${top.backend} beats it by ${by}, but only for ${seconds(ledMs)} of the ${seconds(windowMs)} window (since ${since.toISOString()})`,
        failover: false,
        kept: { challenger: top.backend, because: 'window' },
        challenge: { backend: top.backend, since },
      };
    }
    const trial = evidenceShort(input, top, incumbent, by);
    if (trial) return { ...trial, challenge: { backend: top.backend, since } };
    return {
      winner: top,
      verdict: `challenger ${top.backend} beats incumbent ${incumbent.backend} by ${by} and has for ${seconds(ledMs)} (window ${seconds(windowMs)}): it becomes the incumbent`,
      newIncumbent: top.backend,
      failover: false,
      challenge: null,
    };
  }
  const trial = evidenceShort(input, top, incumbent, by);
  if (trial) return trial;
  return {
    winner: top,
    verdict: `challenger ${top.backend} beats incumbent ${incumbent.backend} by ${by}: it becomes the incumbent`,
    newIncumbent: top.backend,
    failover: false,
    challenge: null,
  };
}

/**
 * A challenger that has earned the switch by margin and window but has fewer than
 * MIN_CHALLENGER_SAMPLES observed outcomes gets this task as a trial: its estimate is still mostly
 * prior, so it must prove itself before the incumbent moves.
 */
function evidenceShort(input: HysteresisInput, top: Candidate, incumbent: Candidate, by: string): HysteresisVerdict | undefined {
  if (!input.evidence) return undefined;
  const samples = input.evidence.get(top.backend) ?? 0;
  if (samples >= MIN_CHALLENGER_SAMPLES) return undefined;
  return {
    winner: top,
    verdict: `trial: challenger ${top.backend} beats incumbent ${incumbent.backend} by ${by} but has ${samples} of the ${MIN_CHALLENGER_SAMPLES} outcomes needed to take over; it gets this task, incumbent unchanged`,
    failover: false,
    trial: { challenger: top.backend, samples },
  };
}

/**
 * How long after its latest failure a backend stays suspect: one circuit cooldown, whatever the count
 * (the FAILURES_TO_OPEN-th failure in a row opens the circuit instead). Long enough that the next task
 * after an outage's first error fails over even when the class's tasks come tens of seconds apart;
 * 0 when it has not failed.
 */
export function failureBackoffMs(consecutiveFailures: number, cooldownMs: number): number {
  return consecutiveFailures > 0 ? cooldownMs : 0;
}
