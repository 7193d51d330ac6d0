import { appendFile, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { priceUsage, utcDay, type Prices } from '@actor/kit';
import { PortRefusal, type BillingPort, type Reservation } from '@actor/engine';

/** One settled call, one line of `<spend dir>/<UTC day>.jsonl`. */
const spendLineSchema = z.object({
  at: z.string(),
  task_id: z.string(),
  backend: z.string(),
  /** What the call cost, in integer micro-USD. */
  micro_usd: z.number().int().nonnegative(),
});

interface HeldReservation {
  reservationId: string;
  requestId: string;
  taskId: string;
  amountMicroUsd: number;
  state: 'held' | 'settled' | 'released';
  costMicroUsd: number;
}

export interface LocalBillingOptions {
  /** Where the per-day spend files live (`$ACTOR_HOME/spend`). */
  directory: string;
  /** The rate card of each backend, by adapter type. */
  rates: Map<string, Prices>;
  now?: () => Date;
}

/**
 * Billing on one machine. Reservations are held in memory and enforced against the task's and the
 * day's limits; settled costs are appended to one file per UTC day, so the day budget covers every
 * `actor run` of that day. Appends (one short line each) never lose another process's line; what
 * another process holds but has not settled yet is not seen.
 */
export class LocalBillingPort implements BillingPort {
  private readonly reservations: HeldReservation[] = [];
  private count = 0;
  private readonly now: () => Date;

  constructor(private readonly options: LocalBillingOptions) {
    this.now = options.now ?? (() => new Date());
  }

  async reserve(request: Parameters<BillingPort['reserve']>[0]): Promise<Reservation> {
    const earlier = this.reservations.find((reservation) => reservation.requestId === request.requestId);
    if (earlier) return { reservationId: earlier.reservationId, amountMicroUsd: earlier.amountMicroUsd };
    if (!Number.isInteger(request.amountMicroUsd) || request.amountMicroUsd < 0) {
      throw new Error(`a reservation amount is a non-negative integer, not ${request.amountMicroUsd}`);
    }
    const settledToday = await this.settledToday();
    // From here to the push nothing awaits, so two reservations of this process cannot both fit.
    const task = this.taskMicroUsd(request.taskId);
    const day = settledToday + this.heldMicroUsd();
    if (task + request.amountMicroUsd > request.perTaskLimitMicroUsd) {
      throw new PortRefusal(
        'actor.budget.exceeded',
        `the task's budget of ${request.perTaskLimitMicroUsd} micro-USD has ${Math.max(0, request.perTaskLimitMicroUsd - task)} left, ${request.amountMicroUsd} are needed`,
      );
    }
    if (day + request.amountMicroUsd > request.perDayLimitMicroUsd) {
      throw new PortRefusal(
        'actor.budget.exceeded',
        `today's budget of ${request.perDayLimitMicroUsd} micro-USD has ${Math.max(0, request.perDayLimitMicroUsd - day)} left, ${request.amountMicroUsd} are needed`,
      );
    }
    this.count += 1;
    const held: HeldReservation = {
      reservationId: `res_local_${this.count}`,
      requestId: request.requestId,
      taskId: request.taskId,
      amountMicroUsd: request.amountMicroUsd,
      state: 'held',
      costMicroUsd: 0,
    };
    this.reservations.push(held);
    return { reservationId: held.reservationId, amountMicroUsd: held.amountMicroUsd };
  }

  async settle(request: Parameters<BillingPort['settle']>[0]): Promise<{ costMicroUsd: number }> {
    const held = this.find(request.reservationId);
    if (held.state === 'settled') return { costMicroUsd: held.costMicroUsd };
    if (held.state === 'released') throw new Error(`reservation ${request.reservationId} was released; it cannot be settled`);
    const rates = this.options.rates.get(request.backend);
    const priced = request.reportedCostMicroUsd ?? (rates ? priceUsage(rates, request.usage) : 0);
    // A call is never billed above what was reserved for it: the reservation is the caller's cap.
    held.costMicroUsd = Math.min(held.amountMicroUsd, Math.max(0, Math.ceil(priced)));
    held.state = 'settled';
    if (held.costMicroUsd > 0) {
      const at = this.now();
      await mkdir(this.options.directory, { recursive: true });
      const line = { at: at.toISOString(), task_id: held.taskId, backend: request.backend, micro_usd: held.costMicroUsd };
      await appendFile(this.dayFile(at), `${JSON.stringify(line)}\n`);
    }
    return { costMicroUsd: held.costMicroUsd };
  }

  async release(reservationId: string): Promise<void> {
    const held = this.find(reservationId);
    if (held.state === 'held') held.state = 'released';
  }

  async spend(_projectId: string, taskId: string): Promise<{ taskMicroUsd: number; dayMicroUsd: number }> {
    const settledToday = await this.settledToday();
    return { taskMicroUsd: this.taskMicroUsd(taskId), dayMicroUsd: settledToday + this.heldMicroUsd() };
  }

  /** What every run settled today (UTC), from the day's file; unreadable lines are skipped. */
  async settledToday(): Promise<number> {
    let text: string;
    try {
      text = await readFile(this.dayFile(this.now()), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw error;
    }
    let total = 0;
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue;
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        continue;
      }
      const parsed = spendLineSchema.safeParse(value);
      if (parsed.success) total += parsed.data.micro_usd;
    }
    return total;
  }

  /** Reservations of this process neither settled nor released. */
  held(): number {
    return this.reservations.filter((reservation) => reservation.state === 'held').length;
  }

  private dayFile(at: Date): string {
    return join(this.options.directory, `${utcDay(at)}.jsonl`);
  }

  private taskMicroUsd(taskId: string): number {
    return this.reservations
      .filter((reservation) => reservation.taskId === taskId)
      .reduce((sum, reservation) => sum + amountOf(reservation), 0);
  }

  /** Held amounts only: settled ones are already in the day's file. */
  private heldMicroUsd(): number {
    return this.reservations.filter((reservation) => reservation.state === 'held').reduce((sum, reservation) => sum + reservation.amountMicroUsd, 0);
  }

  private find(reservationId: string): HeldReservation {
    const held = this.reservations.find((reservation) => reservation.reservationId === reservationId);
    if (!held) throw new Error(`no reservation ${reservationId}`);
    return held;
  }
}

function amountOf(reservation: HeldReservation): number {
  if (reservation.state === 'held') return reservation.amountMicroUsd;
  return reservation.state === 'settled' ? reservation.costMicroUsd : 0;
}
