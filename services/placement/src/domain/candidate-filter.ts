import { formatUsd, worstCaseCost } from '@actor/kit';
import { circuitState, type CircuitView } from './circuit-breaker.js';
import type { Backend, Exclusion, PlacementRequest, SignalState } from './placement-model.js';

/** A backend every hard filter let through, priced, with its circuit as seen at placement time. */
export interface EligibleBackend {
  backend: Backend & { rateCard: NonNullable<Backend['rateCard']> };
  circuit: CircuitView;
}

export interface FilterContext {
  /** Signals of the request's task class, by backend. */
  signals: Map<string, SignalState>;
  now: Date;
  circuitCooldownMs: number;
  /** Half-open backends whose single probe another placement has just taken. */
  probesTaken?: Set<string>;
}

export interface FilterResult {
  eligible: EligibleBackend[];
  exclusions: Exclusion[];
  /** Set when a judge had to share the worker's model family because no other family was left. */
  sameFamilyFallback?: string;
}

type Check = (backend: Backend) => Omit<Exclusion, 'backend'> | undefined;

function list(values: string[]): string {
  return values.join(', ');
}

/**
 * The hard filters, in order; the first that refuses a backend is its recorded reason. Nothing here
 * ranks: a backend either may run the work or it may not.
 */
export function filterBackends(backends: Backend[], request: PlacementRequest, context: FilterContext): FilterResult {
  const allowed = new Set(request.allowedBackends);
  const excluded = new Set(request.excludeBackends);
  const available = new Set(request.availableBackends);
  const escalateFrom = request.escalateFromBackend
    ? backends.find((backend) => backend.type === request.escalateFromBackend)
    : undefined;
  const circuits = new Map<string, CircuitView>();
  const needed = [request.taskClass, ...request.requiredCapabilities];

  const checks: Check[] = [
    (backend) =>
      excluded.has(backend.type)
        ? { reasonCode: 'excluded', reason: 'excluded by the caller (already tried)' }
        : undefined,
    (backend) =>
      allowed.size > 0 && !allowed.has(backend.type)
        ? { reasonCode: 'not_allowed', reason: `not among the task's allowed backends (${list(request.allowedBackends)})` }
        : undefined,
    (backend) =>
      backend.ready ? undefined : { reasonCode: 'not_ready', reason: `not ready: ${backend.readyReason || 'prerequisites missing'}` },
    (backend) => trustRefusal(backend, request, allowed),
    (backend) => {
      if (needed.every((capability) => backend.capabilities.includes(capability))) return undefined;
      const missing = needed.filter((capability) => !backend.capabilities.includes(capability));
      return { reasonCode: 'capability', reason: `lacks ${list(missing)}` };
    },
    (backend) =>
      backend.contextTokens > 0 && request.estimatedInputTokens > backend.contextTokens
        ? {
            reasonCode: 'limits',
            reason: `about ${request.estimatedInputTokens} input tokens exceed its context of ${backend.contextTokens}`,
          }
        : undefined,
    (backend) =>
      backend.requiresByoKey
        ? { reasonCode: 'byo_key', reason: 'requires the task to bring its own key, and none was supplied' }
        : undefined,
    (backend) =>
      available.size > 0 && !available.has(backend.type)
        ? { reasonCode: 'no_slot', reason: 'no enabled pool slot serves it' }
        : undefined,
    (backend) => {
      const circuit = circuitState(context.signals.get(backend.type), context.now, context.circuitCooldownMs);
      circuits.set(backend.type, circuit);
      if (circuit.state === 'open') {
        const seconds = Math.max(1, Math.ceil((circuit.halfOpenAt!.getTime() - context.now.getTime()) / 1000));
        return {
          reasonCode: 'health',
          reason: `circuit open for ${request.taskClass} after repeated failures (half-open in ${seconds} s)`,
        };
      }
      if (circuit.state === 'half-open' && (!circuit.probeAvailable || context.probesTaken?.has(backend.type))) {
        return { reasonCode: 'health', reason: 'circuit half-open: its one probe call is already in flight' };
      }
      return undefined;
    },
    (backend) => budgetRefusal(backend, request),
    (backend) => {
      if (!request.escalateFromBackend || !escalateFrom) return undefined;
      return backend.qualityTier > escalateFrom.qualityTier
        ? undefined
        : {
            reasonCode: 'not_stronger',
            reason: `tier ${backend.qualityTier} is not above ${escalateFrom.type}'s tier ${escalateFrom.qualityTier}`,
          };
    },
  ];

  const exclusions: Exclusion[] = [];
  let passed: Backend[] = [];
  for (const backend of backends) {
    let refusal: Omit<Exclusion, 'backend'> | undefined;
    for (const check of checks) {
      refusal = check(backend);
      if (refusal) break;
    }
    if (refusal) exclusions.push({ backend: backend.type, ...refusal });
    else passed.push(backend);
  }

  // A judge of another family is a preference, not a hard rule: judging with the same family beats
  // not verifying at all, and the explanation says so.
  let sameFamilyFallback: string | undefined;
  const avoid = request.avoidModelFamily;
  if (avoid && passed.some((backend) => backend.modelFamily === avoid)) {
    const others = passed.filter((backend) => backend.modelFamily !== avoid);
    if (others.length > 0) {
      for (const backend of passed) {
        if (backend.modelFamily === avoid) {
          exclusions.push({
            backend: backend.type,
            reasonCode: 'same_family',
            reason: `same model family (${avoid}) as the work it would judge`,
          });
        }
      }
      passed = others;
    } else {
      sameFamilyFallback = avoid;
    }
  }

  return {
    eligible: passed.map((backend) => ({
      backend: backend as EligibleBackend['backend'],
      circuit: circuits.get(backend.type)!,
    })),
    exclusions,
    sameFamilyFallback,
  };
}

/**
 * User-owned backends run on the user's infrastructure, so they are placed only when the task names
 * them. Private mode admits nothing else but first-party ones; anything unknown fails closed.
 */
function trustRefusal(backend: Backend, request: PlacementRequest, allowed: Set<string>): Omit<Exclusion, 'backend'> | undefined {
  if (backend.trust === 'user-owned') {
    return allowed.has(backend.type)
      ? undefined
      : { reasonCode: 'trust', reason: 'user-owned backend not named by the task' };
  }
  if (request.mode === 'private' && backend.trust !== 'first-party') {
    return { reasonCode: 'trust', reason: `private mode admits first-party backends only; this one is ${backend.trust}` };
  }
  return undefined;
}

/** Money in a budget refusal: rounded for people, exact for when the rounded amounts look equal. */
function amount(microUsd: number): string {
  return `${formatUsd(microUsd)} (${microUsd} micro-USD)`;
}

function budgetRefusal(backend: Backend, request: PlacementRequest): Omit<Exclusion, 'backend'> | undefined {
  if (!backend.rateCard) return { reasonCode: 'not_ready', reason: 'no rate card: it cannot be priced' };
  const worstCase = worstCaseCost(backend.rateCard, backend, request.estimatedInputTokens);
  const taskLeft = Math.max(0, request.taskBudgetLeftMicroUsd);
  const dayLeft = Math.max(0, request.dayBudgetLeftMicroUsd);
  if (worstCase > taskLeft) {
    return { reasonCode: 'budget', reason: `worst case ${amount(worstCase)} exceeds the ${amount(taskLeft)} left for the task` };
  }
  if (worstCase > dayLeft) {
    return { reasonCode: 'budget', reason: `worst case ${amount(worstCase)} exceeds the ${amount(dayLeft)} left today` };
  }
  return undefined;
}
