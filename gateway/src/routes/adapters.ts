import { MICRO_PER_USD } from '@actor/kit';
import { TrustClass, type Adapter, type RateCard } from '@actor/proto/registry';
import type { Route } from '../router.js';
import { sendJson } from '../send-json.js';

/** `first_party`, `user_owned`, `partner`, `community`, `external` (unset counts as external). */
export function trustClassName(trustClass: TrustClass): string {
  const name = TrustClass[trustClass];
  if (!name || trustClass === TrustClass.TRUST_CLASS_UNSPECIFIED || trustClass === TrustClass.UNRECOGNIZED) return 'external';
  return name.slice('TRUST_CLASS_'.length).toLowerCase();
}

/** Prices are shown in exact dollars (not rounded to the cent: $0.15 per million tokens matters). */
function encodeRateCard(rateCard: RateCard) {
  return {
    revision: rateCard.revision,
    input_usd_per_mtok: rateCard.inputMicroUsdPerMtok / MICRO_PER_USD,
    output_usd_per_mtok: rateCard.outputMicroUsdPerMtok / MICRO_PER_USD,
    usd_per_second: rateCard.microUsdPerSecond / MICRO_PER_USD,
    usd_per_task: rateCard.microUsdPerTask / MICRO_PER_USD,
    source: rateCard.source,
    verified_at: rateCard.verifiedAt?.toISOString() ?? null,
    reviewer: rateCard.reviewer,
  };
}

/**
 * An adapter as GET /v1/adapters shows it. `demo: true` marks the built-in simulated backends;
 * `rate_card` is null until one is written; `limits` are zero where undeclared.
 */
export function encodeAdapter(adapter: Adapter) {
  return {
    type: adapter.type,
    display_name: adapter.displayName,
    model_family: adapter.modelFamily,
    capabilities: adapter.capabilities,
    limits: {
      context_tokens: adapter.limits?.contextTokens ?? 0,
      max_output_tokens: adapter.limits?.maxOutputTokens ?? 0,
      concurrency: adapter.limits?.concurrency ?? 0,
      timeout_ms: adapter.limits?.timeoutMs ?? 0,
      egress: adapter.limits?.egress ?? false,
    },
    trust_class: trustClassName(adapter.trustClass),
    quality_tier: adapter.qualityTier,
    accepts_byo_key: adapter.acceptsByoKey,
    requires_byo_key: adapter.requiresByoKey,
    demo: adapter.demo,
    ready: adapter.ready,
    ready_reason: adapter.readyReason,
    rate_card: adapter.rateCard ? encodeRateCard(adapter.rateCard) : null,
    updated_at: adapter.updateTime?.toISOString() ?? null,
  };
}

export const adapterRoutes: Route[] = [
  {
    method: 'GET',
    pattern: '/v1/adapters',
    access: 'authenticated',
    async handle(context) {
      const readyOnly = ['true', '1'].includes(context.url.searchParams.get('ready') ?? '');
      const answer = await context.clients.registry.listAdapters({ readyOnly }, { signal: context.signal });
      sendJson(context.response, 200, { data: answer.adapters.map(encodeAdapter) });
    },
  },
];
