import { describe, expect, it } from 'vitest';
import { costJson, formatUsd, usdToMicro, utcDay } from './money.js';
import { priceUsage, worstCaseCost } from './pricing.js';

describe('money', () => {
  it('rounds dollars to the cent half up for people and keeps micro-dollars exact', () => {
    expect(costJson(126_410)).toEqual({ usd: 0.13, micro_usd: 126_410 });
    expect(costJson(5_000)).toEqual({ usd: 0.01, micro_usd: 5_000 });
    expect(costJson(4_999)).toEqual({ usd: 0, micro_usd: 4_999 });
    expect(costJson(0)).toEqual({ usd: 0, micro_usd: 0 });
    expect(costJson(1_234_567_890)).toEqual({ usd: 1234.57, micro_usd: 1_234_567_890 });
  });

  it('converts caller dollars to micro-dollars without float drift', () => {
    expect(usdToMicro(0.1)).toBe(100_000);
    expect(usdToMicro(0.000001)).toBe(1);
    expect(usdToMicro(5)).toBe(5_000_000);
  });

  it('formats small amounts with enough digits to be read', () => {
    expect(formatUsd(150)).toBe('$0.00015');
    expect(formatUsd(1_500_000)).toBe('$1.50');
  });

  it('counts days in UTC', () => {
    expect(utcDay(new Date('2026-11-29T23:59:59.999Z'))).toBe('2026-11-29');
    expect(utcDay(new Date('2026-11-30T00:00:00.000Z'))).toBe('2026-11-30');
  });
});

describe('priceUsage', () => {
  const prices = { inputMicroUsdPerMtok: 100_000, outputMicroUsdPerMtok: 400_000, microUsdPerSecond: 0, microUsdPerTask: 0 };

  it('prices tokens exactly and rounds the total up once', () => {
    // 1,234 x 0.1 + 567 x 0.4 = 123.4 + 226.8 = 350.2 micro-USD -> 351
    expect(priceUsage(prices, { inputTokens: 1_234, outputTokens: 567, durationMs: 0, calls: 1 })).toBe(351);
    expect(priceUsage(prices, { inputTokens: 10, outputTokens: 0, durationMs: 0, calls: 1 })).toBe(1);
    expect(priceUsage(prices, { inputTokens: 0, outputTokens: 0, durationMs: 0, calls: 1 })).toBe(0);
  });

  it('adds time and per-call fees', () => {
    const timed = { ...prices, microUsdPerSecond: 1_000, microUsdPerTask: 50 };
    expect(priceUsage(timed, { inputTokens: 0, outputTokens: 0, durationMs: 1_500, calls: 2 })).toBe(1_600);
  });

  it('worst case covers the declared maximum output and the whole time limit', () => {
    const timed = { ...prices, microUsdPerSecond: 10 };
    expect(worstCaseCost(timed, { maxOutputTokens: 2_000, timeoutMs: 60_000 }, 1_000)).toBe(100 + 800 + 600);
  });
});
