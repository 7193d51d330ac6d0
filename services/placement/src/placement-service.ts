import { randomUUID } from 'node:crypto';
import { fail, newId, type Logger } from '@actor/kit';
import {
  Decision,
  Mode,
  Purpose,
  type BackendSignal,
  type PlaceRequest,
  type PlacementServiceImplementation,
} from '@actor/proto/placement';
import type { AdapterCatalog } from './adapter-catalog.js';
import { backendFromAdapter } from './domain/adapter-backend.js';
import type { DecisionRow, IncumbentKey, PlacementRepository } from './db/placement-repository.js';
import { circuitState } from './domain/circuit-breaker.js';
import { summariseExclusions } from './domain/explanation.js';
import { posteriorSuccess, priorSuccess } from './domain/objectives.js';
import type { Backend, ModeName, PlacementRequest, PurposeName, SignalState, TrustName } from './domain/placement-model.js';
import { decidePlacement, type PlacementResult } from './domain/placer.js';
import { applyOutcome, meanCost, percentile } from './domain/signal-update.js';

const modeNames: Partial<Record<Mode, ModeName>> = {
  [Mode.MODE_UNSPECIFIED]: 'balanced',
  [Mode.MODE_BALANCED]: 'balanced',
  [Mode.MODE_CHEAPEST]: 'cheapest',
  [Mode.MODE_BEST]: 'best',
  [Mode.MODE_FASTEST]: 'fastest',
  [Mode.MODE_PRIVATE]: 'private',
};

/** A neutral prior for a backend the registry no longer declares (its tier is unknown). */
const UNKNOWN_BACKEND_PRIOR = 0.5;

function decodePlaceRequest(request: PlaceRequest): PlacementRequest {
  const mode = modeNames[request.mode];
  if (!mode) throw fail.invalid(`unknown mode ${request.mode}`);
  if (request.purpose !== Purpose.PURPOSE_UNSPECIFIED && request.purpose !== Purpose.PURPOSE_WORK && request.purpose !== Purpose.PURPOSE_JUDGE) {
    throw fail.invalid(`unknown purpose ${request.purpose}`);
  }
  if (!request.projectId) throw fail.invalid('project_id is required');
  if (!request.taskClass) throw fail.invalid('task_class is required');
  if (request.estimatedInputTokens < 0) throw fail.invalid('estimated_input_tokens must not be negative');
  const purpose: PurposeName = request.purpose === Purpose.PURPOSE_JUDGE ? 'judge' : 'work';
  return {
    projectId: request.projectId,
    taskId: request.taskId,
    taskClass: request.taskClass,
    requiredCapabilities: request.requiredCapabilities,
    estimatedInputTokens: request.estimatedInputTokens,
    mode,
    purpose,
    taskBudgetLeftMicroUsd: request.taskBudgetLeftMicroUsd,
    dayBudgetLeftMicroUsd: request.dayBudgetLeftMicroUsd,
    allowedBackends: request.allowedBackends,
    excludeBackends: request.excludeBackends,
    escalateFromBackend: request.escalateFromBackend || undefined,
    avoidModelFamily: request.avoidModelFamily || undefined,
    availableBackends: request.availableBackends,
  };
}

function decodeDecision(row: DecisionRow): Decision {
  return Decision.fromJSON(row.decision);
}

/** The stored decision as the Place answer; a decision without a winner is the documented refusal. */
function answer(decision: Decision) {
  if (!decision.winner) {
    const excluded = summariseExclusions(decision.exclusions) || 'no backend is declared';
    // A backend that passed capability, trust and health but not the budget means the caller can fix
    // this by paying more: that is a budget refusal, not a missing backend.
    if (decision.exclusions.some((exclusion) => exclusion.reasonCode === 'budget')) {
      throw fail.budgetExceeded(
        `no backend fits the budget left for ${decision.taskClass} under ${modeNames[decision.mode] ?? 'balanced'}: ${excluded}; decision ${decision.id}`,
      );
    }
    throw fail.precondition(
      `no capable backend for ${decision.taskClass} under ${modeNames[decision.mode] ?? "balanced"}: ${excluded}; decision ${decision.id}`,
      'actor.no_capable_backend',
    );
  }
  return { decision };
}

export interface PlacementServiceDependencies {
  repository: PlacementRepository;
  catalog: AdapterCatalog;
  circuitCooldownMs: number;
  hysteresisMargin: number;
  /** See PLACEMENT_HYSTERESIS_WINDOW_MS; absent = 0, a challenger takes over at once. */
  hysteresisWindowMs?: number;
  logger: Logger;
}

/** The PlacementService: decode, run the placer's rules, store, encode. SQL lives in the repository. */
export function createPlacementService(dependencies: PlacementServiceDependencies): PlacementServiceImplementation {
  const { repository, catalog, circuitCooldownMs, hysteresisMargin, hysteresisWindowMs } = dependencies;

  async function tiers(): Promise<Map<string, number>> {
    try {
      return new Map((await catalog.adapters()).map((adapter) => [adapter.type, adapter.qualityTier]));
    } catch (error) {
      // Signals stay readable while the registry is down; estimates then use a neutral prior.
      dependencies.logger.warn({ err: error }, 'registry unreachable: signals shown with a neutral prior');
      return new Map();
    }
  }

  function encodeSignal(signal: SignalState, tier: number | undefined, now: Date): BackendSignal {
    return {
      backend: signal.backend,
      taskClass: signal.taskClass,
      samples: signal.samples,
      successes: signal.successes,
      verifiedSuccesses: signal.verifiedSuccesses,
      successEstimate: posteriorSuccess(tier === undefined ? UNKNOWN_BACKEND_PRIOR : priorSuccess(tier), signal),
      latencyP50Ms: percentile(signal.latenciesMs, 0.5),
      latencyP95Ms: percentile(signal.latenciesMs, 0.95),
      meanCostMicroUsd: meanCost(signal) ?? 0,
      circuitState: circuitState(signal, now, circuitCooldownMs).state,
      consecutiveFailures: signal.consecutiveFailures,
      updateTime: signal.updatedAt,
    };
  }

  return {
    async place(request) {
      const placement = decodePlaceRequest(request);
      if (request.requestId) {
        const stored = await repository.findDecisionByRequest(request.projectId, request.requestId);
        if (stored) return answer(decodeDecision(stored));
      }
      const [adapters, { signals, now }] = await Promise.all([
        catalog.adapters(),
        repository.signalsForClass(placement.taskClass),
      ]);
      const incumbentKey: IncumbentKey = {
        projectId: placement.projectId,
        taskClass: placement.taskClass,
        mode: placement.mode,
        purpose: placement.purpose,
      };
      const movesIncumbent = placement.purpose === 'work' && !placement.escalateFromBackend;
      const incumbent = movesIncumbent ? await repository.incumbent(incumbentKey) : undefined;
      const backends = adapters.map(backendFromAdapter);
      const probesTaken = new Set<string>();
      let result: PlacementResult;
      for (;;) {
        result = decidePlacement({
          request: placement,
          backends,
          signals,
          incumbent: incumbent?.backend,
          now,
          circuitCooldownMs,
          hysteresisMargin,
          hysteresisWindowMs,
          challenge: incumbent?.challenge,
          probesTaken,
        });
        const winner = result.winner;
        if (!winner || winner.circuitState !== 'half-open') break;
        // Only one placement may probe a half-open backend; one that loses the race places again without it.
        if (await repository.claimProbe(winner.backend, placement.taskClass, circuitCooldownMs)) break;
        probesTaken.add(winner.backend);
      }
      const decision: Decision = {
        id: newId('dec'),
        winner: result.winner,
        objective: result.objective,
        mode: request.mode === Mode.MODE_UNSPECIFIED ? Mode.MODE_BALANCED : request.mode,
        purpose: placement.purpose === 'judge' ? Purpose.PURPOSE_JUDGE : Purpose.PURPOSE_WORK,
        candidates: result.candidates,
        exclusions: result.exclusions,
        hysteresis: result.hysteresis,
        explanation: result.explanation,
        signalsTime: result.signalsTime,
        createTime: now,
        taskClass: placement.taskClass,
        taskId: placement.taskId,
      };
      const { row, created } = await repository.insertDecision({
        id: decision.id,
        projectId: placement.projectId,
        requestId: request.requestId || null,
        taskId: placement.taskId,
        taskClass: placement.taskClass,
        decision: Decision.toJSON(decision),
      });
      if (created && result.newIncumbent) await repository.setIncumbent(incumbentKey, result.newIncumbent);
      else if (created && incumbent && result.challenge !== undefined) {
        await repository.setChallenge(incumbentKey, incumbent.backend, result.challenge);
      }
      return answer(created ? decision : decodeDecision(row));
    },

    async reportOutcome(request) {
      if (!request.backend) throw fail.invalid('backend is required');
      if (!request.taskClass) throw fail.invalid('task_class is required');
      if (request.latencyMs < 0 || request.costMicroUsd < 0) throw fail.invalid('latency_ms and cost_micro_usd must not be negative');
      const outcome = {
        success: request.success,
        verified: request.verified,
        latencyMs: request.latencyMs,
        costMicroUsd: request.costMicroUsd,
        errorKind: request.errorKind,
        judge: request.judge,
      };
      const { signal, now } = await repository.recordOutcome(
        {
          requestId: request.requestId || randomUUID(),
          backend: request.backend,
          taskClass: request.taskClass,
          decisionId: request.decisionId,
        },
        (current, at) => applyOutcome(current, outcome, at, circuitCooldownMs),
      );
      const tier = (await tiers()).get(signal.backend);
      return { signal: encodeSignal(signal, tier, now) };
    },

    async getSignals(request) {
      const [{ signals, now }, tierByBackend] = await Promise.all([
        repository.listSignals({ backend: request.backend || undefined, taskClass: request.taskClass || undefined }),
        tiers(),
      ]);
      return { signals: signals.map((signal) => encodeSignal(signal, tierByBackend.get(signal.backend), now)) };
    },

    async getDecision(request) {
      if (!request.id) throw fail.invalid('id is required');
      const row = await repository.findDecision(request.id);
      if (!row) throw fail.notFound(`no decision "${request.id}"`, 'actor.decision.not_found');
      return { decision: decodeDecision(row) };
    },
  };
}
