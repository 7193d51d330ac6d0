import { TrustClass } from '@actor/proto/registry';
import { bootstrapReviewer, type AdapterDefinition } from '../agent.js';
import { ScriptAgent, scriptAdapterType } from './script-agent.js';

export const scriptLimits = {
  // A script reads stdin and writes stdout: no tokens, so no context or output limit to declare.
  contextTokens: 0,
  maxOutputTokens: 0,
  concurrency: 4,
  timeoutMs: 300_000,
  egress: false,
};

/** A tenth of a micro-dollar a second would round to nothing: one micro-USD per second (3.6 cents an hour). */
const scriptMicroUsdPerSecond = 1;

/**
 * The `script` adapter: always declared, since it needs nothing installed, but it runs only on agent
 * slots whose configuration names a command (see `scriptConfigurationSchema`).
 */
export function scriptAdapterDefinition(): AdapterDefinition {
  return {
    declaration: {
      type: scriptAdapterType,
      displayName: 'Script (configured command, no AI)',
      modelFamily: 'none',
      capabilities: ['action', 'general'],
      limits: { ...scriptLimits },
      trustClass: TrustClass.TRUST_CLASS_FIRST_PARTY,
      qualityTier: 1,
      acceptsByoKey: true,
      requiresByoKey: false,
      demo: false,
      ready: true,
      readyReason: 'runs the command an admin configured on the agent slot (configuration.command); a slot without one fails',
    },
    rateCard: {
      inputMicroUsdPerMtok: 0,
      outputMicroUsdPerMtok: 0,
      microUsdPerSecond: scriptMicroUsdPerSecond,
      microUsdPerTask: 0,
      source: 'operator default: local compute, one micro-USD per second of run time',
      reviewer: bootstrapReviewer,
    },
    // Script slots are made by an admin with a command; a default slot without one could only fail.
    defaultSlot: false,
    create: () => new ScriptAgent({ ...scriptLimits }),
  };
}
