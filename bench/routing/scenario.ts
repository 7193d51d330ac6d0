import { readFileSync } from 'node:fs';
import { z } from 'zod';

/**
 * A routing scenario, read from a JSON file under bench/routing/scenarios/. Everything the simulated
 * world hides from the placer (true success rates, error rates, latencies, outages) and everything it
 * declares (tiers, rate cards, limits) is here, so a new scenario needs no code change. Task indexes
 * count from 0; simulated time advances `taskIntervalMs` per task.
 */

const prices = z.object({
  /** Per million input tokens, micro-USD. */
  inputMicroUsdPerMtok: z.number().int().nonnegative(),
  /** Per million output tokens, micro-USD. */
  outputMicroUsdPerMtok: z.number().int().nonnegative(),
  microUsdPerSecond: z.number().int().nonnegative().default(0),
  microUsdPerTask: z.number().int().nonnegative().default(0),
});

const simulatedBackend = z.object({
  type: z.string().min(1),
  modelFamily: z.string().min(1),
  /** Declared tier 1..5: the placer's prior, not the truth. */
  qualityTier: z.number().int().min(1).max(5),
  maxOutputTokens: z.number().int().positive(),
  contextTokens: z.number().int().nonnegative().default(0),
  timeoutMs: z.number().int().positive().default(120_000),
  prices,
  /** Hidden: the mean output tokens of an answer (the declared maximum caps it). */
  outputTokens: z.number().int().positive(),
  /** Hidden: per task class, the chance that an answer is actually right. The keys are the classes it serves. */
  successRate: z.record(z.string(), z.number().min(0).max(1)),
  /** Hidden: the chance that a call errors while the backend is up. */
  errorRate: z.number().min(0).max(1).default(0.01),
  /** Hidden: log-normal latency, median in ms and the sigma of its logarithm. */
  latencyMs: z.object({ median: z.number().positive(), spread: z.number().nonnegative().default(0.3) }),
  /** The first task at which it is declared (a backend that appears midway). */
  fromTask: z.number().int().nonnegative().default(0),
  /** Task index ranges [fromTask, toTask) during which every call errors after `outageLatencyMs`. */
  outages: z.array(z.object({ fromTask: z.number().int().nonnegative(), toTask: z.number().int().positive() })).default([]),
  outageLatencyMs: z.number().int().positive().default(500),
  /** New rate cards from a task index on (a new revision each). */
  priceChanges: z.array(z.object({ atTask: z.number().int().nonnegative(), prices })).default([]),
  /**
   * Hidden: new per-class success rates from a task index on (a model update that regresses or improves it;
   * classes not named keep their rate). Nothing is declared: the placer sees it only in outcomes.
   */
  qualityChanges: z
    .array(z.object({ atTask: z.number().int().nonnegative(), successRate: z.record(z.string(), z.number().min(0).max(1)) }))
    .default([]),
});

export const scenarioSchema = z.object({
  name: z.string().min(1),
  description: z.string(),
  seed: z.number().int(),
  tasks: z.number().int().positive(),
  taskIntervalMs: z.number().int().positive().default(2_000),
  taskBudgetMicroUsd: z.number().int().positive(),
  maxAttempts: z.number().int().positive().default(3),
  circuitCooldownMs: z.number().int().positive().default(30_000),
  hysteresisMargin: z.number().nonnegative().default(0.1),
  /** As PLACEMENT_HYSTERESIS_WINDOW_MS, in simulated time. */
  hysteresisWindowMs: z.number().int().nonnegative().default(0),
  classes: z
    .array(
      z.object({
        name: z.string().min(1),
        weight: z.number().positive(),
        /** Median prompt size; each task draws around it (log-normal, sigma 0.5). */
        inputTokens: z.number().int().positive(),
      }),
    )
    .min(1),
  verifier: z.object({
    /** Chance that a wrong answer is accepted. */
    missBadRate: z.number().min(0).max(1),
    /** Chance that a right answer is rejected. */
    rejectGoodRate: z.number().min(0).max(1),
    /** What one check costs, micro-USD (the judge call), charged to every answer checked. */
    costMicroUsd: z.number().int().nonnegative().default(0),
  }),
  backends: z.array(simulatedBackend).min(1),
});

export type Scenario = z.infer<typeof scenarioSchema>;
export type SimulatedBackend = z.infer<typeof simulatedBackend>;
export type ScenarioPrices = z.infer<typeof prices>;

export function loadScenario(path: string): Scenario {
  const parsed = scenarioSchema.safeParse(JSON.parse(readFileSync(path, 'utf8')));
  if (!parsed.success) throw new Error(`${path}: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}
