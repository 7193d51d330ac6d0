/**
 * Micro-USD as text for explanations: exact to the micro-dollar, trailing zeros dropped, at least two
 * decimals (`$0.0123`, `$0.000021`, `$1.50`). Explanations are where a user checks the bill, so they
 * are never rounded to the cent.
 */
export function formatUsd(microUsd: number): string {
  const sign = microUsd < 0 ? '-' : '';
  const magnitude = Math.abs(Math.round(microUsd));
  const dollars = Math.floor(magnitude / 1_000_000);
  const fraction = String(magnitude % 1_000_000)
    .padStart(6, '0')
    .replace(/0+$/, '')
    .padEnd(2, '0');
  return `${sign}$${dollars}.${fraction}`;
}
