import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, sleep } from '@actor/kit';
import { TaskState, type TaskEvent } from '@actor/proto/execution';
import { startInProcessPlatform, type InProcessPlatform } from '../support/in-process-platform.js';

const projectId = 'prj_default';
const logger = createLogger('integration', 'silent');

/** Reads the task's events until one of `kind` (or the end) arrives, then stops watching. */
async function waitForEvent(
  platform: InProcessPlatform,
  taskId: string,
  stop: (event: TaskEvent) => boolean,
): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  const controller = new AbortController();
  try {
    for await (const { event } of platform.execution.watchTask({ taskId, projectId }, { signal: controller.signal })) {
      events.push(event!);
      if (stop(event!) || event!.kind === 'end') break;
    }
  } finally {
    controller.abort();
  }
  return events;
}

function isState(state: string) {
  return (event: TaskEvent) => event.kind === 'state' && JSON.parse(event.dataJson).state === state;
}

async function allEvents(platform: InProcessPlatform, taskId: string): Promise<TaskEvent[]> {
  return waitForEvent(platform, taskId, () => false);
}

/** What the task left behind in billing and the pool once it is over. */
async function leftovers(platform: InProcessPlatform, taskId: string) {
  const { leases } = await platform.pool.listLeases({});
  const spend = await platform.billing.getSpend({ projectId, day: '' });
  return { leases: leases.filter((lease) => lease.workId === taskId), reservedMicroUsd: spend.reservedMicroUsd };
}

describe('CancelTask in each state of a task', () => {
  let platform: InProcessPlatform;

  beforeAll(async () => {
    // One worker: a second task stays queued while the first runs.
    platform = await startInProcessPlatform(logger, { EXECUTION_WORKERS: '1' });
  }, 180_000);

  afterAll(async () => {
    await platform?.stop();
  });

  it('stops a running task, and a queued one behind it never starts; a second cancel is harmless', async () => {
    // Slow enough that nothing finishes on its own during the test.
    await platform.configureAgents({ latency_ms: 120_000, stream_chunks: 120, quality: 1 });
    const { task: running } = await platform.execution.createTask({ projectId, input: 'Write a long essay on tides' });
    const { task: queued } = await platform.execution.createTask({ projectId, input: 'Name three rivers' });
    await waitForEvent(platform, running!.id, (event) => event.kind === 'output');

    const queuedCancel = await platform.execution.cancelTask({ projectId, taskId: queued!.id, requestedBy: 'tok_queued' });
    expect(queuedCancel.task?.state).toBe(TaskState.TASK_STATE_CANCELLED);
    const cancel = await platform.execution.cancelTask({ projectId, taskId: running!.id, requestedBy: 'tok_running' });
    expect(cancel.task?.cancelRequestedBy).toBe('tok_running');
    const again = await platform.execution.cancelTask({ projectId, taskId: running!.id, requestedBy: 'tok_second' });
    expect(again.task?.cancelRequestedBy).toBe('tok_running');

    const events = await allEvents(platform, running!.id);
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    expect(events.filter((event) => event.kind === 'end')).toHaveLength(1);
    const { task } = await platform.execution.getTask({ projectId, taskId: running!.id });
    expect(task?.state).toBe(TaskState.TASK_STATE_CANCELLED);
    expect(task?.error?.code).toBe('actor.cancelled');
    expect(task?.error?.message).toContain('tok_running');
    expect(task?.finishTime).toBeDefined();
    expect(task?.attempts.map((attempt) => attempt.state)).toEqual(['cancelled']);
    // The partial run was settled (billed for what ran), the judge's hold released, the slot freed.
    const { usage } = await platform.billing.listUsage({ projectId, taskId: running!.id });
    expect(usage).toHaveLength(1);
    expect(await leftovers(platform, running!.id)).toEqual({ leases: [], reservedMicroUsd: 0 });

    // The queued task never used a slot, never reserved money, never made an attempt.
    const { task: neverRan } = await platform.execution.getTask({ projectId, taskId: queued!.id });
    expect(neverRan?.state).toBe(TaskState.TASK_STATE_CANCELLED);
    expect(neverRan?.attempts).toEqual([]);
    expect(neverRan?.startTime).toBeUndefined();
    expect((await platform.billing.listUsage({ projectId, taskId: queued!.id })).usage).toEqual([]);
    const queuedEvents = await allEvents(platform, queued!.id);
    expect(queuedEvents.map((event) => event.kind)).toEqual(['state', 'state', 'end']);
  }, 120_000);

  it('stops a task while its answer is being verified', async () => {
    // The work takes a few seconds; the judge, leased after the agents are slowed down, takes long.
    // A lease carries the slot's configuration as it was when granted.
    await platform.configureAgents({ latency_ms: 3_000, stream_chunks: 6, quality: 1 });
    const { agents } = await platform.pool.listAgents({});
    const { task: created } = await platform.execution.createTask({ projectId, input: 'Name three mountains' });
    await waitForEvent(platform, created!.id, (event) => event.kind === 'output');
    for (const agent of agents) {
      await platform.pool.updateAgent({ agent: { ...agent, configurationJson: JSON.stringify({ latency_ms: 120_000, quality: 1 }) } });
    }
    const seen = await waitForEvent(platform, created!.id, isState('verifying'));
    if (seen.some((event) => event.kind === 'end')) throw new Error('the task ended before verifying');
    await sleep(200);
    await platform.execution.cancelTask({ projectId, taskId: created!.id, requestedBy: 'tok_verifying' });
    await allEvents(platform, created!.id);
    const { task } = await platform.execution.getTask({ projectId, taskId: created!.id });
    expect(task?.state).toBe(TaskState.TASK_STATE_CANCELLED);
    expect(task?.attempts.map((attempt) => attempt.state)).toEqual(['cancelled']);
    // Work and judge were both settled: two usage samples, nothing held, no lease.
    expect((await platform.billing.listUsage({ projectId, taskId: created!.id })).usage).toHaveLength(2);
    expect(await leftovers(platform, created!.id)).toEqual({ leases: [], reservedMicroUsd: 0 });
  }, 120_000);

  it('leaves a finished task as it is, and cancel racing completion yields exactly one terminal state', async () => {
    await platform.configureAgents({ latency_ms: 0, quality: 1 });
    const { task: done } = await platform.execution.createTask({ projectId, input: 'Name three lakes' });
    await allEvents(platform, done!.id);
    const cancelled = await platform.execution.cancelTask({ projectId, taskId: done!.id, requestedBy: 'tok_late' });
    expect(cancelled.task?.state).toBe(TaskState.TASK_STATE_SUCCEEDED);
    expect(cancelled.task?.cancelRequestedBy).toBe('');

    const racers = [];
    for (let index = 0; index < 4; index++) {
      const { task } = await platform.execution.createTask({ projectId, input: `Name ${index + 2} birds` });
      racers.push(task!.id);
    }
    // Cancels land at different points of the racers' short runs.
    await Promise.all(
      racers.map(async (taskId, index) => {
        await sleep(index * 150);
        await platform.execution.cancelTask({ projectId, taskId, requestedBy: 'tok_race' });
      }),
    );
    const eventsOf = new Map<string, TaskEvent[]>();
    for (const taskId of racers) eventsOf.set(taskId, await allEvents(platform, taskId));
    // Every racer is over now, so the project's holds must all be gone.
    for (const taskId of racers) {
      const events = eventsOf.get(taskId)!;
      expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
      const ends = events.filter((event) => event.kind === 'end');
      expect(ends).toHaveLength(1);
      const { task } = await platform.execution.getTask({ projectId, taskId });
      expect([TaskState.TASK_STATE_SUCCEEDED, TaskState.TASK_STATE_CANCELLED]).toContain(task!.state);
      expect(JSON.parse(ends[0]!.dataJson).state).toBe(task!.state === TaskState.TASK_STATE_SUCCEEDED ? 'succeeded' : 'cancelled');
      expect(await leftovers(platform, taskId)).toEqual({ leases: [], reservedMicroUsd: 0 });
    }
  }, 120_000);
});

describe.runIf(process.env.DATABASE_URL)('CancelTask sent to another execution replica', () => {
  let platform: InProcessPlatform;

  beforeAll(async () => {
    // A long claim TTL: the claim renewal (every 20 s) cannot be what notices the cancel.
    platform = await startInProcessPlatform(logger, { EXECUTION_CLAIM_TTL_MS: '60000', EXECUTION_CANCEL_POLL_MS: '250' });
  }, 180_000);

  afterAll(async () => {
    await platform?.stop();
  });

  it('stops the adapter on the replica running the task long before the next claim renewal', async () => {
    await platform.configureAgents({ latency_ms: 120_000, stream_chunks: 120, quality: 1 });
    const { task: created } = await platform.execution.createTask({ projectId, input: 'Write a long essay on glaciers' });
    await waitForEvent(platform, created!.id, (event) => event.kind === 'output');
    // The first replica claimed the task; the second never ran it and receives the cancel.
    const other = await platform.startExecutionReplica();
    const cancelledAt = Date.now();
    await other.cancelTask({ projectId, taskId: created!.id, requestedBy: 'tok_elsewhere' });
    await allEvents(platform, created!.id);
    const stoppedAfterMs = Date.now() - cancelledAt;
    const { task } = await platform.execution.getTask({ projectId, taskId: created!.id });
    expect(task?.state).toBe(TaskState.TASK_STATE_CANCELLED);
    expect(task?.attempts.map((attempt) => attempt.state)).toEqual(['cancelled']);
    // A bound, not a measurement: the claim renewal would take up to 20 s, the cancel poll 0.25 s.
    expect(stoppedAfterMs).toBeLessThan(10_000);
    expect(await leftovers(platform, created!.id)).toEqual({ leases: [], reservedMicroUsd: 0 });
  }, 120_000);
});
