/** Money is integer micro-USD inside Actor; these helpers convert at the edges. */

export const MICRO_PER_USD = 1_000_000;

/** Dollars (as a caller writes them) to micro-USD, rounded to the nearest micro-dollar. */
export function usdToMicro(usd: number): number {
  return Math.round(usd * MICRO_PER_USD);
}

/**
 * The JSON shape of a cost: `usd` rounded half-up to the cent for people, `micro_usd` exact for
 * machines. 5_000 micro-USD ($0.005) shows as 0.01; 4_999 as 0.
 */
export function costJson(microUsd: number): { usd: number; micro_usd: number } {
  const cents = Math.floor((microUsd + 5_000) / 10_000);
  return { usd: cents / 100, micro_usd: microUsd };
}

/** `$0.0123` style text for explanations: at least two decimals, more when the amount is small. */
export function formatUsd(microUsd: number): string {
  const usd = microUsd / MICRO_PER_USD;
  if (microUsd !== 0 && Math.abs(usd) < 0.01) return `$${usd.toFixed(6).replace(/0+$/, '')}`;
  return `$${usd.toFixed(2)}`;
}

/** The UTC day (YYYY-MM-DD) an instant belongs to: budgets reset at UTC midnight. */
export function utcDay(at: Date = new Date()): string {
  return at.toISOString().slice(0, 10);
}
