import { Status } from 'nice-grpc';
import { type ActorClient, remoteError } from '@actor/kit';
import { PortRefusal, type Outcome, type PlaceRequest, type Placement, type PlacementPort } from '@actor/engine';
import { Purpose, type PlacementServiceDefinition } from '@actor/proto/placement';
import type { PoolServiceDefinition } from '@actor/proto/pool';
import { modeToProto } from './mode.js';

/**
 * Placement over gRPC. It also tells placement which backends have an enabled slot in the pool, so
 * that nothing is placed on a backend no agent can run.
 */
export class GrpcPlacementPort implements PlacementPort {
  private slotCache: { at: number; types: string[] } | undefined;

  constructor(
    private readonly placement: ActorClient<typeof PlacementServiceDefinition>,
    private readonly pool: ActorClient<typeof PoolServiceDefinition>,
  ) {}

  private async availableBackends(): Promise<string[]> {
    if (this.slotCache && Date.now() - this.slotCache.at < 2_000) return this.slotCache.types;
    const { agents } = await this.pool.listAgents({});
    const types = [...new Set(agents.filter((agent) => agent.enabled).map((agent) => agent.agentType))];
    this.slotCache = { at: Date.now(), types };
    return types;
  }

  async place(request: PlaceRequest, signal: AbortSignal): Promise<Placement> {
    const availableBackends = await this.availableBackends();
    try {
      const { decision } = await this.placement.place(
        {
          requestId: request.requestId,
          projectId: request.projectId,
          taskId: request.taskId,
          taskClass: request.taskClass,
          requiredCapabilities: request.requiredCapabilities,
          estimatedInputTokens: request.estimatedInputTokens,
          mode: modeToProto(request.mode),
          taskBudgetLeftMicroUsd: request.taskBudgetLeftMicroUsd,
          dayBudgetLeftMicroUsd: request.dayBudgetLeftMicroUsd,
          // The task's backend list restricts its workers; judges are chosen by family and trust. A
          // classifier call names its one backend here.
          allowedBackends: request.purpose === 'judge' ? [] : request.allowedBackends,
          excludeBackends: request.excludeBackends,
          escalateFromBackend: request.escalateFromBackend ?? '',
          // A classifier call is placed as a judge: a side call that moves no incumbent, no work sample.
          purpose: request.purpose === 'work' ? Purpose.PURPOSE_WORK : Purpose.PURPOSE_JUDGE,
          avoidModelFamily: request.avoidModelFamily ?? '',
          availableBackends,
        },
        { signal },
      );
      const winner = decision?.winner;
      if (!decision || !winner) throw new PortRefusal('actor.no_capable_backend', 'placement returned no winner');
      return {
        decisionId: decision.id,
        backend: winner.backend,
        modelFamily: winner.modelFamily,
        qualityTier: winner.qualityTier,
        demo: winner.demo,
        worstCaseCostMicroUsd: winner.worstCaseCostMicroUsd,
        rateCardRevision: winner.rateCardRevision,
        explanation: decision.explanation,
        detail: decision,
      };
    } catch (error) {
      const remote = remoteError(error);
      if (
        remote?.code === 'actor.no_capable_backend' ||
        remote?.code === 'actor.budget.exceeded' ||
        remote?.status === Status.FAILED_PRECONDITION
      ) {
        throw new PortRefusal(remote.code ?? 'actor.no_capable_backend', remote.message);
      }
      throw error;
    }
  }

  async reportOutcome(outcome: Outcome): Promise<void> {
    await this.placement.reportOutcome({
      requestId: outcome.requestId,
      backend: outcome.backend,
      taskClass: outcome.taskClass,
      success: outcome.success,
      verified: outcome.verified,
      latencyMs: Math.round(outcome.latencyMs),
      costMicroUsd: outcome.costMicroUsd,
      errorKind: outcome.errorKind ?? '',
      decisionId: outcome.decisionId,
      judge: outcome.judge,
    });
  }
}
