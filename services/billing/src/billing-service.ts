import { fail, newId, priceUsage, type Logger, type Usage } from '@actor/kit';
import {
  ReservationState,
  type BillingServiceImplementation,
  type Reservation,
  type ReserveRequest,
  type UsageRecord,
  type UsageSample,
} from '@actor/proto/billing';
import type { BillingRepository, ReservationRow, UsageRow } from './db/billing-repository.js';
import type { ReservationStateName } from './db/schema.js';
import { billingDay, requestedDay } from './domain/billing-day.js';
import { budgetRefusal } from './domain/budget-check.js';
import { settle, usageFlags } from './domain/settlement.js';
import type { RateCardSource } from './rate-card-source.js';

/** A reservation's hold when the caller sends `ttl_ms` 0. */
export const defaultReservationTtlMs = 10 * 60_000;
/** The longest hold a caller may ask for: a day. */
const maxReservationTtlMs = 24 * 60 * 60_000;

const stateCodes: Record<ReservationStateName, ReservationState> = {
  held: ReservationState.RESERVATION_STATE_HELD,
  settled: ReservationState.RESERVATION_STATE_SETTLED,
  released: ReservationState.RESERVATION_STATE_RELEASED,
  expired: ReservationState.RESERVATION_STATE_EXPIRED,
};

function encodeReservation(row: ReservationRow): Reservation {
  return {
    id: row.id,
    projectId: row.projectId,
    taskId: row.taskId,
    attemptId: row.attemptId,
    amountMicroUsd: row.amountMicroUsd,
    state: stateCodes[row.state],
    costMicroUsd: row.costMicroUsd,
    day: row.day,
    expireTime: row.expiresAt,
    createTime: row.createdAt,
  };
}

function encodeUsage(row: UsageRow): UsageRecord {
  return {
    id: row.id,
    projectId: row.projectId,
    taskId: row.taskId,
    attemptId: row.attemptId,
    backend: row.backend,
    rateCardRevision: row.rateCardRevision,
    usage: {
      inputTokens: row.inputTokens,
      outputTokens: row.outputTokens,
      durationMs: row.durationMs,
      calls: row.calls,
    },
    costMicroUsd: row.costMicroUsd,
    day: row.day,
    flags: row.flags,
    createTime: row.createdAt,
  };
}

function requireText(value: string, field: string): string {
  if (!value.trim()) throw fail.invalid(`${field} is required`);
  return value;
}

function requireAmount(value: number, field: string): number {
  if (!Number.isSafeInteger(value) || value < 0) throw fail.invalid(`${field} must be a non-negative integer`);
  return value;
}

function decodeUsage(sample: UsageSample | undefined): Usage {
  return {
    inputTokens: requireAmount(sample?.inputTokens ?? 0, 'usage.input_tokens'),
    outputTokens: requireAmount(sample?.outputTokens ?? 0, 'usage.output_tokens'),
    durationMs: requireAmount(sample?.durationMs ?? 0, 'usage.duration_ms'),
    calls: requireAmount(sample?.calls ?? 0, 'usage.calls'),
  };
}

// A retried Reserve must be the same request; a reused id for another hold is a caller bug.
function assertSameReservation(existing: ReservationRow, request: ReserveRequest): void {
  if (
    existing.projectId !== request.projectId ||
    existing.taskId !== request.taskId ||
    existing.attemptId !== request.attemptId ||
    existing.amountMicroUsd !== request.amountMicroUsd
  ) {
    throw fail.invalid(
      `request_id "${request.requestId}" was already used for reservation ${existing.id} with other values`,
      'actor.request_id.reused',
    );
  }
}

export interface BillingServiceDependencies {
  repository: BillingRepository;
  rateCards: RateCardSource;
  logger: Logger;
}

/** The BillingService: decode, apply billing's rules, encode. SQL lives in the repository. */
export function createBillingService({ repository, rateCards, logger }: BillingServiceDependencies): BillingServiceImplementation {
  return {
    async quote(request, context) {
      requireText(request.adapterType, 'adapter_type');
      const revision = requireAmount(request.rateCardRevision, 'rate_card_revision');
      const usage = decodeUsage(request.usage);
      const priced = await rateCards.prices(request.adapterType, revision, context.signal);
      return { costMicroUsd: priceUsage(priced.prices, usage), rateCardRevision: priced.revision };
    },

    async reserve(request) {
      requireText(request.projectId, 'project_id');
      requireText(request.taskId, 'task_id');
      requireText(request.attemptId, 'attempt_id');
      const amountMicroUsd = requireAmount(request.amountMicroUsd, 'amount_micro_usd');
      const perTaskLimitMicroUsd = requireAmount(request.perTaskLimitMicroUsd, 'per_task_limit_micro_usd');
      const perDayLimitMicroUsd = requireAmount(request.perDayLimitMicroUsd, 'per_day_limit_micro_usd');
      const ttlMs = requireAmount(request.ttlMs, 'ttl_ms') || defaultReservationTtlMs;
      if (ttlMs > maxReservationTtlMs) throw fail.invalid(`ttl_ms must be at most ${maxReservationTtlMs} (a day)`);
      const requestId = request.requestId || null;
      if (requestId) {
        const existing = await repository.findReservationByRequestId(requestId);
        if (existing) {
          assertSameReservation(existing, request);
          return { reservation: encodeReservation(existing) };
        }
      }
      const now = await repository.databaseNow();
      const day = billingDay(now);
      const { reservation, created } = await repository.reserve(
        {
          id: newId('res'),
          requestId,
          projectId: request.projectId,
          taskId: request.taskId,
          attemptId: request.attemptId,
          amountMicroUsd,
          day,
          createdAt: now,
          expiresAt: new Date(now.getTime() + ttlMs),
        },
        (counters) => {
          const refusal = budgetRefusal({
            projectId: request.projectId,
            taskId: request.taskId,
            day,
            amountMicroUsd,
            perTaskLimitMicroUsd,
            perDayLimitMicroUsd,
            ...counters,
          });
          return refusal ? fail.budgetExceeded(refusal) : undefined;
        },
      );
      if (!created) assertSameReservation(reservation, request);
      return { reservation: encodeReservation(reservation) };
    },

    async settle(request, context) {
      requireText(request.reservationId, 'reservation_id');
      requireText(request.adapterType, 'adapter_type');
      const revision = requireAmount(request.rateCardRevision, 'rate_card_revision');
      const reportedCostMicroUsd = requireAmount(request.reportedCostMicroUsd, 'reported_cost_micro_usd');
      const usage = decodeUsage(request.usage);
      const reservation = await repository.findReservation(request.reservationId);
      if (!reservation) throw reservationNotFound(request.reservationId);
      if (reservation.state === 'settled') {
        const first = await repository.findUsageOfReservation(reservation.id);
        return { usage: encodeUsage(first!) };
      }
      if (reservation.state !== 'held') throw notHeld(reservation.id, reservation.state);
      // Priced before the transaction: no row lock is ever held across a call to the registry.
      const priced = await rateCards.prices(request.adapterType, revision, context.signal);
      const settlement = settle({
        prices: priced.prices,
        usage,
        reservedMicroUsd: reservation.amountMicroUsd,
        reportedCostMicroUsd,
        producedOutput: request.producedOutput,
      });
      const outcome = await repository.settle(reservation.id, {
        id: newId('use'),
        reservationId: reservation.id,
        backend: request.adapterType,
        rateCardRevision: priced.revision,
        ...usage,
        costMicroUsd: settlement.costMicroUsd,
        reportedCostMicroUsd,
        flags: settlement.flags,
      });
      if (outcome.kind === 'not_found') throw reservationNotFound(reservation.id);
      if (outcome.kind === 'not_held') throw notHeld(reservation.id, outcome.state);
      if (outcome.usage.flags.includes(usageFlags.zeroUsageWithOutput)) {
        logger.warn(
          { reservationId: reservation.id, backend: request.adapterType, taskId: reservation.taskId },
          'backend reported zero usage for a call that produced output',
        );
      }
      return { usage: encodeUsage(outcome.usage) };
    },

    async releaseReservation(request) {
      requireText(request.reservationId, 'reservation_id');
      const released = await repository.release(request.reservationId);
      if (released === undefined) throw reservationNotFound(request.reservationId);
      return { released };
    },

    async releaseTaskReservations(request) {
      requireText(request.projectId, 'project_id');
      requireText(request.taskId, 'task_id');
      const released = await repository.releaseTask(request.projectId, request.taskId);
      return {
        reservationIds: released.map((reservation) => reservation.id),
        releasedMicroUsd: released.reduce((sum, reservation) => sum + reservation.amountMicroUsd, 0),
      };
    },

    async getSpend(request) {
      requireText(request.projectId, 'project_id');
      const day = requestedDay(request.day, request.day ? '' : billingDay(await repository.databaseNow()));
      const [counter, byBackend] = await Promise.all([
        repository.daySpend(request.projectId, day),
        repository.spendByBackend(request.projectId, day),
      ]);
      return {
        day,
        spentMicroUsd: counter.spentMicroUsd,
        reservedMicroUsd: counter.heldMicroUsd,
        byBackend,
      };
    },

    async listUsage(request) {
      requireText(request.projectId, 'project_id');
      const rows = await repository.listUsage(request.projectId, request.taskId || undefined);
      return { usage: rows.map(encodeUsage) };
    },
  };
}

function reservationNotFound(id: string) {
  return fail.notFound(`no reservation "${id}"`, 'actor.reservation.not_found');
}

function notHeld(id: string, state: ReservationStateName) {
  return fail.precondition(`reservation ${id} was ${state}; it can no longer be settled`, 'actor.reservation.not_held');
}
