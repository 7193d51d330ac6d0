import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, createLogger, type Logger } from '@actor/kit';
import { testDatabase } from '@actor/kit/testing';
import { BillingServiceDefinition } from '@actor/proto/billing';
import { ExecutionServiceDefinition, TaskState, type TaskEvent } from '@actor/proto/execution';
import { PlacementServiceDefinition } from '@actor/proto/placement';
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

/**
 * The five services in one test process, each with its own gRPC server on a free port and its own
 * database, calling each other over real gRPC: a task's money, leases and decisions land in the
 * service that owns them.
 */
describe('a task across the five services', () => {
  const logger: Logger = createLogger('integration', 'silent');
  const stops: Array<() => Promise<unknown>> = [];
  let execution: ReturnType<typeof createClient<typeof ExecutionServiceDefinition>>;
  let billing: ReturnType<typeof createClient<typeof BillingServiceDefinition>>;
  let pool: ReturnType<typeof createClient<typeof PoolServiceDefinition>>;
  let placement: ReturnType<typeof createClient<typeof PlacementServiceDefinition>>;

  beforeAll(async () => {
    const databases = await Promise.all(Array.from({ length: 5 }, () => testDatabase()));
    stops.push(() => Promise.all(databases.map((database) => database.drop())));
    const [registryDb, poolDb, placementDb, billingDb, executionDb] = databases as [
      (typeof databases)[0], (typeof databases)[0], (typeof databases)[0], (typeof databases)[0], (typeof databases)[0],
    ];
    const on = (database: (typeof databases)[0]) => ({ DATABASE_URL: database.databaseUrl, ACTOR_DATA_DIR: database.dataDir });

    const registry = await startRegistry({
      config: loadRegistryConfig({ REGISTRY_ADDR: '127.0.0.1:0', ...on(registryDb) }),
      secretKey: 'integration',
      logger,
    });
    stops.unshift(() => registry.stop());
    const poolServer = await startPool({ config: loadPoolConfig({ POOL_ADDR: '127.0.0.1:0', ...on(poolDb) }), logger });
    stops.unshift(() => poolServer.stop());
    const placementServer = await startPlacement({
      config: loadPlacementConfig({ PLACEMENT_ADDR: '127.0.0.1:0', REGISTRY_ADDR: registry.address, ...on(placementDb) }),
      logger,
    });
    stops.unshift(() => placementServer.stop());
    const billingServer = await startBilling({
      config: loadBillingConfig({ BILLING_ADDR: '127.0.0.1:0', REGISTRY_ADDR: registry.address, ...on(billingDb) }),
      logger,
    });
    stops.unshift(() => billingServer.stop());
    const executionServer = await startExecution({
      config: loadExecutionConfig({
        EXECUTION_ADDR: '127.0.0.1:0',
        REGISTRY_ADDR: registry.address,
        POOL_ADDR: poolServer.address,
        PLACEMENT_ADDR: placementServer.address,
        BILLING_ADDR: billingServer.address,
        EXECUTION_POLL_INTERVAL_MS: '100',
        ...on(executionDb),
      }),
      logger,
      adapterEnv: {},
    });
    stops.unshift(() => executionServer.stop());
    await executionServer.ready;

    execution = createClient(ExecutionServiceDefinition, executionServer.address);
    billing = createClient(BillingServiceDefinition, billingServer.address);
    pool = createClient(PoolServiceDefinition, poolServer.address);
    placement = createClient(PlacementServiceDefinition, placementServer.address);

    // Instant demo backends that always answer well: this test is about the flow, not the demos.
    const { agents } = await pool.listAgents({});
    for (const agent of agents) {
      await pool.updateAgent({ agent: { ...agent, configurationJson: JSON.stringify({ latency_ms: 0, quality: 1 }) } });
    }
  }, 180_000);

  afterAll(async () => {
    for (const stop of stops) await stop();
  });

  async function runToEnd(taskId: string): Promise<TaskEvent[]> {
    const events: TaskEvent[] = [];
    for await (const { event } of execution.watchTask({ taskId, projectId: 'prj_default' })) events.push(event!);
    return events;
  }

  it('succeeds, and each service holds its own part of the story', async () => {
    const { task: created } = await execution.createTask({ projectId: 'prj_default', input: 'Name three colours', mode: 'cheapest' });
    const events = await runToEnd(created!.id);
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    const { task } = await execution.getTask({ taskId: created!.id, projectId: 'prj_default' });
    expect(task?.state).toBe(TaskState.TASK_STATE_SUCCEEDED);
    expect(task?.result).toContain('demo');

    // Billing: one usage sample per call (worker and judge), summing to the task's cost.
    const { usage } = await billing.listUsage({ projectId: 'prj_default', taskId: task!.id });
    expect(usage.length).toBe(2 * task!.attempts.length);
    expect(usage.reduce((sum, record) => sum + record.costMicroUsd, 0)).toBe(task!.costMicroUsd);
    expect(usage.every((record) => record.rateCardRevision >= 1)).toBe(true);
    const spend = await billing.getSpend({ projectId: 'prj_default', day: '' });
    expect(spend.reservedMicroUsd).toBe(0);

    // Pool: nothing is still leased once the task is over.
    const { leases } = await pool.listLeases({});
    expect(leases).toEqual([]);

    // Placement: the decision the explanation names is stored there, with its candidates.
    const place = task!.explanation.find((entry) => entry.step === 'place')!;
    const { decision } = await placement.getDecision({ id: place.decisionId });
    expect(decision?.winner?.backend).toBe(task!.attempts[0]!.backend);
    expect(JSON.parse(place.detailJson).id).toBe(decision!.id);
    const { signals } = await placement.getSignals({ backend: task!.attempts[0]!.backend });
    expect(signals.some((signal) => signal.samples > 0)).toBe(true);
  });

  it('fails with actor.budget.exceeded and leaves no money held when the budget is too small', async () => {
    const { task: created } = await execution.createTask({
      projectId: 'prj_default',
      input: 'Anything at all',
      budget: { perTaskMicroUsd: 1, perDayMicroUsd: 0 },
    });
    await runToEnd(created!.id);
    const { task } = await execution.getTask({ taskId: created!.id, projectId: 'prj_default' });
    expect(task?.state).toBe(TaskState.TASK_STATE_FAILED);
    expect(task?.error?.code).toBe('actor.budget.exceeded');
    expect(task?.attempts).toEqual([]);
    const { usage } = await billing.listUsage({ projectId: 'prj_default', taskId: task!.id });
    expect(usage).toEqual([]);
  });
});
