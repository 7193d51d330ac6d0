import { Status } from 'nice-grpc';
import { type ActorClient, remoteError } from '@actor/kit';
import { PortRefusal, type Lease, type PoolPort } from '@actor/engine';
import { LeaseSessionClient } from '@actor/pool/src/client/lease-session-client.js';
import type { PoolServiceDefinition } from '@actor/proto/pool';

/** How long a lease lives unrenewed, and how long a task waits in the pool's queue for a slot. */
const leaseTtlMs = 60_000;
const waitTimeoutMs = 10 * 60_000;

/**
 * The pool over gRPC: waits fairly for a slot, renews the lease while the work runs. Acquire, Renew
 * and Release travel on one LeaseSession stream (a unary call each cost several times as much CPU
 * on both ends); listing leases stays a unary call.
 */
export class GrpcPoolPort implements PoolPort {
  private readonly renewals = new Map<string, NodeJS.Timeout>();
  private readonly leases: LeaseSessionClient;

  constructor(private readonly pool: ActorClient<typeof PoolServiceDefinition>) {
    this.leases = new LeaseSessionClient(pool);
  }

  async acquire(request: Parameters<PoolPort['acquire']>[0], signal: AbortSignal): Promise<Lease> {
    try {
      const { lease } = await this.leases.acquire(
        {
          requestId: request.requestId,
          workType: request.workType,
          workId: request.workId,
          projectId: request.projectId,
          agentId: request.agentId ?? '',
          agentType: request.agentType,
          capability: request.capability ?? '',
          ttlMs: leaseTtlMs,
          wait: true,
          waitTimeoutMs,
        },
        { signal, deadlineMs: waitTimeoutMs + 5_000 },
      );
      const result: Lease = {
        leaseId: lease!.id,
        epoch: lease!.epoch,
        agentId: lease!.agent!.id,
        agentType: lease!.agent!.agentType,
        configuration: parseConfiguration(lease!.agent!.configurationJson),
      };
      // Renew at a third of the TTL so one missed renewal does not lose the slot.
      const timer = setInterval(() => {
        this.leases.renew({ leaseId: result.leaseId, epoch: result.epoch, ttlMs: leaseTtlMs }).catch(() => undefined);
      }, leaseTtlMs / 3);
      timer.unref();
      this.renewals.set(result.leaseId, timer);
      return result;
    } catch (error) {
      const remote = remoteError(error);
      if (remote && (remote.status === Status.FAILED_PRECONDITION || remote.status === Status.DEADLINE_EXCEEDED)) {
        throw new PortRefusal(remote.code ?? 'actor.pool.no_matching_agent', remote.message);
      }
      throw error;
    }
  }

  async release(lease: Lease): Promise<void> {
    clearInterval(this.renewals.get(lease.leaseId));
    this.renewals.delete(lease.leaseId);
    await releaseOrRefuse(this.leases, lease.leaseId, lease.epoch);
  }

  /**
   * Ends the leases the pool still holds for one work item (a task and its judges), such as those of
   * a run whose process died: without this they would hold their slots until their TTL lapses.
   */
  async releaseWorkLeases(projectId: string, workId: string): Promise<number> {
    const { leases } = await this.pool.listLeases({ projectId });
    let released = 0;
    for (const lease of leases) {
      if (lease.workId !== workId || this.renewals.has(lease.id)) continue;
      try {
        if (await releaseOrRefuse(this.leases, lease.id, lease.epoch)) released += 1;
      } catch (error) {
        // Listed, then expired or taken over before we got to it: it holds no slot any more.
        if (!(error instanceof PortRefusal)) throw error;
      }
    }
    return released;
  }
}

/**
 * Releases a lease. The pool answers ABORTED when the lease expired or a newer holder has the slot:
 * that is a refusal the engine expects (nothing is left to give back), not a failure of the run.
 */
async function releaseOrRefuse(
  leases: LeaseSessionClient,
  leaseId: string,
  epoch: number,
): Promise<boolean> {
  try {
    return (await leases.release({ leaseId, epoch })).released;
  } catch (error) {
    const remote = remoteError(error);
    if (remote?.status === Status.ABORTED) throw new PortRefusal(remote.code ?? 'actor.lease.stale', remote.message);
    throw error;
  }
}

function parseConfiguration(json: string): Record<string, unknown> {
  if (!json) return {};
  try {
    const value: unknown = JSON.parse(json);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
