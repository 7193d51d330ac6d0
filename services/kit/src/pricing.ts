/**
 * The one pricing function. Billing prices usage samples with it and placement estimates with it,
 * so an estimate and the bill can never drift apart.
 */

/** Prices of one rate-card revision, in integer micro-USD. */
export interface Prices {
  /** Per million input tokens. */
  inputMicroUsdPerMtok: number;
  /** Per million output tokens. */
  outputMicroUsdPerMtok: number;
  /** Per second of wall-clock run time. */
  microUsdPerSecond: number;
  /** Flat fee per call. */
  microUsdPerTask: number;
}

/** What one call consumed. */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  durationMs: number;
  calls: number;
}

/**
 * Cost in micro-USD. Each component is computed exactly in rational arithmetic (integers scaled by
 * 1e6 tokens or 1e3 ms) and the total is rounded up once, so a sample is never billed below cost and
 * splitting work does not change the price by more than one micro-dollar per call.
 */
export function priceUsage(prices: Prices, usage: Usage): number {
  // Everything scaled to "micro-USD x 1e9" (lcm of per-Mtok and per-ms scaling) as BigInt, so no
  // floating-point error creeps into money.
  const scale = 1_000_000_000n;
  const tokenPart =
    (BigInt(usage.inputTokens) * BigInt(prices.inputMicroUsdPerMtok) +
      BigInt(usage.outputTokens) * BigInt(prices.outputMicroUsdPerMtok)) *
    1_000n; // per-Mtok -> x1e9 scale
  const timePart = BigInt(usage.durationMs) * BigInt(prices.microUsdPerSecond) * 1_000_000n; // per-ms -> x1e9
  const taskPart = BigInt(usage.calls) * BigInt(prices.microUsdPerTask) * scale;
  const total = tokenPart + timePart + taskPart;
  return Number((total + scale - 1n) / scale);
}

/** The worst case of one call: the declared maximum output, the prompt, and the full time limit. */
export function worstCaseCost(
  prices: Prices,
  limits: { maxOutputTokens: number; timeoutMs: number },
  inputTokens: number,
): number {
  return priceUsage(prices, {
    inputTokens,
    outputTokens: limits.maxOutputTokens,
    durationMs: prices.microUsdPerSecond > 0 ? limits.timeoutMs : 0,
    calls: 1,
  });
}

/** A rough token count for text when no tokenizer is at hand: four characters a token, rounded up. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}
