import { z } from 'zod';
import {
  addressSetting,
  commonSettings,
  defaultAddresses,
  integerSetting,
  loadConfig,
  optionalSetting,
} from '@actor/kit';
import { parseAllowHosts } from './webhooks/webhook-address-guard.js';

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
 * - `EXECUTION_SECRET_CACHE_MS`: how long a project secret named by an agent slot's `api_key_secret`
 *   (a bring-your-own key, read from the registry's ResolveSecret) is reused before it is read again,
 *   default 30000; 0 reads it for every run. Short, so that a rotated key takes effect soon.
 * - Ollama: `ACTOR_OLLAMA_URL` (default http://127.0.0.1:11434, `off` to skip), `ACTOR_OLLAMA_TIMEOUT_MS`
 *   (default 1500), `ACTOR_OLLAMA_QUALITY_TIER` (default 2): at start-up the models an Ollama lists
 *   become `ai-sdk:ollama/<model>` adapters (see services/execution/src/agents/ai-sdk/ollama-discovery.ts).
 * - Webhook delivery (Standard Webhooks; see README "Webhooks"):
 *   - `EXECUTION_WEBHOOK_CONCURRENCY`: deliveries this process sends at once, default 8; 0 sends none
 *     here (another replica must).
 *   - `EXECUTION_WEBHOOK_TIMEOUT_MS`: per try, until the receiver's answer headers, default 10000.
 *   - `EXECUTION_WEBHOOK_POLL_INTERVAL_MS`: due deliveries are looked for this often, default 1000.
 *   - `EXECUTION_WEBHOOK_MAX_ATTEMPTS`: tries per delivery in all, default 10; then `failed`.
 *   - `EXECUTION_WEBHOOK_MAX_AGE_MS`: no try later than this after the state change, default
 *     259200000 (3 days); then `failed`.
 *   - `EXECUTION_WEBHOOK_BACKOFF_BASE_MS`: wait after the first failed try, default 5000; each next
 *     wait is 4x the last, with +-20% jitter.
 *   - `EXECUTION_WEBHOOK_BACKOFF_MAX_MS`: longest wait between tries, default 43200000 (12 h).
 *   - `ACTOR_WEBHOOK_ALLOW_HOSTS`: comma-separated host names or IPs exempt from the SSRF guard
 *     (loopback, private, link-local and metadata addresses are refused otherwise). For development
 *     and tests only; empty by default.
 * - `EXECUTION_CHECK_TIMEOUT_MS`: longest run of one check command in a task's working copy (its
 *   test command, each postcondition), default 600000 (10 minutes); a longer one is stopped (its whole
 *   process group) and fails the check. A task's `verify.check_timeout_ms` can lower it, not raise it.
 * - `EXECUTION_ORPHAN_SWEEP_MS`: how often working copies left by a crashed execution process on this
 *   host are removed (also once at start), default 600000; 0 sweeps only at start.
 * - `EXECUTION_CLASSIFIER_BACKEND`: an adapter type (`demo:beta-judge`, `ai-sdk:openai/gpt-4o-mini`)
 *   asked, after the local classifier, to classify each task with a structured answer; its answer
 *   wins when valid. The call is placed on that backend only, reserved, leased and settled to the
 *   task. Unset (default): the local classifier alone. Any failure leaves the local result.
 * - `EXECUTION_CLASSIFIER_TIMEOUT_MS`: time limit of that call, the wait for its slot included,
 *   default 15000; past it the local result stands.
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
  EXECUTION_CHECK_TIMEOUT_MS: integerSetting(600_000),
  EXECUTION_ORPHAN_SWEEP_MS: integerSetting(600_000),
  EXECUTION_CLASSIFIER_BACKEND: optionalSetting(),
  EXECUTION_CLASSIFIER_TIMEOUT_MS: integerSetting(15_000),
  EXECUTION_WEBHOOK_CONCURRENCY: integerSetting(8),
  EXECUTION_WEBHOOK_TIMEOUT_MS: integerSetting(10_000),
  EXECUTION_WEBHOOK_POLL_INTERVAL_MS: integerSetting(1_000),
  EXECUTION_WEBHOOK_MAX_ATTEMPTS: integerSetting(10),
  EXECUTION_WEBHOOK_MAX_AGE_MS: integerSetting(259_200_000),
  EXECUTION_WEBHOOK_BACKOFF_BASE_MS: integerSetting(5_000),
  EXECUTION_WEBHOOK_BACKOFF_MAX_MS: integerSetting(43_200_000),
  ACTOR_WEBHOOK_ALLOW_HOSTS: optionalSetting().transform(parseAllowHosts),
  EXECUTION_SECRET_CACHE_MS: integerSetting(30_000),
});

export type ExecutionConfig = z.infer<typeof executionConfigSchema>;

export function loadExecutionConfig(env: Record<string, string | undefined> = process.env): ExecutionConfig {
  return loadConfig(executionConfigSchema, env);
}
