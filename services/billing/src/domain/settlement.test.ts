import { describe, expect, it } from 'vitest';
import { settle, usageFlags } from './settlement.js';

const prices = {
  inputMicroUsdPerMtok: 1_100_000,
  outputMicroUsdPerMtok: 4_400_000,
  microUsdPerSecond: 0,
  microUsdPerTask: 0,
};

function input(overrides: Partial<Parameters<typeof settle>[0]> = {}) {
  return {
    prices,
    usage: { inputTokens: 1_234, outputTokens: 567, durationMs: 900, calls: 1 },
    reservedMicroUsd: 10_000,
    reportedCostMicroUsd: 0,
    producedOutput: true,
    ...overrides,
  };
}

describe('settle', () => {
  it('charges the rate-card price, rounded up to the micro-dollar, with no flag', () => {
    // 1,234 x 1.1 + 567 x 4.4 = 1,357.4 + 2,494.8 = 3,852.2 micro-USD -> 3,853
    expect(settle(input())).toEqual({ costMicroUsd: 3_853, flags: [] });
  });

  it('flags output produced with zero reported tokens and time', () => {
    const result = settle(input({ usage: { inputTokens: 0, outputTokens: 0, durationMs: 0, calls: 1 } }));
    expect(result.flags).toEqual([usageFlags.zeroUsageWithOutput]);
    expect(result.costMicroUsd).toBe(0);
  });

  it('does not flag zero usage when nothing was produced', () => {
    const result = settle(input({ usage: { inputTokens: 0, outputTokens: 0, durationMs: 0, calls: 1 }, producedOutput: false }));
    expect(result.flags).toEqual([]);
  });

  it('flags a cost above the reservation and still charges it all', () => {
    const result = settle(input({ reservedMicroUsd: 3_852 }));
    expect(result).toEqual({ costMicroUsd: 3_853, flags: [usageFlags.overReservation] });
  });

  it('charges a backend-reported cost above the rate-card price, and says so', () => {
    const result = settle(input({ reportedCostMicroUsd: 5_000 }));
    expect(result).toEqual({ costMicroUsd: 5_000, flags: [usageFlags.reportedCostCharged] });
    expect(settle(input({ reportedCostMicroUsd: 3_000 })).costMicroUsd).toBe(3_853);
  });
});
