import type { Client } from 'nice-grpc';
import { fail, type Prices } from '@actor/kit';
import type { RateCard, RegistryServiceDefinition } from '@actor/proto/registry';

export interface PricedRevision {
  revision: number;
  prices: Prices;
}

/**
 * Rate-card revisions read from the registry, the only authority over prices. A revision never
 * changes once written, so a named revision is cached for the life of the process; revision 0 (the
 * current one) is asked for every time, since a newer revision may have been written since.
 */
export class RateCardSource {
  private readonly revisions = new Map<string, Promise<PricedRevision>>();

  constructor(private readonly registry: Client<typeof RegistryServiceDefinition>) {}

  async prices(adapterType: string, revision: number, signal?: AbortSignal): Promise<PricedRevision> {
    if (revision === 0) {
      const current = await this.fetch(adapterType, 0, signal);
      this.revisions.set(cacheKey(adapterType, current.revision), Promise.resolve(current));
      return current;
    }
    const key = cacheKey(adapterType, revision);
    let cached = this.revisions.get(key);
    if (!cached) {
      // Not tied to this caller's signal: others may be waiting on the same look-up.
      cached = this.fetch(adapterType, revision);
      this.revisions.set(key, cached);
      // A failed look-up (registry down, unknown revision) is not remembered.
      cached.catch(() => this.revisions.delete(key));
    }
    return cached;
  }

  private async fetch(adapterType: string, revision: number, signal?: AbortSignal): Promise<PricedRevision> {
    const { rateCards } = await this.registry.listRateCardRevisions({ adapterType, revision }, { signal });
    const card = rateCards[0];
    if (!card) {
      throw fail.notFound(`adapter "${adapterType}" has no rate card: it cannot be priced`, 'actor.rate_card.not_found');
    }
    return { revision: card.revision, prices: pricesOf(card) };
  }
}

function cacheKey(adapterType: string, revision: number): string {
  return `${adapterType}\u0000${revision}`;
}

function pricesOf(card: RateCard): Prices {
  return {
    inputMicroUsdPerMtok: card.inputMicroUsdPerMtok,
    outputMicroUsdPerMtok: card.outputMicroUsdPerMtok,
    microUsdPerSecond: card.microUsdPerSecond,
    microUsdPerTask: card.microUsdPerTask,
  };
}
