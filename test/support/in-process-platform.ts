import { createClient, type Logger } from '@actor/kit';
import { testDatabase } from '@actor/kit/testing';
import { BillingServiceDefinition } from '@actor/proto/billing';
import { ExecutionServiceDefinition } from '@actor/proto/execution';
import { PoolServiceDefinition } from '@actor/proto/pool';
import { loadBillingConfig } from '../../services/billing/src/config.js';
import { startBilling } from '../../services/billing/src/billing-server.js';
import { loadExecutionConfig } from '../../services/execution/src/config.js';
import { startExecution } from '../../services/execution/src/execution-server.js';
import { loadPlacementConfig } from '../../services/placement/src/config.js';
import { startPlacement } from '../../services/placement/src/placement-server.js';
import { loadPoolConfig } from '../../services/pool/src/config.js';
import { startPool } from '../../services/pool/src/pool-server.js';
import { loadRegistryConfig } from '../../services/registry/src/config.js';
import { startRegistry } from '../../services/registry/src/registry-server.js';

type TestDatabase = Awaited<ReturnType<typeof testDatabase>>;

const devToken = 'in-process-platform-dev-token';

export interface InProcessPlatform {
  execution: ReturnType<typeof createClient<typeof ExecutionServiceDefinition>>;
  billing: ReturnType<typeof createClient<typeof BillingServiceDefinition>>;
  pool: ReturnType<typeof createClient<typeof PoolServiceDefinition>>;
  addresses: { registry: string; pool: string; placement: string; billing: string; execution: string };
  /** The registry's development token (project prj_default, every scope), for a gateway in front. */
  devToken: string;
  /** The execution service's database, for starting another replica on it. */
  executionDatabase: TestDatabase;
  /** Starts another execution replica on the same database; stopped with the platform. */
  startExecutionReplica(env?: Record<string, string>): Promise<ReturnType<typeof createClient<typeof ExecutionServiceDefinition>>>;
  /** Gives every demo agent slot this configuration JSON and concurrency. */
  configureAgents(configuration: Record<string, unknown>, concurrency?: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The five services in this test process, each with its own gRPC server on a free port and its own
 * database, calling each other over real gRPC. `executionEnv` adds execution settings; `adapterEnv`
 * is what execution discovers adapters from (Ollama discovery is off unless it names ACTOR_OLLAMA_URL,
 * so that an Ollama on the test machine changes nothing).
 */
export async function startInProcessPlatform(
  logger: Logger,
  executionEnv: Record<string, string> = {},
  adapterEnv: Record<string, string> = {},
): Promise<InProcessPlatform> {
  const stops: Array<() => Promise<unknown>> = [];
  const databases = await Promise.all(Array.from({ length: 5 }, () => testDatabase()));
  stops.push(() => Promise.all(databases.map((database) => database.drop())));
  const [registryDb, poolDb, placementDb, billingDb, executionDb] = databases as [
    TestDatabase, TestDatabase, TestDatabase, TestDatabase, TestDatabase,
  ];
  const on = (database: TestDatabase) => ({ DATABASE_URL: database.databaseUrl, ACTOR_DATA_DIR: database.dataDir });
  const stop = async () => {
    for (const step of stops) await step();
  };
  try {
    const registry = await startRegistry({
      config: loadRegistryConfig({ REGISTRY_ADDR: '127.0.0.1:0', ACTOR_DEV_TOKEN: devToken, ...on(registryDb) }),
      secretKey: 'integration',
      logger,
    });
    stops.unshift(() => registry.stop());
    const pool = await startPool({ config: loadPoolConfig({ POOL_ADDR: '127.0.0.1:0', ...on(poolDb) }), logger });
    stops.unshift(() => pool.stop());
    const placement = await startPlacement({
      config: loadPlacementConfig({ PLACEMENT_ADDR: '127.0.0.1:0', REGISTRY_ADDR: registry.address, ...on(placementDb) }),
      logger,
    });
    stops.unshift(() => placement.stop());
    const billing = await startBilling({
      config: loadBillingConfig({ BILLING_ADDR: '127.0.0.1:0', REGISTRY_ADDR: registry.address, ...on(billingDb) }),
      logger,
    });
    stops.unshift(() => billing.stop());
    const startReplica = async (env: Record<string, string>) => {
      const server = await startExecution({
        config: loadExecutionConfig({
          EXECUTION_ADDR: '127.0.0.1:0',
          REGISTRY_ADDR: registry.address,
          POOL_ADDR: pool.address,
          PLACEMENT_ADDR: placement.address,
          BILLING_ADDR: billing.address,
          EXECUTION_POLL_INTERVAL_MS: '100',
          ...on(executionDb),
          ...executionEnv,
          ...env,
        }),
        logger,
        adapterEnv: { ACTOR_OLLAMA_URL: 'off', ...adapterEnv },
      });
      stops.unshift(() => server.stop());
      await server.ready;
      return server;
    };
    const execution = await startReplica({});
    const poolClient = createClient(PoolServiceDefinition, pool.address);
    return {
      execution: createClient(ExecutionServiceDefinition, execution.address),
      billing: createClient(BillingServiceDefinition, billing.address),
      pool: poolClient,
      addresses: {
        registry: registry.address,
        pool: pool.address,
        placement: placement.address,
        billing: billing.address,
        execution: execution.address,
      },
      devToken,
      executionDatabase: executionDb,
      async startExecutionReplica(env = {}) {
        const replica = await startReplica(env);
        return createClient(ExecutionServiceDefinition, replica.address);
      },
      async configureAgents(configuration, concurrency) {
        const { agents } = await poolClient.listAgents({});
        for (const agent of agents) {
          await poolClient.updateAgent({
            agent: { ...agent, configurationJson: JSON.stringify(configuration), concurrency: concurrency ?? agent.concurrency },
          });
        }
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
