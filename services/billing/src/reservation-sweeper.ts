import type { Logger } from '@actor/kit';
import type { BillingRepository } from './db/billing-repository.js';

export interface ReservationSweeperOptions {
  repository: BillingRepository;
  logger: Logger;
  /** Pause between sweeps, in ms. */
  intervalMs: number;
  /** Reservations expired per transaction; default 500. */
  batchSize?: number;
}

/**
 * Frees reservations whose holder never settled nor released them (it died, or lost the result).
 * Every billing replica runs one; SKIP LOCKED keeps them from freeing the same reservation twice.
 */
export class ReservationSweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;
  private stopped = true;

  constructor(private readonly options: ReservationSweeperOptions) {}

  start(): void {
    this.stopped = false;
    this.schedule();
  }

  /** Stops the timer and waits for a sweep in progress to finish. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }

  /** Expires every reservation past its deadline now; returns how many this call expired. */
  async sweepOnce(): Promise<number> {
    const batchSize = this.options.batchSize ?? 500;
    let total = 0;
    for (;;) {
      const expired = await this.options.repository.expireReservations(batchSize);
      total += expired;
      if (expired < batchSize) return total;
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), this.options.intervalMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    this.running = this.sweepOnce();
    try {
      const expired = await this.running;
      if (expired > 0) this.options.logger.info({ expired }, 'expired abandoned reservations');
    } catch (error) {
      // The next tick tries again; a database blip must not kill the sweeper.
      this.options.logger.warn({ err: error }, 'reservation sweep failed');
    } finally {
      this.running = undefined;
      this.schedule();
    }
  }
}
