import { z } from 'zod';
import {
  addressSetting,
  commonSettings,
  defaultAddresses,
  integerSetting,
  loadConfig,
  optionalSetting,
} from '@actor/kit';

/** A dollar amount setting (`0.50`), converted to micro-USD. */
function usdSetting(defaultUsd: string) {
  return z
    .string()
    .optional()
    .transform((value) => (value === undefined || value === '' ? defaultUsd : value))
    .pipe(z.string().regex(/^\d+(\.\d{1,6})?$/, 'must be a dollar amount such as 0.50'))
    .transform((value) => Math.round(Number(value) * 1_000_000));
}

/**
 * Execution settings (environment variables):
 * - `EXECUTION_ADDR`: `host:port` to listen on, default 127.0.0.1:50054.
 * - `REGISTRY_ADDR`, `POOL_ADDR`, `PLACEMENT_ADDR`, `BILLING_ADDR`: peers, defaults on 127.0.0.1.
 * - `EXECUTION_DATABASE_URL`: overrides `DATABASE_URL` for this service.
 * - `EXECUTION_WORKERS`: tasks run at once by this process, default 8.
 * - `EXECUTION_CLAIM_TTL_MS`: a task claim lapses this long after its last renewal (then another
 *   replica resumes the task), default 30000.
 * - `EXECUTION_POLL_INTERVAL_MS`: idle workers look for tasks this often, default 500.
 * - `EXECUTION_CANCEL_POLL_MS`: while tasks run, their cancel flags are read this often, so a cancel
 *   sent to any replica stops the adapter within about this long, default 250.
 * - `EXECUTION_MAX_RUNS`: interrupted runs before a task fails, default 5.
 * - `ACTOR_MAX_ATTEMPTS`: attempts per task (first run, escalations, failovers), default 3.
 * - `ACTOR_DEFAULT_PER_TASK_USD`: per-task budget when a task names none, default 0.50.
 * - `ACTOR_DEFAULT_PER_DAY_USD`: per-day budget when a task names none, default 10.00.
 * - `EXECUTION_BOOTSTRAP`: `true` (default) declares the discovered adapters to the registry and makes
 *   sure each has an agent slot in the pool at start; `false` leaves both untouched.
 * - `EXECUTION_DEFAULT_SLOT_CONCURRENCY`: concurrency of the default slot made per adapter, default 8.
 * - AI-SDK backend: `ACTOR_OPENAI_BASE_URL`, `ACTOR_OPENAI_API_KEY`, `ACTOR_OPENAI_MODEL` and friends
 *   (see services/execution/src/agents/ai-sdk/ai-sdk-discovery.ts), read by adapter discovery.
 * - plus LOG_LEVEL, DATABASE_URL, ACTOR_DATA_DIR (see kit).
 */
export const executionConfigSchema = z.object({
  ...commonSettings,
  EXECUTION_ADDR: addressSetting(defaultAddresses.execution),
  REGISTRY_ADDR: addressSetting(defaultAddresses.registry),
  POOL_ADDR: addressSetting(defaultAddresses.pool),
  PLACEMENT_ADDR: addressSetting(defaultAddresses.placement),
  BILLING_ADDR: addressSetting(defaultAddresses.billing),
  EXECUTION_DATABASE_URL: optionalSetting(),
  EXECUTION_WORKERS: integerSetting(8),
  EXECUTION_CLAIM_TTL_MS: integerSetting(30_000),
  EXECUTION_POLL_INTERVAL_MS: integerSetting(500),
  EXECUTION_CANCEL_POLL_MS: integerSetting(250),
  EXECUTION_MAX_RUNS: integerSetting(5),
  ACTOR_MAX_ATTEMPTS: integerSetting(3),
  ACTOR_DEFAULT_PER_TASK_USD: usdSetting('0.50'),
  ACTOR_DEFAULT_PER_DAY_USD: usdSetting('10.00'),
  EXECUTION_BOOTSTRAP: z
    .enum(['true', 'false', ''])
    .optional()
    .transform((value) => value !== 'false'),
  EXECUTION_DEFAULT_SLOT_CONCURRENCY: integerSetting(8),
});

export type ExecutionConfig = z.infer<typeof executionConfigSchema>;

export function loadExecutionConfig(env: Record<string, string | undefined> = process.env): ExecutionConfig {
  return loadConfig(executionConfigSchema, env);
}
