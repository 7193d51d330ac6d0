import { PortRefusal, type Lease, type PoolPort } from '@actor/engine';

export interface LocalPoolOptions {
  /** Adapter types this machine can run; an acquire for any other type is refused. */
  agentTypes: string[];
  /** How many calls may run at once in this process, all backends together; at least 1. */
  concurrency: number;
  /** The configuration every local slot hands to its adapter (demo backends: latency_ms, quality, ...). */
  configuration?: Record<string, unknown>;
}

interface Waiter {
  grant: () => void;
}

/**
 * No shared pool on a developer's machine: a local concurrency limit instead. Each acquire takes
 * one of `concurrency` permits, first come first served, waiting (abortably) when none is free.
 */
export class LocalPoolPort implements PoolPort {
  private inUse = 0;
  private waiters: Waiter[] = [];
  private readonly active = new Set<string>();
  private count = 0;
  private readonly types: Set<string>;

  constructor(private readonly options: LocalPoolOptions) {
    if (!Number.isInteger(options.concurrency) || options.concurrency < 1) throw new Error('concurrency must be an integer of at least 1');
    this.types = new Set(options.agentTypes);
  }

  async acquire(request: Parameters<PoolPort['acquire']>[0], signal: AbortSignal): Promise<Lease> {
    signal.throwIfAborted();
    if (request.agentId) throw new PortRefusal('actor.pool.no_matching_agent', `no agent ${request.agentId}: the local CLI has one slot per adapter type`);
    if (!this.types.has(request.agentType)) {
      throw new PortRefusal('actor.pool.no_matching_agent', `no local slot runs ${request.agentType}`);
    }
    if (this.inUse >= this.options.concurrency) await this.wait(signal);
    else this.inUse += 1;
    this.count += 1;
    const lease: Lease = {
      leaseId: `lse_local_${this.count}`,
      epoch: this.count,
      agentId: `local:${request.agentType}`,
      agentType: request.agentType,
      configuration: { ...this.options.configuration },
    };
    this.active.add(lease.leaseId);
    return lease;
  }

  async release(lease: Lease): Promise<void> {
    if (!this.active.delete(lease.leaseId)) return;
    const next = this.waiters.shift();
    // The permit passes straight to the oldest waiter, so a newcomer cannot overtake it.
    if (next) next.grant();
    else this.inUse -= 1;
  }

  /** Permits in use now. */
  busy(): number {
    return this.inUse;
  }

  private wait(signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        this.waiters = this.waiters.filter((other) => other !== waiter);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }
}
