import { and, asc, eq, inArray, lte, sql } from 'drizzle-orm';
import type { Database } from '@actor/kit';
import type { SpendCounter } from '../domain/budget-check.js';
import { daySpend, reservations, taskSpend, usageSamples, type schema } from './schema.js';

export type ReservationRow = typeof reservations.$inferSelect;
export type UsageRow = typeof usageSamples.$inferSelect;
type Transaction = Parameters<Parameters<Database<typeof schema>['transaction']>[0]>[0];

export interface NewReservation {
  id: string;
  requestId: string | null;
  projectId: string;
  taskId: string;
  attemptId: string;
  amountMicroUsd: number;
  day: string;
  /** The database clock when the reservation was decided; `expiresAt` counts from it. */
  createdAt: Date;
  expiresAt: Date;
}

/** The counters a Reserve is judged on, read under their row locks. */
export interface LockedCounters {
  projectDay: SpendCounter;
  task: SpendCounter;
}

export type NewUsage = Omit<typeof usageSamples.$inferInsert, 'createdAt' | 'projectId' | 'taskId' | 'attemptId' | 'day'>;

export type SettleOutcome =
  | { kind: 'settled'; usage: UsageRow }
  | { kind: 'not_found' }
  | { kind: 'not_held'; state: ReservationRow['state'] };

// Another Reserve with the same request id committed between our look-up and our insert.
class RequestIdTaken extends Error {}

/**
 * Every SQL statement of billing. Locks are always taken in one order: existing reservation rows,
 * then day counters (sorted), then task counters (sorted). Reserve inserts a new reservation (which
 * nobody else can be waiting for) and then takes a day counter and a task counter, so no two
 * transactions ever wait on each other in a circle.
 */
export class BillingRepository {
  constructor(private readonly db: Database<typeof schema>) {}

  /** The database clock: the one clock every replica shares for days and deadlines. */
  async databaseNow(): Promise<Date> {
    const [row] = await this.db
      .select({ epochMs: sql<number>`(extract(epoch from now()) * 1000)::float8`.mapWith(Number) })
      .from(sql`(select 1) as clock`);
    return new Date(Math.floor(row!.epochMs));
  }

  async findReservation(id: string): Promise<ReservationRow | undefined> {
    const [row] = await this.db.select().from(reservations).where(eq(reservations.id, id));
    return row;
  }

  async findReservationByRequestId(requestId: string): Promise<ReservationRow | undefined> {
    const [row] = await this.db.select().from(reservations).where(eq(reservations.requestId, requestId));
    return row;
  }

  async findUsageOfReservation(reservationId: string): Promise<UsageRow | undefined> {
    const [row] = await this.db.select().from(usageSamples).where(eq(usageSamples.reservationId, reservationId));
    return row;
  }

  /**
   * In one transaction: inserts the reservation, locks the (project, day) and (project, task)
   * counters, hands them to `admit` (which returns an error to refuse: it is thrown and everything
   * rolls back, the reservation too), then adds the amount to both counters' holds. The reservation
   * is inserted before the locks so that the locks are held for as few round trips as possible. A
   * request id already used returns the reservation it made.
   */
  async reserve(
    reservation: NewReservation,
    admit: (counters: LockedCounters) => Error | undefined,
  ): Promise<{ reservation: ReservationRow; created: boolean }> {
    try {
      return await this.db.transaction(async (transaction) => {
        const [row] = await transaction
          .insert(reservations)
          .values({ ...reservation, state: 'held' })
          .onConflictDoNothing()
          .returning();
        if (!row) throw new RequestIdTaken();
        const counters = await this.lockCounters(transaction, reservation);
        const refusal = admit(counters);
        if (refusal) throw refusal;
        // Both rows are locked already, so one statement may update them in any order.
        await transaction.execute(sql`
          with day_update as (
            update billing.day_spend set held_micro_usd = held_micro_usd + ${reservation.amountMicroUsd}
            where project_id = ${reservation.projectId} and day = ${reservation.day}
            returning 1
          )
          update billing.task_spend set held_micro_usd = held_micro_usd + ${reservation.amountMicroUsd}
          where project_id = ${reservation.projectId} and task_id = ${reservation.taskId}`);
        return { reservation: row, created: true };
      });
    } catch (error) {
      if (!(error instanceof RequestIdTaken)) throw error;
      const existing = await this.findReservationByRequestId(reservation.requestId!);
      return { reservation: existing!, created: false };
    }
  }

  /**
   * Turns a held reservation into a usage sample: the reservation becomes `settled` with the cost,
   * and the counters drop its amount from held and add the cost to spent. Settling a settled
   * reservation returns its first sample.
   */
  async settle(reservationId: string, usage: NewUsage): Promise<SettleOutcome> {
    return this.db.transaction(async (transaction) => {
      const [reservation] = await transaction
        .select()
        .from(reservations)
        .where(eq(reservations.id, reservationId))
        .for('update');
      if (!reservation) return { kind: 'not_found' };
      if (reservation.state === 'settled') {
        const [first] = await transaction
          .select()
          .from(usageSamples)
          .where(eq(usageSamples.reservationId, reservationId));
        return { kind: 'settled', usage: first! };
      }
      if (reservation.state !== 'held') return { kind: 'not_held', state: reservation.state };
      const [row] = await transaction
        .insert(usageSamples)
        .values({
          ...usage,
          projectId: reservation.projectId,
          taskId: reservation.taskId,
          attemptId: reservation.attemptId,
          day: reservation.day,
        })
        .returning();
      await transaction
        .update(reservations)
        .set({ state: 'settled', costMicroUsd: usage.costMicroUsd, finishedAt: sql`now()` })
        .where(eq(reservations.id, reservationId));
      await this.moveMoney(transaction, reservation, {
        heldMicroUsd: -reservation.amountMicroUsd,
        spentMicroUsd: usage.costMicroUsd,
      });
      return { kind: 'settled', usage: row! };
    });
  }

  /** Frees a held reservation. Undefined when there is no such reservation; false when it was not held. */
  async release(reservationId: string): Promise<boolean | undefined> {
    return this.db.transaction(async (transaction) => {
      const [reservation] = await transaction
        .select()
        .from(reservations)
        .where(eq(reservations.id, reservationId))
        .for('update');
      if (!reservation) return undefined;
      if (reservation.state !== 'held') return false;
      await transaction
        .update(reservations)
        .set({ state: 'released', finishedAt: sql`now()` })
        .where(eq(reservations.id, reservationId));
      await this.moveMoney(transaction, reservation, { heldMicroUsd: -reservation.amountMicroUsd, spentMicroUsd: 0 });
      return true;
    });
  }

  /**
   * Frees every held reservation of one task (what a dead run left behind). The rows are locked, so
   * a concurrent settle or release of one of them either happens first (and it is skipped here) or
   * finds it released. Returns the reservations freed.
   */
  async releaseTask(projectId: string, taskId: string): Promise<ReservationRow[]> {
    return this.db.transaction(async (transaction) => {
      const held = await transaction
        .select()
        .from(reservations)
        .where(and(eq(reservations.projectId, projectId), eq(reservations.taskId, taskId), eq(reservations.state, 'held')))
        .orderBy(asc(reservations.id))
        .for('update');
      if (held.length === 0) return [];
      await transaction
        .update(reservations)
        .set({ state: 'released', finishedAt: sql`now()` })
        .where(inArray(reservations.id, held.map((row) => row.id)));
      for (const reservation of held) {
        await this.moveMoney(transaction, reservation, { heldMicroUsd: -reservation.amountMicroUsd, spentMicroUsd: 0 });
      }
      return held;
    });
  }

  /**
   * Marks up to `limit` held reservations past their deadline (database clock) `expired` and frees
   * their amounts. SKIP LOCKED lets several replicas sweep at once: each takes rows no other sweeper
   * (or settling caller) holds, so no reservation is freed twice. Returns how many were expired.
   */
  async expireReservations(limit: number): Promise<number> {
    return this.db.transaction(async (transaction) => {
      const expired = await transaction
        .select()
        .from(reservations)
        .where(and(eq(reservations.state, 'held'), lte(reservations.expiresAt, sql`now()`)))
        .orderBy(asc(reservations.expiresAt))
        .limit(limit)
        .for('update', { skipLocked: true });
      if (expired.length === 0) return 0;
      await transaction
        .update(reservations)
        .set({ state: 'expired', finishedAt: sql`now()` })
        .where(inArray(reservations.id, expired.map((row) => row.id)));
      const byDay = sumBy(expired, (row) => [row.projectId, row.day]);
      const byTask = sumBy(expired, (row) => [row.projectId, row.taskId]);
      for (const [[projectId, day], amount] of byDay) {
        await transaction
          .update(daySpend)
          .set({ heldMicroUsd: sql`${daySpend.heldMicroUsd} - ${amount}` })
          .where(and(eq(daySpend.projectId, projectId), eq(daySpend.day, day)));
      }
      for (const [[projectId, taskId], amount] of byTask) {
        await transaction
          .update(taskSpend)
          .set({ heldMicroUsd: sql`${taskSpend.heldMicroUsd} - ${amount}` })
          .where(and(eq(taskSpend.projectId, projectId), eq(taskSpend.taskId, taskId)));
      }
      return expired.length;
    });
  }

  async daySpend(projectId: string, day: string): Promise<SpendCounter> {
    const [row] = await this.db
      .select({ heldMicroUsd: daySpend.heldMicroUsd, spentMicroUsd: daySpend.spentMicroUsd })
      .from(daySpend)
      .where(and(eq(daySpend.projectId, projectId), eq(daySpend.day, day)));
    return row ?? { heldMicroUsd: 0, spentMicroUsd: 0 };
  }

  async spendByBackend(projectId: string, day: string): Promise<Array<{ backend: string; costMicroUsd: number; calls: number }>> {
    return this.db
      .select({
        backend: usageSamples.backend,
        costMicroUsd: sql<number>`coalesce(sum(${usageSamples.costMicroUsd}), 0)`.mapWith(Number),
        calls: sql<number>`count(*)`.mapWith(Number),
      })
      .from(usageSamples)
      .where(and(eq(usageSamples.projectId, projectId), eq(usageSamples.day, day)))
      .groupBy(usageSamples.backend)
      .orderBy(usageSamples.backend);
  }

  async listUsage(projectId: string, taskId?: string): Promise<UsageRow[]> {
    return this.db
      .select()
      .from(usageSamples)
      .where(
        taskId
          ? and(eq(usageSamples.projectId, projectId), eq(usageSamples.taskId, taskId))
          : eq(usageSamples.projectId, projectId),
      )
      .orderBy(asc(usageSamples.createdAt), asc(usageSamples.id));
  }

  // Insert-if-missing, then lock: the day row first, the task row second, in every transaction.
  private async lockCounters(
    transaction: Transaction,
    reservation: Pick<NewReservation, 'projectId' | 'taskId' | 'day'>,
  ): Promise<LockedCounters> {
    await transaction
      .insert(daySpend)
      .values({ projectId: reservation.projectId, day: reservation.day })
      .onConflictDoNothing();
    await transaction
      .insert(taskSpend)
      .values({ projectId: reservation.projectId, taskId: reservation.taskId })
      .onConflictDoNothing();
    const [projectDay] = await transaction
      .select({ heldMicroUsd: daySpend.heldMicroUsd, spentMicroUsd: daySpend.spentMicroUsd })
      .from(daySpend)
      .where(and(eq(daySpend.projectId, reservation.projectId), eq(daySpend.day, reservation.day)))
      .for('update');
    const [task] = await transaction
      .select({ heldMicroUsd: taskSpend.heldMicroUsd, spentMicroUsd: taskSpend.spentMicroUsd })
      .from(taskSpend)
      .where(and(eq(taskSpend.projectId, reservation.projectId), eq(taskSpend.taskId, reservation.taskId)))
      .for('update');
    return { projectDay: projectDay!, task: task! };
  }

  // Day counter first, task counter second: the same order as lockCounters.
  private async moveMoney(
    transaction: Transaction,
    reservation: Pick<NewReservation, 'projectId' | 'taskId' | 'day'>,
    change: SpendCounter,
  ): Promise<void> {
    await transaction
      .update(daySpend)
      .set({
        heldMicroUsd: sql`${daySpend.heldMicroUsd} + ${change.heldMicroUsd}`,
        spentMicroUsd: sql`${daySpend.spentMicroUsd} + ${change.spentMicroUsd}`,
      })
      .where(and(eq(daySpend.projectId, reservation.projectId), eq(daySpend.day, reservation.day)));
    await transaction
      .update(taskSpend)
      .set({
        heldMicroUsd: sql`${taskSpend.heldMicroUsd} + ${change.heldMicroUsd}`,
        spentMicroUsd: sql`${taskSpend.spentMicroUsd} + ${change.spentMicroUsd}`,
      })
      .where(and(eq(taskSpend.projectId, reservation.projectId), eq(taskSpend.taskId, reservation.taskId)));
  }
}

// Sums amounts per key pair, sorted by key, so counters are always updated (and locked) in one order.
function sumBy(rows: ReservationRow[], key: (row: ReservationRow) => [string, string]): Array<[[string, string], number]> {
  const sums = new Map<string, { key: [string, string]; amount: number }>();
  for (const row of rows) {
    const pair = key(row);
    const id = JSON.stringify(pair);
    const entry = sums.get(id) ?? { key: pair, amount: 0 };
    entry.amount += row.amountMicroUsd;
    sums.set(id, entry);
  }
  return [...sums.entries()]
    .sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0))
    .map(([, entry]) => [entry.key, entry.amount]);
}
