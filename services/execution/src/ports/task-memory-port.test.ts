import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, openDatabase, type OpenDatabase } from '@actor/kit';
import { testDatabase } from '@actor/kit/testing';
import { schema } from '../db/schema.js';
import { TaskRepository } from '../db/task-repository.js';
import { TaskMemoryPort } from './task-memory-port.js';

/** The memory port over the service's own tables, on PGlite or Postgres (DATABASE_URL). */
describe('TaskMemoryPort', () => {
  let target: Awaited<ReturnType<typeof testDatabase>>;
  let database: OpenDatabase<typeof schema>;
  let repository: TaskRepository;

  async function task(
    id: string,
    projectId: string,
    input: string,
    taskClass: string,
    finish?: { state: 'succeeded' | 'failed'; result?: string; errorCode?: string; errorMessage?: string; costMicroUsd: number; passedOn?: string },
  ) {
    await repository.create({
      id,
      projectId,
      requestId: null,
      state: 'queued',
      input,
      mode: 'balanced',
      perTaskMicroUsd: 500_000,
      perDayMicroUsd: 10_000_000,
      agentId: null,
      backends: [],
      capabilities: [],
      workspace: null,
      verify: { judge: true },
      webhooks: [],
      attachments: [],
    });
    await repository.setClassification(id, { taskClass, vision: false, difficulty: 1, reason: 'test' });
    if (finish?.passedOn) {
      await repository.upsertAttempt({
        id: `att_${id}`,
        taskId: id,
        number: 1,
        backend: finish.passedOn,
        modelFamily: 'demo-beta',
        agentId: null,
        decisionId: 'dec_1',
        state: 'passed',
        output: finish.result ?? '',
        error: null,
        costMicroUsd: finish.costMicroUsd,
        inputTokens: 1,
        outputTokens: 1,
        latencyMs: 1,
        verdict: null,
        finishedAt: new Date(),
      });
    }
    if (finish) await repository.finish(id, finish);
  }

  beforeAll(async () => {
    target = await testDatabase();
    database = await openDatabase({
      service: 'execution',
      databaseUrl: target.databaseUrl,
      dataDir: target.dataDir,
      migrationsFolder: fileURLToPath(new URL('../../migrations', import.meta.url)),
      schema,
      logger: createLogger('memory-test', 'silent'),
    });
    repository = new TaskRepository(database.db);
    await task('tsk_01', 'prj_a', 'Research the history of the printing press with sources.', 'research', {
      state: 'succeeded',
      result: 'Gutenberg, around 1440 (https://example.org/press).',
      costMicroUsd: 12_000,
      passedOn: 'demo:beta-large',
    });
    await task('tsk_02', 'prj_a', 'Research tide tables.', 'research', {
      state: 'failed',
      errorCode: 'actor.verification.failed',
      errorMessage: 'All 3 attempts were used without an answer that passed verification.',
      costMicroUsd: 3_000,
    });
    await task('tsk_03', 'prj_a', 'Fix the parser bug.', 'code', { state: 'succeeded', result: 'done', costMicroUsd: 1 });
    await task('tsk_04', 'prj_b', 'Research another project.', 'research', { state: 'succeeded', result: 'theirs', costMicroUsd: 1 });
    await task('tsk_05', 'prj_a', 'Research something still running.', 'research');
  }, 60_000);

  afterAll(async () => {
    await database?.close();
    await target?.drop();
  });

  it("recalls the project's finished tasks of the same class as short outcome lines, newest first, never the asking task", async () => {
    const memory = new TaskMemoryPort(database.db);
    const lines = await memory.recall('prj_a', 'Research the moon landing.', { taskId: 'tsk_06', taskClass: 'research' });
    expect(lines).toEqual([
      'tsk_02 "Research tide tables." failed (actor.verification.failed) after $0.003: All 3 attempts were used without an answer that passed verification.',
      'tsk_01 "Research the history of the printing press with sources." succeeded on demo:beta-large for $0.012: Gutenberg, around 1440 (https://example.org/press).',
    ]);

    const asking = await memory.recall('prj_a', 'again', { taskId: 'tsk_02', taskClass: 'research' });
    expect(asking.map((line) => line.split(' ')[0])).toEqual(['tsk_01']);
    expect(await memory.recall('prj_a', 'x', { taskId: 'tsk_09', taskClass: 'action' })).toEqual([]);
    expect(await new TaskMemoryPort(database.db, { limit: 1 }).recall('prj_a', 'x', { taskId: 'tsk_09', taskClass: 'research' })).toHaveLength(1);
  });
});
