import { z } from 'zod';
import { addressSetting, commonSettings, defaultAddresses, integerSetting, loadConfig, optionalSetting } from '@actor/kit';

/**
 * Gateway settings (environment variables). The gateway keeps nothing durable, so it needs no database.
 * - `GATEWAY_PORT`: HTTP port, default 8080 (0 picks a free one, as tests do).
 * - `GATEWAY_HOST`: interface to bind, default 127.0.0.1 (set 0.0.0.0 in a container).
 * - `GATEWAY_MAX_BODY_BYTES`: largest request body accepted, default 1 MiB; larger bodies get 413.
 * - `GATEWAY_SSE_KEEPALIVE_MS`: interval of `: keepalive` comments on event streams, default 15 000.
 * - `GATEWAY_AUTH_CACHE_MS`: how long a token the registry accepted is trusted without asking again,
 *   default 30 000 (a revoked token keeps working at most this long). 0 disables the cache.
 * - `REGISTRY_ADDR`, `EXECUTION_ADDR`, `POOL_ADDR`, `BILLING_ADDR`, `PLACEMENT_ADDR`: `host:port` of each
 *   service, defaults on 127.0.0.1 (placement is only probed by /readyz).
 * - `LOG_LEVEL`: pino level, default `info`.
 */
export const gatewayConfigSchema = z.object({
  LOG_LEVEL: commonSettings.LOG_LEVEL,
  GATEWAY_PORT: integerSetting(8080).pipe(z.number().max(65_535, 'must be a port number')),
  GATEWAY_HOST: optionalSetting().transform((value) => value ?? '127.0.0.1'),
  GATEWAY_MAX_BODY_BYTES: integerSetting(1024 * 1024).pipe(z.number().min(1, 'must be at least 1')),
  GATEWAY_SSE_KEEPALIVE_MS: integerSetting(15_000).pipe(z.number().min(10, 'must be at least 10')),
  GATEWAY_AUTH_CACHE_MS: integerSetting(30_000),
  REGISTRY_ADDR: addressSetting(defaultAddresses.registry),
  POOL_ADDR: addressSetting(defaultAddresses.pool),
  PLACEMENT_ADDR: addressSetting(defaultAddresses.placement),
  EXECUTION_ADDR: addressSetting(defaultAddresses.execution),
  BILLING_ADDR: addressSetting(defaultAddresses.billing),
});

export type GatewayConfig = z.infer<typeof gatewayConfigSchema>;

export function loadGatewayConfig(env: Record<string, string | undefined> = process.env): GatewayConfig {
  return loadConfig(gatewayConfigSchema, env);
}
