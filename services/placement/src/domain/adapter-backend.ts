import { TrustClass, type Adapter, type RateCard } from '@actor/proto/registry';
import type { Backend, TrustName } from './placement-model.js';

const trustNames: Partial<Record<TrustClass, TrustName>> = {
  [TrustClass.TRUST_CLASS_FIRST_PARTY]: 'first-party',
  [TrustClass.TRUST_CLASS_USER_OWNED]: 'user-owned',
  [TrustClass.TRUST_CLASS_PARTNER]: 'partner',
  [TrustClass.TRUST_CLASS_COMMUNITY]: 'community',
};

/**
 * A registry adapter (declaration and current rate card) as the placement rules see it. Shared by the
 * placement service and the local `actor` CLI, so both place over the same view of a backend.
 */
export function backendFromAdapter(
  adapter: Omit<Adapter, 'updateTime' | 'rateCard'> & {
    rateCard?: Pick<RateCard, 'revision' | 'inputMicroUsdPerMtok' | 'outputMicroUsdPerMtok' | 'microUsdPerSecond' | 'microUsdPerTask'>;
  },
): Backend {
  const card = adapter.rateCard;
  return {
    type: adapter.type,
    displayName: adapter.displayName,
    modelFamily: adapter.modelFamily,
    capabilities: adapter.capabilities,
    contextTokens: adapter.limits?.contextTokens ?? 0,
    maxOutputTokens: adapter.limits?.maxOutputTokens ?? 0,
    timeoutMs: adapter.limits?.timeoutMs ?? 0,
    // Unknown or unspecified trust is treated as the least trusted: private mode fails closed.
    trust: trustNames[adapter.trustClass] ?? 'external',
    qualityTier: adapter.qualityTier,
    requiresByoKey: adapter.requiresByoKey,
    demo: adapter.demo,
    ready: adapter.ready,
    readyReason: adapter.readyReason,
    rateCard: card
      ? {
          revision: card.revision,
          inputMicroUsdPerMtok: card.inputMicroUsdPerMtok,
          outputMicroUsdPerMtok: card.outputMicroUsdPerMtok,
          microUsdPerSecond: card.microUsdPerSecond,
          microUsdPerTask: card.microUsdPerTask,
        }
      : undefined,
  };
}
