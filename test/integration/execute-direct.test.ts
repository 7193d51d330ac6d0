import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Status } from 'nice-grpc';
import { createClient, createLogger, estimateTokens, worstCaseCost } from '@actor/kit';
import { rejection } from '@actor/kit/testing';
import { RegistryServiceDefinition } from '@actor/proto/registry';
import { startInProcessPlatform, type InProcessPlatform } from '../support/in-process-platform.js';

const projectId = 'prj_direct';

/** Execute over gRPC: a direct call on an adapter, without the pool, billed like any work. */
describe('Execute, a direct call billed by its worst case', () => {
  let platform: InProcessPlatform;

  beforeAll(async () => {
    platform = await startInProcessPlatform(createLogger('integration', 'silent'));
  }, 180_000);

  afterAll(async () => {
    await platform?.stop();
  });

  it('reserves the worst case from the rate card and limits, then settles the real usage', async () => {
    const registry = createClient(RegistryServiceDefinition, platform.addresses.registry);
    const { adapter } = await registry.getAdapter({ type: 'demo:alpha-mini' });
    const request = { projectId, requestId: 'direct-1', backend: 'demo:alpha-mini', prompt: 'Name three colours', timeoutMs: 30_000 };
    const answer = await platform.execution.execute(request);
    expect(answer.output).not.toBe('');
    expect(answer.costMicroUsd).toBeGreaterThan(0);

    const { usage } = await platform.billing.listUsage({ projectId, taskId: 'direct:direct-1' });
    expect(usage).toHaveLength(1);
    expect(usage[0]).toMatchObject({ backend: 'demo:alpha-mini', costMicroUsd: answer.costMicroUsd, rateCardRevision: adapter!.rateCard!.revision });
    expect((await platform.billing.getSpend({ projectId })).reservedMicroUsd).toBe(0);

    // The hold was the worst case: Reserve is idempotent by request id and refuses a different amount,
    // so asking again with the expected amount returns the very reservation Execute made.
    const expected = worstCaseCost(
      adapter!.rateCard!,
      { maxOutputTokens: adapter!.limits!.maxOutputTokens, timeoutMs: Math.min(30_000, adapter!.limits!.timeoutMs || 120_000) },
      estimateTokens(request.prompt),
    );
    expect(expected).toBeGreaterThan(answer.costMicroUsd);
    const { reservation } = await platform.billing.reserve({
      requestId: `${projectId}:direct-1:execute`,
      projectId,
      taskId: 'direct:direct-1',
      attemptId: usage[0]!.attemptId,
      amountMicroUsd: expected,
    });
    expect(reservation?.amountMicroUsd).toBe(expected);
    expect(reservation?.costMicroUsd).toBe(answer.costMicroUsd);
  }, 60_000);

  it('answers with structured JSON when given a schema', async () => {
    const schema = { type: 'object', properties: { colours: { type: 'array', items: { type: 'string' } } }, required: ['colours'] };
    const answer = await platform.execution.execute({
      projectId,
      requestId: 'direct-2',
      backend: 'demo:beta-small',
      prompt: 'Name three colours',
      jsonSchema: JSON.stringify(schema),
    });
    expect(JSON.parse(answer.structuredJson)).toHaveProperty('colours');
    const { usage } = await platform.billing.listUsage({ projectId, taskId: 'direct:direct-2' });
    expect(usage.map((record) => record.costMicroUsd)).toEqual([answer.costMicroUsd]);
  }, 60_000);

  it('refuses an unknown backend, bad JSON schemas, and a worst case beyond the day budget', async () => {
    const unknown = await rejection(platform.execution.execute({ projectId, backend: 'demo:nope', prompt: 'x' }));
    expect(unknown).toMatchObject({ status: Status.INVALID_ARGUMENT, code: 'actor.no_capable_backend' });
    const badSchema = await rejection(
      platform.execution.execute({ projectId, backend: 'demo:alpha-mini', prompt: 'x', jsonSchema: '{' }),
    );
    expect(badSchema.status).toBe(Status.INVALID_ARGUMENT);
    // The default day budget is $10: hold it almost all, and the next direct call's worst case no longer fits.
    await platform.billing.reserve({
      requestId: 'fill-the-day',
      projectId: 'prj_direct_full',
      taskId: 'tsk_filler',
      attemptId: 'att_filler',
      amountMicroUsd: 9_999_999,
    });
    const exceeded = await rejection(platform.execution.execute({ projectId: 'prj_direct_full', backend: 'demo:alpha-mini', prompt: 'x' }));
    expect(exceeded).toMatchObject({ status: Status.RESOURCE_EXHAUSTED, code: 'actor.budget.exceeded' });
    expect((await platform.billing.listUsage({ projectId: 'prj_direct_full' })).usage).toEqual([]);
  }, 60_000);
});
