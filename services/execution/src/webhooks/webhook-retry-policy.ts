/** How failed deliveries are retried (see config.ts for the settings and their defaults). */
export interface WebhookRetryPolicy {
  /** Tries in all, the first included; the last failure marks the delivery `failed`. */
  maxAttempts: number;
  /** No try is scheduled later than this long after the state change, in ms. */
  maxAgeMs: number;
  /** Wait after the first failed try, in ms; each later wait is four times the one before. */
  backoffBaseMs: number;
  /** Longest single wait, in ms (a `Retry-After` answer is capped here too). */
  backoffMaxMs: number;
}

/**
 * The wait before the next try after `attempts` failed tries: `base * 4^(attempts-1)` capped at the
 * maximum, times a random factor in [0.8, 1.2) so that many deliveries that failed together (a
 * receiver's outage) do not all come back at once; at least the receiver's `Retry-After`.
 */
export function retryDelayMs(
  policy: WebhookRetryPolicy,
  attempts: number,
  retryAfterMs?: number,
  random: () => number = Math.random,
): number {
  const exponential = Math.min(policy.backoffMaxMs, policy.backoffBaseMs * 4 ** Math.max(0, attempts - 1));
  const jittered = exponential * (0.8 + 0.4 * random());
  return Math.round(Math.min(policy.backoffMaxMs, Math.max(jittered, retryAfterMs ?? 0)));
}

/** When to try again after `attempts` failed tries, or undefined when the delivery is given up. */
export function nextAttemptAt(
  policy: WebhookRetryPolicy,
  attempts: number,
  createdAt: Date,
  now: Date,
  retryAfterMs?: number,
  random?: () => number,
): Date | undefined {
  if (attempts >= policy.maxAttempts) return undefined;
  const next = new Date(now.getTime() + retryDelayMs(policy, attempts, retryAfterMs, random));
  return next.getTime() > createdAt.getTime() + policy.maxAgeMs ? undefined : next;
}
