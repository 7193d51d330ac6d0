import { z } from 'zod';
import { addressSetting, commonSettings, defaultAddresses, integerSetting, loadConfig, optionalSetting } from '@actor/kit';

/** A non-negative decimal setting with a default (ratios such as a margin). */
function ratioSetting(defaultValue: number) {
  return z
    .string()
    .optional()
    .transform((value) => (value === undefined || value === '' ? String(defaultValue) : value))
    .pipe(z.string().regex(/^\d+(\.\d+)?$/, 'must be a non-negative decimal number such as 0.1'))
    .transform(Number);
}

/**
 * Placement settings (environment variables):
 * - `PLACEMENT_ADDR`: `host:port` to listen on, default 127.0.0.1:50053.
 * - `REGISTRY_ADDR`: the registry to read adapters and rate cards from, default 127.0.0.1:50051.
 * - `PLACEMENT_DATABASE_URL`: overrides `DATABASE_URL` for this service.
 * - `PLACEMENT_CIRCUIT_COOLDOWN_MS`: how long an opened circuit stays open before one probe call is
 *   allowed (half-open), in ms; default 30000.
 * - `PLACEMENT_HYSTERESIS_MARGIN`: how much better (relative score, 0.1 = 10%) a challenger must be to
 *   replace the incumbent backend of a project x task class x mode; default 0.1.
 * - `PLACEMENT_HYSTERESIS_WINDOW_MS`: how long, in ms, a challenger must keep beating the incumbent by
 *   the margin (at every placement in between) before it replaces it; 0 = at the first placement it
 *   does; default 0 (the routing simulator, bench/routing, shows what a window costs and saves). It
 *   must also have 5 observed outcomes (trial placements until then). A failover (the incumbent's
 *   circuit open, or a stand-in while it erred less than a cooldown ago) and a half-open probe never
 *   wait. See the README for the whole rule.
 * - `PLACEMENT_ADAPTER_CACHE_MS`: how long the adapter list read from the registry is reused, in ms
 *   (registry changes also invalidate it at once through WatchRegistry); default 2000.
 * - plus LOG_LEVEL, DATABASE_URL, ACTOR_DATA_DIR (see kit).
 */
export const placementConfigSchema = z.object({
  ...commonSettings,
  PLACEMENT_ADDR: addressSetting(defaultAddresses.placement),
  REGISTRY_ADDR: addressSetting(defaultAddresses.registry),
  PLACEMENT_DATABASE_URL: optionalSetting(),
  PLACEMENT_CIRCUIT_COOLDOWN_MS: integerSetting(30_000),
  PLACEMENT_HYSTERESIS_MARGIN: ratioSetting(0.1),
  PLACEMENT_HYSTERESIS_WINDOW_MS: integerSetting(0),
  PLACEMENT_ADAPTER_CACHE_MS: integerSetting(2_000),
});

export type PlacementConfig = z.infer<typeof placementConfigSchema>;

export function loadPlacementConfig(env: Record<string, string | undefined> = process.env): PlacementConfig {
  return loadConfig(placementConfigSchema, env);
}
