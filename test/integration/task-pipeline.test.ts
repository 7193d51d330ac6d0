import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, createLogger } from '@actor/kit';
import { TaskState, type TaskEvent } from '@actor/proto/execution';
import { PlacementServiceDefinition } from '@actor/proto/placement';
import { startInProcessPlatform, type InProcessPlatform } from '../support/in-process-platform.js';

/**
 * The five services in one test process, each with its own gRPC server on a free port and its own
 * database, calling each other over real gRPC: a task's money, leases and decisions land in the
 * service that owns them.
 */
describe('a task across the five services', () => {
  let platform: InProcessPlatform;
  let execution: InProcessPlatform['execution'];
  let billing: InProcessPlatform['billing'];
  let pool: InProcessPlatform['pool'];
  let placement: ReturnType<typeof createClient<typeof PlacementServiceDefinition>>;

  beforeAll(async () => {
    platform = await startInProcessPlatform(createLogger('integration', 'silent'));
    ({ execution, billing, pool } = platform);
    placement = createClient(PlacementServiceDefinition, platform.addresses.placement);
    // Instant demo backends that always answer well: this test is about the flow, not the demos.
    await platform.configureAgents({ latency_ms: 0, quality: 1 });
  }, 180_000);

  afterAll(async () => {
    await platform?.stop();
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
