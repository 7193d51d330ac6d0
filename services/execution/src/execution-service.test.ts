import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Status } from 'nice-grpc';
import { createClient, createLogger } from '@actor/kit';
import { rejection, testDatabase } from '@actor/kit/testing';
import { ExecutionServiceDefinition, TaskState } from '@actor/proto/execution';
import { loadExecutionConfig } from './config.js';
import { startExecution } from './execution-server.js';

/**
 * The task store over gRPC with no workers (EXECUTION_WORKERS=0): what CreateTask, GetTask, ListTasks,
 * CancelTask and WatchTask promise on their own. The pipeline itself is covered end to end in
 * test/integration and test/e2e.
 */
describe('ExecutionService task store over gRPC', () => {
  let execution: Awaited<ReturnType<typeof startExecution>>;
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let client: ReturnType<typeof createClient<typeof ExecutionServiceDefinition>>;

  beforeAll(async () => {
    database = await testDatabase();
    const config = loadExecutionConfig({
      EXECUTION_ADDR: '127.0.0.1:0',
      DATABASE_URL: database.databaseUrl,
      ACTOR_DATA_DIR: database.dataDir,
      EXECUTION_WORKERS: '0',
      EXECUTION_BOOTSTRAP: 'false',
    });
    execution = await startExecution({ config, logger: createLogger('execution', 'silent'), adapterEnv: {} });
    client = createClient(ExecutionServiceDefinition, execution.address);
  });
  afterAll(async () => {
    await execution?.stop();
    await database?.drop();
  });

  it('stores a queued task with defaults filled in and its first event', async () => {
    const { task, replayed } = await client.createTask({ projectId: 'prj_a', input: 'Say hi' });
    expect(replayed).toBe(false);
    expect(task?.id).toMatch(/^tsk_/);
    expect(task?.state).toBe(TaskState.TASK_STATE_QUEUED);
    expect(task?.mode).toBe('balanced');
    expect(task?.budget?.perTaskMicroUsd).toBe(500_000);
    expect(task?.budget?.perDayMicroUsd).toBe(10_000_000);
    expect(task?.verify?.judge).toBe(true);
    expect(task?.lastEventSeq).toBe(1);
  });

  it('refuses bad input with INVALID_ARGUMENT naming the problem', async () => {
    const empty = await rejection(client.createTask({ projectId: 'prj_a', input: '   ' }));
    expect(empty.status).toBe(Status.INVALID_ARGUMENT);
    expect(empty.message).toMatch(/task text/);
    const mode = await rejection(client.createTask({ projectId: 'prj_a', input: 'x', mode: 'turbo' }));
    expect(mode.message).toMatch(/mode "turbo"/);
    const budget = await rejection(
      client.createTask({ projectId: 'prj_a', input: 'x', budget: { perTaskMicroUsd: -1, perDayMicroUsd: 0 } }),
    );
    expect(budget.message).toMatch(/negative/);
  });

  it('returns the same task for a repeated request id, per project', async () => {
    const first = await client.createTask({ projectId: 'prj_a', input: 'once', requestId: 'key-1' });
    const again = await client.createTask({ projectId: 'prj_a', input: 'once', requestId: 'key-1' });
    const otherProject = await client.createTask({ projectId: 'prj_b', input: 'once', requestId: 'key-1' });
    expect(again.replayed).toBe(true);
    expect(again.task?.id).toBe(first.task?.id);
    expect(otherProject.task?.id).not.toBe(first.task?.id);
  });

  it('hides tasks of other projects', async () => {
    const { task } = await client.createTask({ projectId: 'prj_a', input: 'mine' });
    const hidden = await rejection(client.getTask({ taskId: task!.id, projectId: 'prj_b' }));
    expect(hidden).toMatchObject({ status: Status.NOT_FOUND, code: 'actor.task.not_found' });
  });

  it('pages through a project newest first', async () => {
    for (let index = 0; index < 3; index += 1) await client.createTask({ projectId: 'prj_pages', input: `t${index}` });
    const first = await client.listTasks({ projectId: 'prj_pages', pageSize: 2 });
    expect(first.tasks.map((task) => task.input)).toEqual(['t2', 't1']);
    const second = await client.listTasks({ projectId: 'prj_pages', pageSize: 2, pageToken: first.nextPageToken });
    expect(second.tasks.map((task) => task.input)).toEqual(['t0']);
    expect(second.nextPageToken).toBe('');
  });

  it('cancels a queued task at once, records who asked, and a second cancel changes nothing', async () => {
    const { task } = await client.createTask({ projectId: 'prj_a', input: 'to cancel' });
    const cancelled = await client.cancelTask({ taskId: task!.id, projectId: 'prj_a', requestedBy: 'tok_alice' });
    expect(cancelled.task?.state).toBe(TaskState.TASK_STATE_CANCELLED);
    expect(cancelled.task?.cancelRequestedBy).toBe('tok_alice');
    expect(cancelled.task?.error?.code).toBe('actor.cancelled');
    expect(cancelled.task?.finishTime).toBeInstanceOf(Date);
    const again = await client.cancelTask({ taskId: task!.id, projectId: 'prj_a', requestedBy: 'tok_bob' });
    expect(again.task?.cancelRequestedBy).toBe('tok_alice');
    expect(again.task?.lastEventSeq).toBe(cancelled.task?.lastEventSeq);
  });

  it('streams events from any seq and ends after the end event', async () => {
    const { task } = await client.createTask({ projectId: 'prj_a', input: 'watch me' });
    await client.cancelTask({ taskId: task!.id, projectId: 'prj_a', requestedBy: 'tok_alice' });
    const all = [];
    for await (const { event } of client.watchTask({ taskId: task!.id, projectId: 'prj_a' })) all.push(event!);
    expect(all.map((event) => [event.seq, event.kind])).toEqual([
      [1, 'state'],
      [2, 'state'],
      [3, 'end'],
    ]);
    const tail = [];
    for await (const { event } of client.watchTask({ taskId: task!.id, projectId: 'prj_a', afterSeq: 1 })) tail.push(event!);
    expect(tail.map((event) => event.seq)).toEqual([2, 3]);
    expect(JSON.parse(tail[1]!.dataJson)).toMatchObject({ state: 'cancelled', error: { code: 'actor.cancelled' } });
  });

  it('delivers live events to a watcher as they are written', async () => {
    const { task } = await client.createTask({ projectId: 'prj_a', input: 'live' });
    const received: number[] = [];
    const watching = (async () => {
      for await (const { event } of client.watchTask({ taskId: task!.id, projectId: 'prj_a' })) received.push(event!.seq);
    })();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(received).toEqual([1]);
    await client.cancelTask({ taskId: task!.id, projectId: 'prj_a', requestedBy: 'tok_alice' });
    await watching;
    expect(received).toEqual([1, 2, 3]);
  });
});
