import { fileURLToPath } from 'node:url';
import { hostname } from 'node:os';
import { createClient, newId, openDatabase, startGrpcServer, type Logger } from '@actor/kit';
import { BillingServiceDefinition } from '@actor/proto/billing';
import { ExecutionServiceDefinition } from '@actor/proto/execution';
import { PlacementServiceDefinition } from '@actor/proto/placement';
import { PoolServiceDefinition } from '@actor/proto/pool';
import { RegistryServiceDefinition } from '@actor/proto/registry';
import { bootstrapAdapters } from './adapter-bootstrap.js';
import { createAgentFor, discoverAdapters } from './agents/adapter-catalog.js';
import type { ExecutionConfig } from './config.js';
import { TaskRepository } from './db/task-repository.js';
import { schema } from './db/schema.js';
import { createExecutionService } from './execution-service.js';
import { AdapterAgentsPort } from './ports/adapter-agents-port.js';
import { GrpcBillingPort } from './ports/grpc-billing-port.js';
import { GrpcPlacementPort } from './ports/grpc-placement-port.js';
import { GitWorkspacePort } from './ports/git-workspace-port.js';
import { GrpcPoolPort } from './ports/grpc-pool-port.js';
import { TaskEventHub } from './task-event-hub.js';
import { TaskWorker } from './worker/task-worker.js';

export interface StartExecutionOptions {
  config: ExecutionConfig;
  logger: Logger;
  /** Environment the adapters are discovered from (API keys, CLI paths); default process.env. */
  adapterEnv?: Record<string, string | undefined>;
}

/**
 * Database -> migrations -> gRPC server -> adapter bootstrap -> workers. The server answers before the
 * bootstrap finishes so that the platform's processes can start in any order.
 */
export async function startExecution({ config, logger, adapterEnv = process.env }: StartExecutionOptions) {
  const database = await openDatabase({
    service: 'execution',
    databaseUrl: config.EXECUTION_DATABASE_URL ?? config.DATABASE_URL,
    dataDir: config.ACTOR_DATA_DIR,
    migrationsFolder: fileURLToPath(new URL('../migrations', import.meta.url)),
    schema,
    logger,
  });
  const repository = new TaskRepository(database.db);
  const hub = new TaskEventHub();
  const registry = createClient(RegistryServiceDefinition, config.REGISTRY_ADDR);
  const poolClient = createClient(PoolServiceDefinition, config.POOL_ADDR);
  const placementClient = createClient(PlacementServiceDefinition, config.PLACEMENT_ADDR);
  const billingClient = createClient(BillingServiceDefinition, config.BILLING_ADDR);
  const billing = new GrpcBillingPort(billingClient);
  const agents = new AdapterAgentsPort(createAgentFor);
  const pool = new GrpcPoolPort(poolClient);
  const workspace = new GitWorkspacePort();
  const worker = new TaskWorker({
    repository,
    hub,
    placement: new GrpcPlacementPort(placementClient, poolClient),
    billing,
    pool,
    agents,
    workspace,
    leftovers: {
      releaseTaskReservations: (projectId, taskId) => billing.releaseTaskReservations(projectId, taskId),
      releaseWorkLeases: (projectId, workId) => pool.releaseWorkLeases(projectId, workId),
    },
    logger,
    workerId: `${hostname()}:${process.pid}:${newId('tok').slice(4)}`,
    concurrency: config.EXECUTION_WORKERS,
    claimTtlMs: config.EXECUTION_CLAIM_TTL_MS,
    pollIntervalMs: config.EXECUTION_POLL_INTERVAL_MS,
    cancelPollMs: config.EXECUTION_CANCEL_POLL_MS,
    maxRuns: config.EXECUTION_MAX_RUNS,
    engine: { maxAttempts: config.ACTOR_MAX_ATTEMPTS },
  });
  const server = await startGrpcServer({
    name: 'execution',
    address: config.EXECUTION_ADDR,
    logger,
    serviceNames: [ExecutionServiceDefinition.fullName],
    register: (grpcServer, shutdownSignal) =>
      grpcServer.add(
        ExecutionServiceDefinition,
        createExecutionService({
          repository,
          hub,
          worker,
          pool: poolClient,
          registry,
          billing,
          agents,
          workspace,
          defaults: {
            perTaskMicroUsd: config.ACTOR_DEFAULT_PER_TASK_USD,
            perDayMicroUsd: config.ACTOR_DEFAULT_PER_DAY_USD,
          },
          logger,
          shutdownSignal,
          watchPollMs: 1_000,
        }),
      ),
  });
  // Not ready (grpc.health.v1) until the adapters are declared and the workers run.
  server.health.setStatus('unhealthy');
  server.health.setStatus('unhealthy', ExecutionServiceDefinition.fullName);
  const discovered = discoverAdapters(adapterEnv);
  const bootstrapped = config.EXECUTION_BOOTSTRAP
    ? bootstrapAdapters({
        registry,
        pool: poolClient,
        definitions: discovered.definitions,
        notReady: discovered.notReady,
        slotConcurrency: config.EXECUTION_DEFAULT_SLOT_CONCURRENCY,
        logger,
      })
    : Promise.resolve();
  // Workers start once the adapters are declared, so the first task never races the bootstrap.
  const ready = bootstrapped.then(() => {
    worker.start();
    server.health.setStatus('healthy');
    server.health.setStatus('healthy', ExecutionServiceDefinition.fullName);
  });
  ready.catch((error: unknown) => logger.error({ err: error }, 'adapter bootstrap failed; no task will run'));
  return {
    address: server.address,
    server,
    database,
    /** Resolves when adapters are declared and workers run. */
    ready,
    async stop() {
      server.health.setStatus('unhealthy');
      await worker.stop();
      await server.shutdown();
      await database.close();
    },
  };
}
