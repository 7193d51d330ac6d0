import { z } from 'zod';
import { addressSetting, commonSettings, defaultAddresses, integerSetting, loadConfig, optionalSetting } from '@actor/kit';

/**
 * Billing settings (environment variables):
 * - `BILLING_ADDR`: `host:port` to listen on, default 127.0.0.1:50055.
 * - `REGISTRY_ADDR`: the registry, where rate-card revisions are read; default 127.0.0.1:50051.
 * - `BILLING_DATABASE_URL`: overrides `DATABASE_URL` for this service.
 * - `BILLING_SWEEP_INTERVAL_MS`: how often expired reservations are looked for and freed, in ms;
 *   default 5000. Every replica sweeps; they never free the same reservation twice.
 * - plus LOG_LEVEL, DATABASE_URL, ACTOR_DATA_DIR (see kit).
 */
export const billingConfigSchema = z.object({
  ...commonSettings,
  BILLING_ADDR: addressSetting(defaultAddresses.billing),
  REGISTRY_ADDR: addressSetting(defaultAddresses.registry),
  BILLING_DATABASE_URL: optionalSetting(),
  BILLING_SWEEP_INTERVAL_MS: integerSetting(5_000).pipe(z.number().min(10, 'must be at least 10 ms')),
});

export type BillingConfig = z.infer<typeof billingConfigSchema>;

export function loadBillingConfig(env: Record<string, string | undefined> = process.env): BillingConfig {
  return loadConfig(billingConfigSchema, env);
}
