import { newId } from '@actor/kit';
import { PortRefusal, type Outcome, type PlaceRequest, type Placement, type PlacementPort } from '@actor/engine';
import type { AdapterDefinition } from '@actor/execution/src/agents/agent.js';
import { summariseExclusions } from '@actor/placement/src/domain/explanation.js';
import type { Challenge } from '@actor/placement/src/domain/hysteresis.js';
import { backendFromAdapter } from '@actor/placement/src/domain/adapter-backend.js';
import type { Backend, SignalState } from '@actor/placement/src/domain/placement-model.js';
import { decidePlacement } from '@actor/placement/src/domain/placer.js';
import { applyOutcome, emptySignal } from '@actor/placement/src/domain/signal-update.js';

/** An adapter found by discovery, as the placement rules see it (declaration plus its rate card, revision 1). */
export function backendOf(definition: AdapterDefinition): Backend {
  return backendFromAdapter({ ...definition.declaration, rateCard: { ...definition.rateCard, revision: 1 } });
}

export interface LocalPlacementOptions {
  /** The adapters discovery found (ready ones; others are not declared locally). */
  definitions: AdapterDefinition[];
  /** Adapter types that have a local slot; others are excluded with reason `no_slot`. */
  slotTypes: string[];
  /** Same meaning as the placement service's settings. */
  circuitCooldownMs?: number;
  hysteresisMargin?: number;
  now?: () => Date;
}

/**
 * Placement in process: the placement service's own rules (`decidePlacement`: hard filters, the
 * mode's objective, hysteresis, the explanation) over the adapters this machine discovered, with
 * signals and incumbents kept in memory for the life of the process. Nothing is re-implemented here
 * but the storage.
 */
export class LocalPlacementPort implements PlacementPort {
  private readonly backends: Backend[];
  private readonly signals = new Map<string, SignalState>();
  private readonly incumbents = new Map<string, { backend: string; challenge?: Challenge }>();
  private readonly decisions = new Map<string, Placement>();
  private readonly circuitCooldownMs: number;
  private readonly hysteresisMargin: number;
  private readonly now: () => Date;

  constructor(private readonly options: LocalPlacementOptions) {
    this.backends = options.definitions.map(backendOf);
    this.circuitCooldownMs = options.circuitCooldownMs ?? 30_000;
    this.hysteresisMargin = options.hysteresisMargin ?? 0.1;
    this.now = options.now ?? (() => new Date());
  }

  async place(request: PlaceRequest, signal: AbortSignal): Promise<Placement> {
    signal.throwIfAborted();
    const earlier = this.decisions.get(request.requestId);
    if (earlier) return earlier;

    const now = this.now();
    const signals = new Map<string, SignalState>();
    for (const state of this.signals.values()) if (state.taskClass === request.taskClass) signals.set(state.backend, state);
    const incumbentKey = `${request.projectId}\u0000${request.taskClass}\u0000${request.mode}\u0000${request.purpose}`;
    const movesIncumbent = request.purpose === 'work' && !request.escalateFromBackend;
    const incumbent = movesIncumbent ? this.incumbents.get(incumbentKey) : undefined;

    const result = decidePlacement({
      request: {
        projectId: request.projectId,
        taskId: request.taskId,
        taskClass: request.taskClass,
        requiredCapabilities: request.requiredCapabilities,
        estimatedInputTokens: request.estimatedInputTokens,
        mode: request.mode,
        // A classifier call is placed as a judge: a side call that moves no incumbent, no work sample.
        purpose: request.purpose === 'work' ? 'work' : 'judge',
        taskBudgetLeftMicroUsd: request.taskBudgetLeftMicroUsd,
        dayBudgetLeftMicroUsd: request.dayBudgetLeftMicroUsd,
        // As in the service: the task's backend list restricts its workers; judges are chosen by family
        // and trust; a classifier call names its one backend.
        allowedBackends: request.purpose === 'judge' ? [] : request.allowedBackends,
        excludeBackends: request.excludeBackends,
        escalateFromBackend: request.escalateFromBackend,
        avoidModelFamily: request.avoidModelFamily,
        availableBackends: this.options.slotTypes,
      },
      backends: this.backends,
      signals,
      incumbent: incumbent?.backend,
      challenge: incumbent?.challenge,
      now,
      circuitCooldownMs: this.circuitCooldownMs,
      hysteresisMargin: this.hysteresisMargin,
    });

    const decisionId = newId('dec');
    const detail = {
      id: decisionId,
      purpose: request.purpose,
      objective: result.objective,
      winner: result.winner,
      candidates: result.candidates,
      exclusions: result.exclusions,
      hysteresis: result.hysteresis,
      explanation: result.explanation,
    };
    const winner = result.winner;
    if (!winner) {
      const excluded = summariseExclusions(result.exclusions) || 'no backend is declared';
      // A backend held back only by the budget is fixable by paying more: a budget refusal, as in the service.
      if (result.exclusions.some((exclusion) => exclusion.reasonCode === 'budget')) {
        throw new PortRefusal('actor.budget.exceeded', `no backend fits the budget left for ${request.taskClass} under ${request.mode}: ${excluded}`);
      }
      throw new PortRefusal('actor.no_capable_backend', `no capable backend for ${request.taskClass} under ${request.mode}: ${excluded}`);
    }
    if (movesIncumbent && result.newIncumbent) this.incumbents.set(incumbentKey, { backend: result.newIncumbent });
    else if (movesIncumbent && incumbent && result.challenge !== undefined) {
      this.incumbents.set(incumbentKey, { backend: incumbent.backend, challenge: result.challenge ?? undefined });
    }

    const placement: Placement = {
      decisionId,
      backend: winner.backend,
      modelFamily: winner.modelFamily,
      qualityTier: winner.qualityTier,
      demo: winner.demo,
      worstCaseCostMicroUsd: winner.worstCaseCostMicroUsd,
      rateCardRevision: winner.rateCardRevision,
      explanation: result.explanation,
      detail,
    };
    this.decisions.set(request.requestId, placement);
    return placement;
  }

  async reportOutcome(outcome: Outcome): Promise<void> {
    const key = `${outcome.backend}\u0000${outcome.taskClass}`;
    const now = this.now();
    const current = this.signals.get(key) ?? emptySignal(outcome.backend, outcome.taskClass, now);
    this.signals.set(
      key,
      applyOutcome(
        current,
        {
          success: outcome.success,
          verified: outcome.verified,
          latencyMs: Math.round(outcome.latencyMs),
          costMicroUsd: outcome.costMicroUsd,
          errorKind: outcome.errorKind ?? '',
          judge: outcome.judge,
        },
        now,
        this.circuitCooldownMs,
      ),
    );
  }

  /** What placement has learned in this process, one entry per backend x task class. */
  learned(): SignalState[] {
    return [...this.signals.values()];
  }
}
