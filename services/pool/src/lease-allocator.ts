import { DomainError, fail, type Logger } from '@actor/kit';
import type { LeaseWithAgent, PoolRepository } from './db/pool-repository.js';
import { leaseProblemError, type AcquireSpec, type LeaseWant } from './domain/lease-request.js';

export interface LeaseAllocatorOptions {
  repository: PoolRepository;
  logger: Logger;
  /** How often this process looks for slots its queued requests may take without a local wake-up (another replica's release, an expiry). */
  pollMs: number;
  /** This process's row in `pool_instances`: queued requests are registered under it. */
  instanceId: string | null;
  /** Ends every queued request when the server shuts down. */
  shutdownSignal: AbortSignal;
}

/** A granted Acquire. */
export interface AcquireOutcome {
  lease: LeaseWithAgent;
  /** Whether the request's `releaseFirst` lease was ended by this call (false: none, or its holder had released it). */
  released: boolean;
}

/** A queued request of this process. */
interface LocalWaiter {
  woken: boolean;
  resume?: () => void;
}

/**
 * Grants leases, queueing callers fairly. A queued request keeps its place (its row in
 * `lease_waiters`, ordered by arrival across every replica) and a free slot only goes to the oldest
 * live request that can use it. Instead of every queued request polling, this process asks the
 * database which of its requests are at the head of the queue for a free slot and wakes only those:
 * at once after a local release or agent change, and every `pollMs` for releases on other replicas
 * and expiries.
 */
export class LeaseAllocator {
  private readonly waiting = new Map<number, LocalWaiter>();
  private generation = 0;
  private dispatching = false;
  private dispatchAgain = false;
  private pollTimer: NodeJS.Timeout | undefined;
  private refreshedAt = 0;
  // A waiter row stays claimable this long without a refresh; refreshed well before it lapses, so a
  // crashed replica's requests stop holding their place soon after.
  private readonly waiterAliveMs: number;
  private readonly waiterRefreshMs: number;

  constructor(private readonly options: LeaseAllocatorOptions) {
    this.waiterAliveMs = Math.max(10_000, options.pollMs * 20);
    this.waiterRefreshMs = Math.floor(this.waiterAliveMs / 4);
  }

  /** Something changed that may free a slot or change who can match: look for queue heads now. */
  wake(): void {
    this.generation++;
    void this.dispatch();
  }

  /**
   * Grants a lease, ending the request's `releaseFirst` lease first (in the first try's statement).
   * That release holds even when the grant then fails (busy, timed out, cancelled); when it is
   * refused, nothing is granted and the refusal is the error.
   */
  async acquire(spec: AcquireSpec, signal: AbortSignal): Promise<AcquireOutcome> {
    const { repository } = this.options;
    // A retried request id needs no look-up first: granting inserts the request id, whose unique
    // index sends a retry to the lease it already got. Only a retry that finds no free slot must look.
    const first = await repository.tryAcquireFirst(spec);
    if (first.released && 'problem' in first.released) {
      throw leaseProblemError(first.released.problem, spec.releaseFirst!.leaseId, spec.releaseFirst!.epoch);
    }
    const released = first.released?.released ?? false;
    // The slot it freed may be another request's turn (a queued one comes first).
    if (released) this.wake();
    if (first.granted) return { lease: first.granted, released };
    if (spec.requestId) {
      const earlier = await repository.findLeaseByRequestId(spec.requestId);
      if (earlier) return { lease: earlier, released };
    }
    await this.assertCanEverMatch(spec);
    if (!spec.wait) throw this.busyError(spec);

    const stop = AbortSignal.any([signal, this.options.shutdownSignal]);
    const deadline = Date.now() + spec.waitTimeoutMs;
    const seq = await repository.enqueueWaiter(spec, this.waiterAliveMs, this.options.instanceId);
    const waiter: LocalWaiter = { woken: false };
    this.waiting.set(seq, waiter);
    this.startPolling();
    let checkedGeneration = this.generation;
    let checkedAt = Date.now();
    try {
      for (;;) {
        const seen = this.generation;
        const lease = await repository.tryAcquire(spec, seq);
        if (lease) return { lease, released };
        // Whether anything could ever match changes only with agents: look after a local change and,
        // for changes made through another replica, every few seconds.
        if (seen !== checkedGeneration || Date.now() - checkedAt >= 2_000) {
          await this.assertCanEverMatch(spec);
          checkedGeneration = seen;
          checkedAt = Date.now();
        }
        const remaining = deadline - Date.now();
        if (remaining <= 0) {
          throw new DomainError(
            'deadline_exceeded',
            'actor.pool.wait_timeout',
            `no slot freed within ${spec.waitTimeoutMs} ms for ${describeWant(spec)}`,
          );
        }
        // Woken when at the head of the queue for a free slot; the timeout is only a backstop.
        await this.sleep(waiter, Math.min(remaining, this.options.pollMs * 10), stop);
        if (stop.aborted) throw this.stopError(signal);
      }
    } finally {
      this.waiting.delete(seq);
      if (this.waiting.size === 0) this.stopPolling();
      await repository.removeWaiter(seq).catch((error: unknown) => {
        this.options.logger.warn({ err: error, seq }, 'could not remove a lease waiter; it lapses on its own');
      });
      // The queue moved: the requests behind this one may take a slot that is already free.
      this.wake();
    }
  }

  private async dispatch(): Promise<void> {
    if (this.waiting.size === 0) return;
    if (this.dispatching) {
      this.dispatchAgain = true;
      return;
    }
    this.dispatching = true;
    try {
      do {
        this.dispatchAgain = false;
        for (const seq of await this.options.repository.queueHeads()) {
          const waiter = this.waiting.get(seq);
          if (!waiter) continue;
          waiter.woken = true;
          waiter.resume?.();
        }
      } while (this.dispatchAgain && this.waiting.size > 0);
    } catch (error) {
      this.options.logger.warn({ err: error }, 'could not look for queue heads; retrying at the next poll');
    } finally {
      this.dispatching = false;
    }
  }

  private startPolling(): void {
    if (this.pollTimer) return;
    this.refreshedAt = Date.now();
    this.pollTimer = setInterval(() => {
      void this.dispatch();
      if (Date.now() - this.refreshedAt >= this.waiterRefreshMs && this.waiting.size > 0) {
        this.refreshedAt = Date.now();
        this.options.repository
          .keepWaitersAlive([...this.waiting.keys()], this.waiterAliveMs)
          .catch((error: unknown) => this.options.logger.warn({ err: error }, 'could not refresh lease waiters'));
      }
    }, this.options.pollMs);
    this.pollTimer.unref();
  }

  private stopPolling(): void {
    clearInterval(this.pollTimer);
    this.pollTimer = undefined;
  }

  private sleep(waiter: LocalWaiter, ms: number, signal: AbortSignal): Promise<void> {
    if (waiter.woken || signal.aborted) {
      waiter.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        waiter.resume = undefined;
        waiter.woken = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      waiter.resume = done;
    });
  }

  private stopError(signal: AbortSignal) {
    return signal.aborted
      ? new DomainError('aborted', 'actor.cancelled', 'the caller cancelled the acquire')
      : fail.unavailable('the pool is shutting down; retry on another replica');
  }

  private busyError(spec: AcquireSpec) {
    return fail.exhausted(
      spec.agentId
        ? `agent ${spec.agentId} has no free slot (retry later or acquire with wait)`
        : `every agent fitting ${describeWant(spec)} is busy (retry later or acquire with wait)`,
      'actor.pool.busy',
    );
  }

  /** FAILED_PRECONDITION when no enabled agent could serve the request even if all were free. */
  private async assertCanEverMatch(want: LeaseWant): Promise<void> {
    const { repository } = this.options;
    if (want.agentId) {
      const agent = await repository.getAgent(want.agentId);
      if (!agent) throw fail.notFound(`no agent with id ${want.agentId}`, 'actor.pool.agent_not_found');
      if (!agent.enabled) {
        throw fail.precondition(`agent ${want.agentId} (${agent.name}) is disabled`, 'actor.pool.no_matching_agent');
      }
      return;
    }
    if ((await repository.countFittingAgents(want)) === 0) {
      throw fail.precondition(`no enabled agent fits ${describeWant(want)}`, 'actor.pool.no_matching_agent');
    }
  }
}

function describeWant(want: LeaseWant): string {
  const parts: string[] = [];
  if (want.agentId) parts.push(`agent ${want.agentId}`);
  if (want.capability) parts.push(`capability "${want.capability}"`);
  if (want.agentType) parts.push(`agent type "${want.agentType}"`);
  return parts.length > 0 ? parts.join(' and ') : 'any agent';
}
