import { describe, expect, it } from 'vitest';
import { nextAttemptAt, retryDelayMs, type WebhookRetryPolicy } from './webhook-retry-policy.js';

const policy: WebhookRetryPolicy = { maxAttempts: 10, maxAgeMs: 3 * 86_400_000, backoffBaseMs: 5_000, backoffMaxMs: 12 * 3_600_000 };

describe('webhook retry policy', () => {
  it('waits four times longer after each failure, within 20% jitter, up to the cap', () => {
    expect(retryDelayMs(policy, 1, undefined, () => 0.5)).toBe(5_000);
    expect(retryDelayMs(policy, 2, undefined, () => 0.5)).toBe(20_000);
    expect(retryDelayMs(policy, 3, undefined, () => 0)).toBe(64_000);
    expect(retryDelayMs(policy, 3, undefined, () => 0.999_999)).toBeCloseTo(96_000, -1);
    expect(retryDelayMs(policy, 9, undefined, () => 0.999_999)).toBe(policy.backoffMaxMs);
  });

  it('honours a longer Retry-After, never past the cap', () => {
    expect(retryDelayMs(policy, 1, 60_000, () => 0.5)).toBe(60_000);
    expect(retryDelayMs(policy, 1, 10 * 86_400_000, () => 0.5)).toBe(policy.backoffMaxMs);
  });

  it('gives up after the last attempt or past the maximum age', () => {
    const created = new Date('2026-01-01T00:00:00Z');
    expect(nextAttemptAt(policy, 9, created, created, undefined, () => 0.5)).toBeInstanceOf(Date);
    expect(nextAttemptAt(policy, 10, created, created)).toBeUndefined();
    const late = new Date(created.getTime() + policy.maxAgeMs - 1_000);
    expect(nextAttemptAt(policy, 2, created, late, undefined, () => 0.5)).toBeUndefined();
  });
});
