import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { openDatabase, startGrpcServer, type Logger } from '@actor/kit';
import { PoolServiceDefinition } from '@actor/proto/pool';
import type { PoolConfig } from './config.js';
import { PoolRepository } from './db/pool-repository.js';
import { schema } from './db/schema.js';
import { LeaseAllocator } from './lease-allocator.js';
import { createPoolService } from './pool-service.js';

export interface StartPoolOptions {
  config: PoolConfig;
  logger: Logger;
}

/**
 * Database -> migrations -> start-up cleanup and registration -> gRPC server -> sweep. Used by main.ts
 * and by tests (port 0).
 */
export async function startPool({ config, logger }: StartPoolOptions) {
  const database = await openDatabase({
    service: 'pool',
    databaseUrl: config.POOL_DATABASE_URL ?? config.DATABASE_URL,
    dataDir: config.ACTOR_DATA_DIR,
    migrationsFolder: fileURLToPath(new URL('../migrations', import.meta.url)),
    schema,
    logger,
    maxConnections: config.POOL_DATABASE_MAX_CONNECTIONS,
    // The hot statements run as named prepared statements (see PoolRepository.runHot). Left to its
    // default, Postgres keeps planning a grant afresh when its generic plan looks dearer than the
    // custom ones, which cost a third of the database's CPU per cycle at one caller; their shape
    // does not depend on the values, so one generic plan serves every call. Only named statements are
    // affected: drizzle's other queries are planned per execution either way.
    sessionSettings: { plan_cache_mode: 'force_generic_plan' },
  });
  const repository = new PoolRepository(database.db, {
    releaseSynchronousCommit: config.POOL_RELEASE_SYNCHRONOUS_COMMIT,
    batchAfterInFlight: config.POOL_BATCH_AFTER_IN_FLIGHT,
  });

  // What a pool process leaves behind when it dies is its queued Acquire calls (leases belong to their
  // holders and end by their own deadline). Before serving: drop the registration of a previous
  // process under this same id (it is certainly gone: this one replaces it), then sweep, which ends
  // expired leases and drops instances whose heartbeat lapsed along with their waiters.
  const instanceId = config.POOL_INSTANCE_ID ?? `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const instanceAliveMs = Math.max(3 * config.POOL_SWEEP_INTERVAL_MS, 5_000);
  await repository.removeInstance(instanceId);
  const cleaned = await repository.sweep();
  logger.info({ instanceId, ...cleaned }, 'start-up cleanup done');
  await repository.heartbeatInstance(instanceId, instanceAliveMs);

  let allocator: LeaseAllocator | undefined;
  const server = await startGrpcServer({
    name: 'pool',
    address: config.POOL_ADDR,
    logger,
    serviceNames: [PoolServiceDefinition.fullName],
    register: (grpcServer, shutdownSignal) => {
      allocator = new LeaseAllocator({
        repository,
        logger,
        pollMs: config.POOL_WAIT_POLL_MS,
        instanceId,
        shutdownSignal,
      });
      grpcServer.add(
        PoolServiceDefinition,
        createPoolService({
          repository,
          allocator,
          defaults: { ttlMs: config.POOL_DEFAULT_TTL_MS },
          logger,
          shutdownSignal,
        }),
      );
    },
  });

  let sweeping = false;
  const sweepTimer = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    repository
      .heartbeatInstance(instanceId, instanceAliveMs)
      .then(() => repository.sweep())
      .then((swept) => {
        if (swept.expiredLeases > 0 || swept.abandonedWaiters > 0 || swept.goneInstances > 0) {
          logger.info(swept, 'swept expired leases and abandoned waiters');
          allocator?.wake();
        }
      })
      .catch((error: unknown) => logger.warn({ err: error }, 'sweep failed; retrying next interval'))
      .finally(() => {
        sweeping = false;
      });
  }, config.POOL_SWEEP_INTERVAL_MS);
  sweepTimer.unref();

  return {
    address: server.address,
    config,
    instanceId,
    server,
    database,
    repository,
    async stop() {
      clearInterval(sweepTimer);
      await server.shutdown();
      // A sweep in flight must finish before the database closes.
      while (sweeping) await new Promise((resolve) => setTimeout(resolve, 10));
      await repository
        .removeInstance(instanceId)
        .catch((error: unknown) => logger.warn({ err: error }, 'could not deregister; the row lapses on its own'));
      await database.close();
    },
  };
}
