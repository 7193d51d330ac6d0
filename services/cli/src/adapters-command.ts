import { formatUsd } from '@actor/kit';
import type { LocalAdapters } from './local-adapters.js';

/** One row of `actor adapters --json`. */
interface AdapterRow {
  type: string;
  ready: boolean;
  /** Why it is (not) usable. */
  reason: string;
  demo?: boolean;
  model_family?: string;
  quality_tier?: number;
  /** Whether `actor run` can place work on it (false for `script`, which needs a configured command). */
  runs_here?: boolean;
  prices?: { input_usd_per_mtok: number; output_usd_per_mtok: number; usd_per_second: number; source: string };
}

export function adapterRows(adapters: LocalAdapters): AdapterRow[] {
  const ready: AdapterRow[] = adapters.definitions.map((definition) => {
    const { declaration, rateCard } = definition;
    const runsHere = adapters.slotTypes.includes(declaration.type);
    return {
      type: declaration.type,
      ready: true,
      reason: runsHere ? declaration.readyReason : `${declaration.readyReason}; the CLI has no such configured slot, so it is not placed`,
      demo: declaration.demo,
      model_family: declaration.modelFamily,
      quality_tier: declaration.qualityTier,
      runs_here: runsHere,
      prices: {
        input_usd_per_mtok: rateCard.inputMicroUsdPerMtok / 1_000_000,
        output_usd_per_mtok: rateCard.outputMicroUsdPerMtok / 1_000_000,
        usd_per_second: rateCard.microUsdPerSecond / 1_000_000,
        source: rateCard.source,
      },
    };
  });
  const notReady: AdapterRow[] = adapters.notReady.map((adapter) => ({ type: adapter.type, ready: false, reason: adapter.reason }));
  return [...ready, ...notReady];
}

/** The table `actor adapters` prints. */
export function formatAdapters(rows: AdapterRow[]): string {
  const lines: string[] = [];
  for (const row of rows) {
    if (!row.ready) {
      lines.push(`not ready  ${row.type}`, `           ${row.reason}`);
      continue;
    }
    const prices = row.prices!;
    const price =
      prices.usd_per_second > 0
        ? `${formatUsd(prices.usd_per_second * 1_000_000)}/s`
        : `$${prices.input_usd_per_mtok}/$${prices.output_usd_per_mtok} per Mtok in/out`;
    const status = row.runs_here ? 'ready    ' : 'not here ';
    lines.push(
      `${status}  ${row.type}${row.demo ? ' (demo)' : ''}: family ${row.model_family}, tier ${row.quality_tier}, ${price}`,
      `           ${row.reason}`,
    );
  }
  return `${lines.join('\n')}\n`;
}
