import type { Candidate, Exclusion, ReasonCode } from './placement-model.js';

/**
 * Exclusions that say the incumbent itself is unfit right now (it erred and was tried, its circuit
 * is open, it is no longer ready): the incumbent is replaced at once. Other exclusions (budget,
 * capability, slots...) are about this one task and leave the incumbent in place for the next.
 */
const failoverReasons: ReadonlySet<ReasonCode> = new Set(['excluded', 'health', 'not_ready']);

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
   * Backends whose latest call failed less than a circuit cooldown ago, with how long ago in ms. Such
   * a backend may not displace a fit incumbent: right after a failover the next task stays on the
   * backend that took over instead of going straight back to the one that just failed.
   */
  recentFailures?: Map<string, number>;
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
  /** True when the incumbent was replaced because it became unfit. */
  failover: boolean;
  /** Set when a fit incumbent was kept over a higher-ranked challenger, and why. */
  kept?: { challenger: string; because: 'margin' | 'recent_failure' | 'window'; failedMsAgo?: number };
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
  // A half-open challenger's probe is not held back by the window: the circuit already kept it out for
  // a cooldown, and only a probe can tell whether it recovered.
  const windowMs = top.circuitState === 'half-open' ? 0 : (input.windowMs ?? 0);
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
    return {
      winner: top,
      verdict: `challenger ${top.backend} beats incumbent ${incumbent.backend} by ${by} and has for ${seconds(ledMs)} (window ${seconds(windowMs)}): it becomes the incumbent`,
      newIncumbent: top.backend,
      failover: false,
      challenge: null,
    };
  }
  return {
    winner: top,
    verdict: `challenger ${top.backend} beats incumbent ${incumbent.backend} by ${by}: it becomes the incumbent`,
    newIncumbent: top.backend,
    failover: false,
    challenge: null,
  };
}
