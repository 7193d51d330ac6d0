import { priceUsage, type Prices, type Usage } from '@actor/kit';

/** Flags a usage sample may carry; each marks something a person should look at. */
export const usageFlags = {
  /**
   * The call produced output but the backend reported no usage: no tokens when the rate card prices
   * tokens (a stream that ended without its usage report), or no tokens and no time otherwise.
   * Likely a metering gap: the sample is billed as reported and flagged for a person to look at.
   */
  zeroUsageWithOutput: 'zero_usage_with_output',
  /** The cost is above what was reserved: the worst-case estimate was wrong. */
  overReservation: 'over_reservation',
  /** The backend's own reported cost was above the rate-card price, and was charged instead. */
  reportedCostCharged: 'reported_cost_charged',
} as const;

export interface SettlementInput {
  prices: Prices;
  usage: Usage;
  /** What the call reserved, in micro-USD. */
  reservedMicroUsd: number;
  /** The cost the backend itself reported, in micro-USD; 0 when it reports none. */
  reportedCostMicroUsd: number;
  producedOutput: boolean;
}

export interface Settlement {
  /** What is charged, in micro-USD. */
  costMicroUsd: number;
  flags: string[];
}

/**
 * The cost of a call: its usage priced by the rate card, or the backend's own reported cost when that
 * is higher (a CLI agent that meters itself is never billed below what it says it spent). Pricing
 * depends on the totals only, so a streamed and a non-streamed run of the same work cost the same.
 */
export function settle(input: SettlementInput): Settlement {
  const priced = priceUsage(input.prices, input.usage);
  const flags: string[] = [];
  let costMicroUsd = priced;
  if (input.reportedCostMicroUsd > priced) {
    costMicroUsd = input.reportedCostMicroUsd;
    flags.push(usageFlags.reportedCostCharged);
  }
  if (input.producedOutput && reportedNoUsage(input.prices, input.usage)) flags.push(usageFlags.zeroUsageWithOutput);
  if (costMicroUsd > input.reservedMicroUsd) flags.push(usageFlags.overReservation);
  return { costMicroUsd, flags };
}

// The caller measures duration itself, so time proves nothing about a token-priced backend's metering.
function reportedNoUsage(prices: Prices, usage: Usage): boolean {
  const noTokens = usage.inputTokens === 0 && usage.outputTokens === 0;
  const pricesTokens = prices.inputMicroUsdPerMtok > 0 || prices.outputMicroUsdPerMtok > 0;
  return noTokens && (pricesTokens || usage.durationMs === 0);
}
