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
  /** Whether this placement may keep or move the incumbent (escalations and judges do not). */
  applies: boolean;
  /** Why hysteresis does not apply, in words. */
  skippedBecause?: string;
}

export interface HysteresisVerdict {
  winner?: Candidate;
  /** The verdict in words. */
  verdict: string;
  /** The backend to store as the new incumbent; undefined leaves the stored one unchanged. */
  newIncumbent?: string;
  /** True when the incumbent was replaced because it became unfit. */
  failover: boolean;
}

function percent(value: number): string {
  return `${Math.round(value * 100)}%`;
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

/** Keeps the incumbent unless a challenger beats it by the margin; fails over at once when it is unfit. */
export function applyHysteresis(input: HysteresisInput): HysteresisVerdict {
  const [top] = input.ranked;
  if (!top) return { verdict: 'no candidate', failover: false };
  if (!input.applies) {
    return { winner: top, verdict: `not applied: ${input.skippedBecause ?? 'placement does not move the incumbent'}`, failover: false };
  }
  const incumbentName = input.incumbent;
  if (!incumbentName) {
    return { winner: top, verdict: `no incumbent yet: ${top.backend} becomes the incumbent`, newIncumbent: top.backend, failover: false };
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
      };
    }
    if (failoverReasons.has(exclusion.reasonCode)) {
      return {
        winner: top,
        verdict: `failover: incumbent ${incumbentName} is unfit (${exclusion.reasonCode}: ${exclusion.reason}); ${top.backend} takes over at once`,
        newIncumbent: top.backend,
        failover: true,
      };
    }
    return {
      winner: top,
      verdict: `incumbent ${incumbentName} cannot take this task (${exclusion.reasonCode}); ${top.backend} placed, incumbent unchanged`,
      failover: false,
    };
  }
  if (incumbent === top) return { winner: top, verdict: `incumbent ${top.backend} kept: it ranks first`, failover: false };
  const improvement = relativeImprovement(top.score, incumbent.score);
  if (improvement > input.margin) {
    return {
      winner: top,
      verdict: `challenger ${top.backend} beats incumbent ${incumbent.backend} by ${Number.isFinite(improvement) ? percent(improvement) : 'far'} (margin ${percent(input.margin)}): it becomes the incumbent`,
      newIncumbent: top.backend,
      failover: false,
    };
  }
  return {
    winner: incumbent,
    verdict: `incumbent ${incumbent.backend} kept: challenger ${top.backend} is only ${percent(improvement)} better (margin ${percent(input.margin)})`,
    failover: false,
  };
}
