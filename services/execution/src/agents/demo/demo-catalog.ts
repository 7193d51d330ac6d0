import { usdToMicro } from '@actor/kit';
import { TrustClass } from '@actor/proto/registry';
import { bootstrapReviewer, type AdapterDefinition } from '../agent.js';
import { DemoAgent } from './demo-agent.js';

/** One built-in demo backend: what it claims and how it behaves by default. */
export interface DemoBackend {
  /** Adapter type, `demo:<name>`. */
  type: string;
  displayName: string;
  /** `demo-alpha` or `demo-beta`: two families, so a judge of another family is always available. */
  modelFamily: string;
  /** Declared quality tier, 1 (basic) to 5 (frontier). */
  qualityTier: number;
  /** Fictional prices, USD per million tokens. */
  inputUsdPerMtok: number;
  outputUsdPerMtok: number;
  /** Typical run time in ms (each run varies by up to 20 % either way, deterministically). */
  latencyMs: number;
  /** Probability 0..1 that an answer is good (has no flaw marker). */
  quality: number;
}

export const demoBackends: readonly DemoBackend[] = [
  {
    type: 'demo:alpha-mini',
    displayName: 'Alpha Mini (demo)',
    modelFamily: 'demo-alpha',
    qualityTier: 1,
    inputUsdPerMtok: 0.1,
    outputUsdPerMtok: 0.4,
    latencyMs: 150,
    quality: 0.55,
  },
  {
    type: 'demo:alpha-pro',
    displayName: 'Alpha Pro (demo)',
    modelFamily: 'demo-alpha',
    qualityTier: 3,
    inputUsdPerMtok: 3,
    outputUsdPerMtok: 15,
    latencyMs: 900,
    quality: 0.95,
  },
  {
    type: 'demo:beta-small',
    displayName: 'Beta Small (demo)',
    modelFamily: 'demo-beta',
    qualityTier: 2,
    inputUsdPerMtok: 0.2,
    outputUsdPerMtok: 0.8,
    latencyMs: 250,
    quality: 0.75,
  },
  {
    type: 'demo:beta-large',
    displayName: 'Beta Large (demo)',
    modelFamily: 'demo-beta',
    qualityTier: 4,
    inputUsdPerMtok: 2,
    outputUsdPerMtok: 8,
    latencyMs: 600,
    quality: 0.95,
  },
];

export const demoLimits = {
  contextTokens: 32_000,
  maxOutputTokens: 2_000,
  concurrency: 8,
  timeoutMs: 60_000,
  egress: false,
};

export const demoRateCardSource = "demo: fictional prices, not a vendor's";

/** The definitions of every built-in demo backend; they need no key and are always ready. */
export function demoAdapterDefinitions(): AdapterDefinition[] {
  return demoBackends.map((backend) => ({
    declaration: {
      type: backend.type,
      displayName: backend.displayName,
      modelFamily: backend.modelFamily,
      capabilities: ['general', 'code', 'research', 'action', 'structured-output'],
      limits: { ...demoLimits },
      trustClass: TrustClass.TRUST_CLASS_FIRST_PARTY,
      qualityTier: backend.qualityTier,
      acceptsByoKey: false,
      requiresByoKey: false,
      demo: true,
      ready: true,
      readyReason: 'built-in demo backend: simulated answers, no key or network needed',
    },
    rateCard: {
      inputMicroUsdPerMtok: usdToMicro(backend.inputUsdPerMtok),
      outputMicroUsdPerMtok: usdToMicro(backend.outputUsdPerMtok),
      microUsdPerSecond: 0,
      microUsdPerTask: 0,
      source: demoRateCardSource,
      reviewer: bootstrapReviewer,
    },
    create: () => new DemoAgent(backend, demoLimits),
  }));
}
