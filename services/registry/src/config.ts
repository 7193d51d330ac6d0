import { z } from 'zod';
import { addressSetting, commonSettings, defaultAddresses, loadConfig, optionalSetting } from '@actor/kit';

/**
 * Registry settings (environment variables):
 * - `REGISTRY_ADDR`: `host:port` to listen on, default 127.0.0.1:50051.
 * - `ACTOR_DEV_TOKEN`: when set, a token with every scope for the `default` project is ensured at start.
 * - `ACTOR_SECRET_KEY`: key material that encrypts project secrets. Unset: a random key is created once
 *   in `<ACTOR_DATA_DIR>/registry-secret.key` (fine for a laptop; set it in production).
 * - `REGISTRY_DATABASE_URL`: overrides `DATABASE_URL` for this service.
 * - plus LOG_LEVEL, DATABASE_URL, ACTOR_DATA_DIR (see kit).
 */
export const registryConfigSchema = z.object({
  ...commonSettings,
  REGISTRY_ADDR: addressSetting(defaultAddresses.registry),
  REGISTRY_DATABASE_URL: optionalSetting(),
  ACTOR_DEV_TOKEN: optionalSetting(),
  ACTOR_SECRET_KEY: optionalSetting(),
});

export type RegistryConfig = z.infer<typeof registryConfigSchema>;

export function loadRegistryConfig(env: Record<string, string | undefined> = process.env): RegistryConfig {
  return loadConfig(registryConfigSchema, env);
}
