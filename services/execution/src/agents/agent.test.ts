import { describe, expect, it } from 'vitest';
import { defaultTimeoutMs, mergeLimits, stricterLimit } from './agent.js';

const declared = { contextTokens: 32_000, maxOutputTokens: 2_000, concurrency: 8, timeoutMs: 60_000, egress: false };

describe('mergeLimits', () => {
  it('keeps the stricter of the caller and the declaration, limit by limit', () => {
    expect(mergeLimits({ timeoutMs: 90_000, maxOutputTokens: 500 }, declared)).toEqual({
      timeoutMs: 60_000,
      maxOutputTokens: 500,
      contextTokens: 32_000,
    });
    expect(mergeLimits({ timeoutMs: 5_000, contextTokens: 100_000 }, declared)).toMatchObject({ timeoutMs: 5_000, contextTokens: 32_000 });
  });

  it('treats zero, negative and missing values as "not set" on either side', () => {
    const undeclared = { ...declared, timeoutMs: 0, maxOutputTokens: 0 };
    expect(mergeLimits({ timeoutMs: 0, maxOutputTokens: -1 }, undeclared)).toEqual({
      timeoutMs: defaultTimeoutMs,
      maxOutputTokens: undefined,
      contextTokens: 32_000,
    });
    expect(mergeLimits({ timeoutMs: 1_500 }, undefined)).toEqual({ timeoutMs: 1_500, maxOutputTokens: undefined, contextTokens: undefined });
  });

  it('falls back to the default timeout of 120 s only when neither side sets one', () => {
    expect(mergeLimits({}, undefined).timeoutMs).toBe(120_000);
    expect(mergeLimits({}, declared).timeoutMs).toBe(60_000);
  });
});

describe('stricterLimit', () => {
  it('ignores non-finite values', () => {
    expect(stricterLimit(Number.NaN, 10)).toBe(10);
    expect(stricterLimit(Number.POSITIVE_INFINITY, undefined)).toBeUndefined();
  });
});
