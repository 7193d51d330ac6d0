import type { Client } from 'nice-grpc';
import { sleep, type Logger } from '@actor/kit';
import type { Adapter, RegistryServiceDefinition } from '@actor/proto/registry';

/** How long a cached list may still serve placements while the registry cannot be reached. */
const STALE_LIMIT_MS = 5 * 60_000;
const WATCH_RETRY_MS = 1_000;

/**
 * The registry's adapters (with their current rate cards), as placement sees them. The list is read
 * over gRPC, reused for `ttlMs`, and dropped at once when WatchRegistry reports a change, so a new
 * rate card or a backend turned unready is seen by the next placement. Placement never reads the
 * registry's tables.
 */
export class AdapterCatalog {
  private cached?: { adapters: Adapter[]; fetchedAt: number };
  private inflight?: Promise<Adapter[]>;
  private generation = 0;
  private readonly stopController = new AbortController();
  private watching?: Promise<void>;

  constructor(
    private readonly registry: Client<typeof RegistryServiceDefinition>,
    private readonly options: { ttlMs: number; logger: Logger },
  ) {}

  /** Every declared adapter, ready or not (placement records why an unready one was left out). */
  async adapters(): Promise<Adapter[]> {
    const cached = this.cached;
    if (cached && Date.now() - cached.fetchedAt < this.options.ttlMs) return cached.adapters;
    this.inflight ??= this.fetch().finally(() => {
      this.inflight = undefined;
    });
    try {
      return await this.inflight;
    } catch (error) {
      if (cached && Date.now() - cached.fetchedAt < STALE_LIMIT_MS) {
        this.options.logger.warn({ err: error }, 'registry unreachable: placing with the last adapter list');
        return cached.adapters;
      }
      throw error;
    }
  }

  /** Forgets the cached list; the next read goes to the registry. */
  invalidate(): void {
    this.generation += 1;
    this.cached = undefined;
  }

  /** Follows WatchRegistry until stop(), reconnecting after a registry restart. */
  watch(): void {
    this.watching ??= this.followChanges();
  }

  async stop(): Promise<void> {
    this.stopController.abort();
    await this.watching;
  }

  private async fetch(): Promise<Adapter[]> {
    const generation = this.generation;
    const { adapters } = await this.registry.listAdapters({ readyOnly: false });
    // A change notified while this read was in flight may not be in it: do not cache it then.
    if (generation === this.generation) this.cached = { adapters, fetchedAt: Date.now() };
    return adapters;
  }

  private async followChanges(): Promise<void> {
    const signal = this.stopController.signal;
    while (!signal.aborted) {
      try {
        for await (const change of this.registry.watchRegistry({}, { signal })) {
          this.options.logger.debug({ change }, 'registry changed');
          this.invalidate();
        }
      } catch (error) {
        if (signal.aborted) return;
        this.options.logger.debug({ err: error }, 'registry watch interrupted; reconnecting');
      }
      // Changes made while the stream was down were not seen.
      this.invalidate();
      await sleep(WATCH_RETRY_MS, signal).catch(() => undefined);
    }
  }
}
