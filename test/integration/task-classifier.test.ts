import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, createLogger } from '@actor/kit';
import { TaskState } from '@actor/proto/execution';
import { PlacementServiceDefinition, Purpose } from '@actor/proto/placement';
import { startInProcessPlatform, type InProcessPlatform } from '../support/in-process-platform.js';

/**
 * The optional model classifier (`EXECUTION_CLASSIFIER_BACKEND`) across the five services: its call
 * is placed on the classifier backend, leased from the pool, billed to the task, and its answer is
 * what the task is stored and placed with.
 */
describe('a task classified by a model', () => {
  const classifier = 'demo:beta-small';
  let platform: InProcessPlatform;
  let placement: ReturnType<typeof createClient<typeof PlacementServiceDefinition>>;

  beforeAll(async () => {
    platform = await startInProcessPlatform(createLogger('integration', 'silent'), { EXECUTION_CLASSIFIER_BACKEND: classifier });
    placement = createClient(PlacementServiceDefinition, platform.addresses.placement);
    await platform.configureAgents({ latency_ms: 0, quality: 1 });
  }, 180_000);

  afterAll(async () => {
    await platform?.stop();
  });

  it('uses the model answer, bills the call to the task and releases its slot', async () => {
    const { execution, billing, pool } = platform;
    // The local classifier calls this research, difficulty 1.
    const { task: created } = await execution.createTask({ projectId: 'prj_default', input: 'Summarise the history of tea briefly' });
    for await (const _ of execution.watchTask({ taskId: created!.id, projectId: 'prj_default' })) {
      // drain until the end event
    }
    const { task } = await execution.getTask({ taskId: created!.id, projectId: 'prj_default' });
    expect(task?.state).toBe(TaskState.TASK_STATE_SUCCEEDED);

    // The demo backend answers a schema with its first enum value and the middle of a range.
    expect(task?.classification).toMatchObject({ taskClass: 'code', difficulty: 2, vision: false, source: 'model' });
    const evaluate = task!.explanation.find((entry) => entry.step === 'evaluate')!;
    expect(evaluate.backend).toBe(classifier);
    expect(evaluate.message).toContain(`Model classifier on ${classifier} (demo backend): code, difficulty 2 of 3`);
    expect(evaluate.message).toContain('The local classifier had said research, difficulty 1.');
    const detail = JSON.parse(evaluate.detailJson) as { classification: { source: string }; call: { costMicroUsd: number; reservationId: string } };
    expect(detail.classification.source).toBe('model');

    // Placement stored the classifier's decision, with the classifier the only one allowed.
    const { decision } = await placement.getDecision({ id: evaluate.decisionId });
    expect(decision).toMatchObject({ taskClass: 'general', purpose: Purpose.PURPOSE_JUDGE, winner: { backend: classifier } });
    expect(decision?.candidates.map((candidate) => candidate.backend)).toEqual([classifier]);
    // The work was placed for the model's class.
    const place = task!.explanation.find((entry) => entry.step === 'place')!;
    const { decision: work } = await placement.getDecision({ id: place.decisionId });
    expect(work).toMatchObject({ taskClass: 'code', purpose: Purpose.PURPOSE_WORK });

    // Billing: the classifier's usage sample sits beside the attempts', and all sum to the task's cost.
    const { usage } = await billing.listUsage({ projectId: 'prj_default', taskId: task!.id });
    expect(usage.length).toBe(2 * task!.attempts.length + 1);
    const attemptIds = new Set(task!.attempts.map((attempt) => attempt.id));
    const classifying = usage.filter((record) => !attemptIds.has(record.attemptId));
    expect(classifying).toHaveLength(1);
    expect(classifying[0]).toMatchObject({ backend: classifier, costMicroUsd: detail.call.costMicroUsd });
    expect(classifying[0]!.costMicroUsd).toBeGreaterThan(0);
    expect(usage.reduce((sum, record) => sum + record.costMicroUsd, 0)).toBe(task!.costMicroUsd);
    const spend = await billing.getSpend({ projectId: 'prj_default', day: '' });
    expect(spend.reservedMicroUsd).toBe(0);

    // Pool: the classifier's slot was given back.
    const { leases } = await pool.listLeases({});
    expect(leases).toEqual([]);
  });
});
