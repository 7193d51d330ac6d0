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

  it('flags a token-priced run with output but no tokens, even when its time was measured', () => {
    // A stream that ended without its usage report: the caller timed it, the backend metered nothing.
    const result = settle(input({ usage: { inputTokens: 0, outputTokens: 0, durationMs: 2_500, calls: 1 } }));
    expect(result).toEqual({ costMicroUsd: 0, flags: [usageFlags.zeroUsageWithOutput] });
  });

  it('does not flag a time-priced run that reports time but no tokens', () => {
    const timePriced = { inputMicroUsdPerMtok: 0, outputMicroUsdPerMtok: 0, microUsdPerSecond: 50, microUsdPerTask: 0 };
    const usage = { inputTokens: 0, outputTokens: 0, durationMs: 2_000, calls: 1 };
    expect(settle(input({ prices: timePriced, usage }))).toEqual({ costMicroUsd: 100, flags: [] });
    expect(settle(input({ prices: timePriced, usage: { ...usage, durationMs: 0 } })).flags).toEqual([usageFlags.zeroUsageWithOutput]);
  });

  it('costs a streamed and a non-streamed run of the same work the same, to the micro-dollar', () => {
    // Pricing sees totals only: a streamed run reports the sum of its deltas and often no cost of its
    // own; a non-streamed one the response's totals, maybe with a lower backend-reported cost.
    const usage = { inputTokens: 1_234, outputTokens: 567, durationMs: 900, calls: 1 };
    const streamed = settle(input({ usage: { ...usage }, reportedCostMicroUsd: 0 }));
    const whole = settle(input({ usage: { ...usage }, reportedCostMicroUsd: 3_800, reservedMicroUsd: 50_000 }));
    expect(streamed).toEqual({ costMicroUsd: 3_853, flags: [] });
    expect(whole).toEqual(streamed);
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
