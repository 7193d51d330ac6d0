
import { type ActorClient, remoteError, utcDay } from '@actor/kit';
import { PortRefusal, type BillingPort, type Reservation } from '@actor/engine';
import type { BillingServiceDefinition } from '@actor/proto/billing';

/** Billing over gRPC; a budget refusal becomes a PortRefusal the engine turns into a failed task. */
export class GrpcBillingPort implements BillingPort {
  constructor(private readonly billing: ActorClient<typeof BillingServiceDefinition>) {}

  async reserve(request: Parameters<BillingPort['reserve']>[0]): Promise<Reservation> {
    try {
      const { reservation } = await this.billing.reserve({
        requestId: request.requestId,
        projectId: request.projectId,
        taskId: request.taskId,
        attemptId: request.attemptId,
        amountMicroUsd: request.amountMicroUsd,
        perTaskLimitMicroUsd: request.perTaskLimitMicroUsd,
        perDayLimitMicroUsd: request.perDayLimitMicroUsd,
      });
      return { reservationId: reservation!.id, amountMicroUsd: reservation!.amountMicroUsd };
    } catch (error) {
      const remote = remoteError(error);
      if (remote?.code === 'actor.budget.exceeded') throw new PortRefusal(remote.code, remote.message);
      throw error;
    }
  }

  async settle(request: Parameters<BillingPort['settle']>[0]): Promise<{ costMicroUsd: number }> {
    const { usage } = await this.billing.settle({
      reservationId: request.reservationId,
      adapterType: request.backend,
      rateCardRevision: request.rateCardRevision,
      usage: request.usage,
      reportedCostMicroUsd: request.reportedCostMicroUsd ?? 0,
      producedOutput: request.producedOutput,
    });
    return { costMicroUsd: usage?.costMicroUsd ?? 0 };
  }

  async release(reservationId: string): Promise<void> {
    await this.billing.releaseReservation({ reservationId });
  }

  /** Frees what a dead run of the task still holds; the amount freed, in micro-USD, and how many. */
  async releaseTaskReservations(projectId: string, taskId: string): Promise<{ count: number; amountMicroUsd: number }> {
    const released = await this.billing.releaseTaskReservations({ projectId, taskId });
    return { count: released.reservationIds.length, amountMicroUsd: released.releasedMicroUsd };
  }

  async spend(projectId: string, taskId: string): Promise<{ taskMicroUsd: number; dayMicroUsd: number }> {
    const [day, usage] = await Promise.all([
      this.billing.getSpend({ projectId, day: utcDay() }),
      this.billing.listUsage({ projectId, taskId }),
    ]);
    return {
      taskMicroUsd: usage.usage.reduce((sum, record) => sum + record.costMicroUsd, 0),
      dayMicroUsd: day.spentMicroUsd + day.reservedMicroUsd,
    };
  }
}
