import { z } from 'zod';
import { addressSetting, commonSettings, defaultAddresses, integerSetting, loadConfig, optionalSetting } from '@actor/kit';

/**
 * Pool settings (environment variables):
 * - `POOL_ADDR`: `host:port` to listen on, default 127.0.0.1:50052.
 * - `POOL_DATABASE_URL`: overrides `DATABASE_URL` for this service.
 * - `POOL_DEFAULT_TTL_MS`: lease time to live when a caller sends 0, default 30 000.
 * - `POOL_WAIT_POLL_MS`: how often a replica with queued Acquires asks the database which of them may
 *   take a free slot when nothing local woke them (a release on another replica, an expiry), default 250.
 * - `POOL_SWEEP_INTERVAL_MS`: how often expired leases are marked ended and abandoned waiters removed,
 *   default 5000. Housekeeping only: an expired lease is free the moment its deadline passes.
 * - `POOL_DATABASE_MAX_CONNECTIONS`: Postgres connections this replica opens at most (ignored on PGlite),
 *   default 10. Every Acquire and Release holds one for a single statement, so this bounds how many
 *   run at once; a grant holds its connection through its commit's WAL flush, so with many concurrent
 *   callers more connections let more grants share one flush (group commit). Across replicas the sum
 *   must stay below the server's `max_connections`.
 * - `POOL_RELEASE_SYNCHRONOUS_COMMIT`: `true` makes a Release wait for its commit to reach disk, default
 *   `false`. Grants always do (a granted slot and its fencing epoch must survive a database crash). A
 *   release that a database crash loses leaves its lease open until its deadline, exactly as if the
 *   holder had died, so the reclaim bound still holds; and no grant of the slot it freed can survive
 *   without it, because that grant's synchronous commit flushes the WAL up to and past the release.
 *   Waiting for the flush costs one disk sync per release (~4 ms on this project's machines).
 * - `POOL_BATCH_AFTER_IN_FLIGHT`: how many grant statements (per want) and release statements may run at
 *   once before further requests of that kind wait for one to finish and then go out together in one
 *   statement and one commit, default 1. Idle, every request goes out at once; busy, fewer statements and
 *   commits serve the same requests (the pool's rate at 16-64 concurrent callers rests on this).
 * - `POOL_INSTANCE_ID`: this process's name in `pool.pool_instances`, default `<hostname>:<pid>:<random>`.
 *   Give each replica a stable one (a StatefulSet pod name) and a restarted replica drops the queued
 *   Acquire calls of its previous incarnation at start instead of waiting for them to lapse.
 * - plus LOG_LEVEL, DATABASE_URL, ACTOR_DATA_DIR (see kit).
 */
/** `true` / `false` (or `1` / `0`); unset or empty takes the default. */
function booleanSetting(defaultValue: boolean) {
  return z
    .enum(['true', 'false', '1', '0', ''], { message: 'must be true or false' })
    .optional()
    .transform((value) => (value === undefined || value === '' ? defaultValue : value === 'true' || value === '1'));
}

export const poolConfigSchema = z.object({
  ...commonSettings,
  POOL_ADDR: addressSetting(defaultAddresses.pool),
  POOL_DATABASE_URL: optionalSetting(),
  POOL_DEFAULT_TTL_MS: integerSetting(30_000).pipe(z.number().min(1, 'must be at least 1')),
  POOL_WAIT_POLL_MS: integerSetting(250).pipe(z.number().min(10, 'must be at least 10')),
  POOL_SWEEP_INTERVAL_MS: integerSetting(5_000).pipe(z.number().min(100, 'must be at least 100')),
  POOL_DATABASE_MAX_CONNECTIONS: integerSetting(10).pipe(z.number().min(1, 'must be at least 1')),
  POOL_RELEASE_SYNCHRONOUS_COMMIT: booleanSetting(false),
  POOL_BATCH_AFTER_IN_FLIGHT: integerSetting(1).pipe(z.number().min(1, 'must be at least 1')),
  POOL_INSTANCE_ID: optionalSetting(),
});

export type PoolConfig = z.infer<typeof poolConfigSchema>;

export function loadPoolConfig(env: Record<string, string | undefined> = process.env): PoolConfig {
  return loadConfig(poolConfigSchema, env);
}
