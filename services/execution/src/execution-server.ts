import { fileURLToPath } from 'node:url';
import { hostname } from 'node:os';
import { createClient, newId, openDatabase, startGrpcServer, type Logger } from '@actor/kit';
import { BillingServiceDefinition } from '@actor/proto/billing';
import { ExecutionServiceDefinition } from '@actor/proto/execution';
import { PlacementServiceDefinition } from '@actor/proto/placement';
import { PoolServiceDefinition } from '@actor/proto/pool';
import { RegistryServiceDefinition } from '@actor/proto/registry';
import { bootstrapAdapters } from './adapter-bootstrap.js';
import { createAgentFor, discoverAllAdapters } from './agents/adapter-catalog.js';
import type { ExecutionConfig } from './config.js';
import { TaskRepository } from './db/task-repository.js';
import { schema } from './db/schema.js';
import { createExecutionService } from './execution-service.js';
import { AdapterAgentsPort } from './ports/adapter-agents-port.js';
import { GrpcBillingPort } from './ports/grpc-billing-port.js';
import { GrpcPlacementPort } from './ports/grpc-placement-port.js';
import { GitWorkspacePort } from './ports/git-workspace-port.js';
import { GrpcPoolPort } from './ports/grpc-pool-port.js';
import { TaskMemoryPort } from './ports/task-memory-port.js';
import { GrpcSecretResolver } from './secrets/secret-resolver.js';
import { TaskEventHub } from './task-event-hub.js';
import { TaskWorker } from './worker/task-worker.js';
import { WebhookDeliveryLoop } from './webhooks/webhook-delivery-loop.js';
import { WebhookDeliveryStore } from './webhooks/webhook-delivery-store.js';

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
  // One resolver (and cache) for bring-your-own keys and webhook signing secrets.
  const secrets = new GrpcSecretResolver(registry, { cacheTtlMs: config.EXECUTION_SECRET_CACHE_MS });
  const agents = new AdapterAgentsPort(createAgentFor, { secrets });
  const pool = new GrpcPoolPort(poolClient);
  const workspace = new GitWorkspacePort({ checkTimeoutMs: config.EXECUTION_CHECK_TIMEOUT_MS });
  // Working copies whose execution process crashed on this host are removed at start and then periodically.
  const sweepOrphans = () =>
    workspace
      .sweepOrphans()
      .then((sweep) => {
        if (sweep.removed.length > 0) logger.info({ removed: sweep.removed }, 'removed working copies left by a stopped execution process');
        if (sweep.failed.length > 0) logger.warn({ failed: sweep.failed }, 'could not remove working copies left by a stopped execution process');
      })
      .catch((error: unknown) => logger.warn({ err: error }, 'sweeping orphan working copies failed'));
  void sweepOrphans();
  const orphanSweeps = config.EXECUTION_ORPHAN_SWEEP_MS > 0 ? setInterval(() => void sweepOrphans(), config.EXECUTION_ORPHAN_SWEEP_MS) : undefined;
  orphanSweeps?.unref();
  // Sends the webhook outbox the repository fills in its state-change transactions.
  const webhooks = new WebhookDeliveryLoop({
    store: new WebhookDeliveryStore(database.db),
    secrets,
    logger,
    retry: {
      maxAttempts: config.EXECUTION_WEBHOOK_MAX_ATTEMPTS,
      maxAgeMs: config.EXECUTION_WEBHOOK_MAX_AGE_MS,
      backoffBaseMs: config.EXECUTION_WEBHOOK_BACKOFF_BASE_MS,
      backoffMaxMs: config.EXECUTION_WEBHOOK_BACKOFF_MAX_MS,
    },
    concurrency: config.EXECUTION_WEBHOOK_CONCURRENCY,
    timeoutMs: config.EXECUTION_WEBHOOK_TIMEOUT_MS,
    pollIntervalMs: config.EXECUTION_WEBHOOK_POLL_INTERVAL_MS,
    allowHosts: config.ACTOR_WEBHOOK_ALLOW_HOSTS,
  });
  const worker = new TaskWorker({
    repository,
    hub,
    placement: new GrpcPlacementPort(placementClient, poolClient),
    billing,
    pool,
    agents,
    workspace,
    memory: new TaskMemoryPort(database.db),
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
    engine: {
      maxAttempts: config.ACTOR_MAX_ATTEMPTS,
      classifierBackend: config.EXECUTION_CLASSIFIER_BACKEND,
      classifierTimeoutMs: config.EXECUTION_CLASSIFIER_TIMEOUT_MS,
    },
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
          webhookAllowHosts: config.ACTOR_WEBHOOK_ALLOW_HOSTS,
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
  // Deliveries need no adapter: the outbox drains from the start (rows left by a previous run too).
  webhooks.start();
  // Not ready (grpc.health.v1) until the adapters are declared and the workers run.
  server.health.setStatus('unhealthy');
  server.health.setStatus('unhealthy', ExecutionServiceDefinition.fullName);
  // Discovery may wait (briefly) for a local Ollama to answer; the bootstrap, the workers and the
  // health status wait for it in turn, while the server already answers.
  const discovered = discoverAllAdapters(adapterEnv);
  const bootstrapped = config.EXECUTION_BOOTSTRAP
    ? discovered.then((catalog) => bootstrapAdapters({
        registry,
        pool: poolClient,
        definitions: catalog.definitions,
        notReady: catalog.notReady,
        slotConcurrency: config.EXECUTION_DEFAULT_SLOT_CONCURRENCY,
        logger,
      }))
    : discovered.then(() => undefined);
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
      clearInterval(orphanSweeps);
      await worker.stop();
      await webhooks.stop();
      await server.shutdown();
      await database.close();
    },
  };
}
