import { describe, expect, it } from 'vitest';
import type { Backend } from '../../services/placement/src/domain/placement-model.js';
import { bestChain } from './routing-simulator.js';

function backend(type: string, qualityTier: number): Backend {
  return {
    type,
    displayName: type,
    modelFamily: 'alpha',
    capabilities: ['code'],
    contextTokens: 0,
    maxOutputTokens: 1_000,
    timeoutMs: 60_000,
    trust: 'first-party',
    qualityTier,
    requiresByoKey: false,
    demo: false,
    ready: true,
    readyReason: '',
    rateCard: { revision: 1, inputMicroUsdPerMtok: 0, outputMicroUsdPerMtok: 0, microUsdPerSecond: 0, microUsdPerTask: 0 },
  };
}

describe('bestChain', () => {
  const cheap = backend('cheap', 1);
  const mid = backend('mid', 2);
  const strong = backend('strong', 3);

  it('starts with a cheap backend that often fails when its failures escalate to a good, affordable next step', () => {
    // cheap -> mid: 100 + 0.7 x 1,000 = 800 for 0.3 + 0.7 x 0.9 = 0.93 (860 per success);
    // mid -> strong: 1,000 + 0.1 x 10,000 = 2,000 for 0.99 (2,020 per success).
    const rates = new Map([
      ['cheap', { acceptRate: 0.3, costMicroUsd: 100 }],
      ['mid', { acceptRate: 0.9, costMicroUsd: 1_000 }],
      ['strong', { acceptRate: 0.9, costMicroUsd: 10_000 }],
    ]);
    expect(bestChain([strong, cheap, mid], 2, (item) => rates.get(item.type)!).map((item) => item.type)).toEqual(['cheap', 'mid']);
  });

  it('skips a backend whose attempt is close to a pure waste', () => {
    // cheap almost never passes: cheap -> mid -> strong costs 2,027 for 0.99 (2,047 per success),
    // mid -> strong 1,150 for 0.99 (1,162 per success).
    const rates = new Map([
      ['cheap', { acceptRate: 0.02, costMicroUsd: 900 }],
      ['mid', { acceptRate: 0.9, costMicroUsd: 1_000 }],
      ['strong', { acceptRate: 0.9, costMicroUsd: 1_500 }],
    ]);
    expect(bestChain([cheap, mid, strong], 3, (item) => rates.get(item.type)!).map((item) => item.type)).toEqual(['mid', 'strong']);
  });

  it('never stops early: with attempts left and a stronger backend, the chain goes on', () => {
    // Stopping after cheap would be cheapest per success (100 / 0.5 = 200), but the engine escalates.
    const rates = new Map([
      ['cheap', { acceptRate: 0.5, costMicroUsd: 100 }],
      ['mid', { acceptRate: 0.5, costMicroUsd: 10_000 }],
      ['strong', { acceptRate: 0.5, costMicroUsd: 20_000 }],
    ]);
    const chain = bestChain([cheap, mid, strong], 2, (item) => rates.get(item.type)!).map((item) => item.type);
    expect(chain).toHaveLength(2);
    expect(chain).toEqual(['cheap', 'mid']);
  });

  it('is one backend long when one attempt is left', () => {
    const rates = new Map([
      ['cheap', { acceptRate: 0.1, costMicroUsd: 100 }],
      ['mid', { acceptRate: 0.9, costMicroUsd: 150 }],
      ['strong', { acceptRate: 0.95, costMicroUsd: 5_000 }],
    ]);
    expect(bestChain([cheap, mid, strong], 1, (item) => rates.get(item.type)!).map((item) => item.type)).toEqual(['mid']);
  });
});
