import { afterEach, describe, expect, it } from 'vitest';
import { classificationJsonSchema } from './model-classifier.js';
import { runTask } from './pipeline.js';
import type { EngineOptions, EngineTask } from './ports.js';
import {
  answers,
  createInMemoryPorts,
  fails,
  judges,
  type AgentScript,
  type BackendProfile,
  type InMemoryPorts,
  type InMemoryPortsOptions,
} from './testing/in-memory-ports.js';

const classifier = 'demo:sigma-classifier';

const backends: BackendProfile[] = [
  { backend: 'demo:alpha-mini', modelFamily: 'alpha', qualityTier: 1, worstCaseCostMicroUsd: 10_000, demo: true },
  { backend: 'demo:beta-judge', modelFamily: 'beta', qualityTier: 2, worstCaseCostMicroUsd: 20_000, demo: true, purposes: ['judge'] },
  { backend: classifier, modelFamily: 'sigma', qualityTier: 1, worstCaseCostMicroUsd: 2_000, demo: true, purposes: ['judge'] },
];

/** Judge and classifier cost a flat rate per call; the worker reports its own cost. */
const rates = {
  'demo:beta-judge': { inputMicroUsdPerMtok: 0, outputMicroUsdPerMtok: 0, microUsdPerCall: 500 },
  [classifier]: { inputMicroUsdPerMtok: 0, outputMicroUsdPerMtok: 0, microUsdPerCall: 300 },
};

const goodAnswer = 'function add(a, b) { return a + b; }';

function task(extra: Partial<EngineTask> = {}): EngineTask {
  return {
    id: 'tsk_1',
    projectId: 'prj_1',
    // The local classifier calls this code, difficulty 1.
    input: 'Write a function that adds two numbers.',
    mode: 'balanced',
    budget: { perTaskMicroUsd: 1_000_000, perDayMicroUsd: 10_000_000 },
    backends: [],
    capabilities: [],
    attachmentMediaTypes: [],
    verify: { judge: true },
    ...extra,
  };
}

/** A classifier answering `value` as structured output. */
function classifies(value: unknown): AgentScript {
  return () => ({
    success: true,
    output: JSON.stringify(value),
    structured: value,
    executionLog: ['classified'],
    inputTokens: 120,
    outputTokens: 30,
    durationMs: 15,
  });
}

let world: InMemoryPorts | undefined;

function setUp(classifierScript: AgentScript | undefined, extra: Partial<InMemoryPortsOptions> = {}): InMemoryPorts {
  world = createInMemoryPorts({
    backends,
    rates,
    scripts: {
      'demo:alpha-mini': answers(goodAnswer, { reportedCostMicroUsd: 1_200 }),
      'demo:beta-judge': judges(true),
      ...(classifierScript ? { [classifier]: classifierScript } : {}),
    },
    ...extra,
  });
  return world;
}

afterEach(() => {
  if (!world) return;
  expect(world.billing.held()).toEqual([]);
  expect(world.pool.held()).toEqual([]);
  world = undefined;
});

const options: EngineOptions = { classifierBackend: classifier };

function evaluateEntry(world: InMemoryPorts) {
  const entries = world.trace.explanations.filter((entry) => entry.step === 'evaluate');
  expect(entries).toHaveLength(1);
  return entries[0]!;
}

describe('the model classifier', () => {
  it('uses a valid model answer, feeds it to placement and bills the call to the task', async () => {
    const world = setUp(classifies({ task_class: 'research', difficulty: 3, vision: true, reason: 'It asks to compare sources.' }));

    const outcome = await runTask(task(), world.ports, new AbortController().signal, options);

    expect(outcome).toMatchObject({ state: 'succeeded', result: goodAnswer });
    expect(world.trace.classification).toEqual({
      taskClass: 'research',
      difficulty: 3,
      // Vision is what the task carries (no images), whatever the model says.
      vision: false,
      reason: 'It asks to compare sources.',
      source: 'model',
    });

    const [classifyCall, workCall] = world.agents.calls;
    expect([classifyCall?.method, classifyCall?.backend]).toEqual(['executeWithSchema', classifier]);
    expect(classifyCall?.request).toMatchObject({ timeoutMs: 15_000, maxBudgetMicroUsd: 2_000, projectId: 'prj_1' });
    expect(classifyCall?.request.prompt).toContain(task().input);
    expect(classifyCall?.request.systemPrompt).toBeTruthy();
    expect(workCall?.method).toBe('execute');

    expect(world.placement.requests[0]).toMatchObject({ purpose: 'classify', allowedBackends: [classifier], requestId: 'tsk_1:classify:att_1' });
    // The work is placed for the model's class, not the local one.
    expect(world.placement.requests[1]).toMatchObject({ purpose: 'work', taskClass: 'research' });
    expect(world.pool.granted.map((lease) => lease.agentType)).toEqual([classifier, 'demo:alpha-mini', 'demo:beta-judge']);

    expect(world.billing.reservations.map((reservation) => [reservation.requestId, reservation.state, reservation.costMicroUsd])).toEqual([
      ['tsk_1:classify:att_1', 'settled', 300],
      ['tsk_1:1:work', 'settled', 1_200],
      ['tsk_1:1:judge', 'settled', 500],
    ]);
    expect(outcome.costMicroUsd).toBe(300 + 1_200 + 500);
    expect(outcome.costMicroUsd).toBe(world.billing.settledMicroUsd('tsk_1'));
    expect(world.placement.outcomes[0]).toMatchObject({ backend: classifier, judge: true, success: true, verified: true, costMicroUsd: 300 });

    const entry = evaluateEntry(world);
    expect(entry.backend).toBe(classifier);
    expect(entry.decisionId).toBe(world.placement.decisions[0]?.decisionId);
    expect(entry.message).toContain(`Model classifier on ${classifier} (demo backend): research, difficulty 3 of 3`);
    expect(entry.message).toContain('The local classifier had said code, difficulty 1.');
    expect(entry.message).toContain('vision stays not needed');
    expect(entry.detail).toMatchObject({ classifier: 'model', local: { taskClass: 'code', source: 'local' } });
  });

  it('keeps the local result when the answer is off the schema, and still bills the call', async () => {
    const world = setUp(classifies({ task_class: 'poetry', difficulty: 7, vision: false, reason: 'Rhymes.' }));

    const outcome = await runTask(task(), world.ports, new AbortController().signal, options);

    expect(outcome.state).toBe('succeeded');
    expect(world.trace.classification).toMatchObject({ taskClass: 'code', difficulty: 1, source: 'local' });
    expect(world.placement.requests[1]).toMatchObject({ purpose: 'work', taskClass: 'code' });
    expect(outcome.costMicroUsd).toBe(300 + 1_200 + 500);
    expect(world.placement.outcomes[0]).toMatchObject({ backend: classifier, success: false, verified: false });
    const entry = evaluateEntry(world);
    expect(entry.message).toMatch(/^Local classifier \(the model classifier on demo:sigma-classifier \(demo backend\) was not used: the answer does not match the schema/);
    expect(entry.message).toContain('task_class');
    expect(entry.message).toContain('Classified as code');
  });

  it('keeps the local result when the backend fails', async () => {
    const world = setUp(fails('backend', 'HTTP 500 from the provider'));

    const outcome = await runTask(task(), world.ports, new AbortController().signal, options);

    expect(outcome.state).toBe('succeeded');
    expect(world.trace.classification).toMatchObject({ taskClass: 'code', source: 'local' });
    expect(evaluateEntry(world).message).toContain('the call failed (backend): HTTP 500 from the provider');
  });

  it('keeps the local result when the answer does not come within the time limit', async () => {
    const world = setUp(async (call) => {
      await new Promise<void>((resolve) => call.signal.addEventListener('abort', () => resolve(), { once: true }));
      return { success: false, output: '', errorKind: 'cancelled', errorMessage: 'aborted', executionLog: [], inputTokens: 50, outputTokens: 0, durationMs: 20 };
    });

    const outcome = await runTask(task(), world.ports, new AbortController().signal, { ...options, classifierTimeoutMs: 30 });

    expect(outcome.state).toBe('succeeded');
    expect(world.trace.classification).toMatchObject({ taskClass: 'code', source: 'local' });
    expect(evaluateEntry(world).message).toContain('it gave no answer within 0.0 s');
    expect(world.placement.outcomes[0]).toMatchObject({ backend: classifier, errorKind: 'timeout' });
    expect(world.billing.reservations[0]).toMatchObject({ requestId: 'tsk_1:classify:att_1', state: 'settled' });
  });

  it('skips the call when placement finds the budget too small for it', async () => {
    const expensive = backends.map((profile) => (profile.backend === classifier ? { ...profile, worstCaseCostMicroUsd: 50_000 } : profile));
    const world = setUp(classifies({ task_class: 'research', difficulty: 3, vision: false, reason: 'x' }), { backends: expensive });

    // Room for the work (0.01) and its judge (0.02), not for the classifier (0.05).
    const outcome = await runTask(task({ budget: { perTaskMicroUsd: 40_000, perDayMicroUsd: 10_000_000 } }), world.ports, new AbortController().signal, options);

    expect(outcome).toMatchObject({ state: 'succeeded', costMicroUsd: 1_700 });
    expect(world.agents.calls.map((call) => call.backend)).toEqual(['demo:alpha-mini', 'demo:beta-judge']);
    expect(world.trace.classification).toMatchObject({ taskClass: 'code', source: 'local' });
    expect(evaluateEntry(world).message).toContain('was not used: the budget is too small for it, the task budget leaves $0.04');
  });

  it('skips the call when billing refuses its reservation', async () => {
    const expensive = backends.map((profile) => (profile.backend === classifier ? { ...profile, worstCaseCostMicroUsd: 50_000 } : profile));
    const world = setUp(classifies({ task_class: 'research', difficulty: 3, vision: false, reason: 'x' }), {
      backends: expensive,
      // A placement working from stale spend figures places it; billing must refuse.
      placement: { enforceBudget: false },
    });

    const outcome = await runTask(task({ budget: { perTaskMicroUsd: 40_000, perDayMicroUsd: 10_000_000 } }), world.ports, new AbortController().signal, options);

    expect(outcome).toMatchObject({ state: 'succeeded', costMicroUsd: 1_700 });
    expect(world.agents.calls.map((call) => call.backend)).toEqual(['demo:alpha-mini', 'demo:beta-judge']);
    expect(world.billing.reservations.map((reservation) => reservation.requestId)).toEqual(['tsk_1:1:work', 'tsk_1:1:judge']);
    expect(evaluateEntry(world).message).toContain('the budget is too small for its worst case of $0.05');
  });

  it('asks the classifier even when the task restricts its workers, as it does for the judge', async () => {
    const world = setUp(classifies({ task_class: 'general', difficulty: 2, vision: false, reason: 'Plain arithmetic.' }));

    // The in-memory placement also holds judges to the list, so the judge is on it; the classifier is not.
    const outcome = await runTask(task({ backends: ['demo:alpha-mini', 'demo:beta-judge'] }), world.ports, new AbortController().signal, options);

    expect(outcome.state).toBe('succeeded');
    expect(world.placement.requests[0]).toMatchObject({ purpose: 'classify', allowedBackends: [classifier] });
    expect(world.placement.requests[1]).toMatchObject({ purpose: 'work', allowedBackends: ['demo:alpha-mini', 'demo:beta-judge'], taskClass: 'general' });
    expect(world.trace.classification).toMatchObject({ taskClass: 'general', difficulty: 2, source: 'model' });
  });

  it('keeps the local result when placement cannot place the classifier', async () => {
    const world = setUp(classifies({ task_class: 'general', difficulty: 2, vision: false, reason: 'x' }));

    await runTask(task(), world.ports, new AbortController().signal, { classifierBackend: 'demo:not-declared' });

    expect(world.trace.classification?.source).toBe('local');
    expect(evaluateEntry(world).message).toContain('was not used: it could not be placed (no capable backend');
  });

  it('gives a resumed run its own classifier reservation, never the dead run\'s', async () => {
    const world = setUp(classifies({ task_class: 'general', difficulty: 2, vision: false, reason: 'Plain arithmetic.' }));

    await runTask(task(), world.ports, new AbortController().signal, options);
    const resumed = await runTask(task(), world.ports, new AbortController().signal, { ...options, attemptOffset: 1 });

    const classifying = world.billing.reservations.filter((reservation) => reservation.requestId.includes(':classify:'));
    expect(classifying.map((reservation) => reservation.state)).toEqual(['settled', 'settled']);
    expect(new Set(classifying.map((reservation) => reservation.requestId)).size).toBe(2);
    expect(world.agents.calls.filter((call) => call.backend === classifier)).toHaveLength(2);
    expect(resumed.state).toBe('succeeded');
  });

  it('stops on the caller\'s cancel during the classifier call, settling what it used', async () => {
    const controller = new AbortController();
    const world = setUp(async (call) => {
      controller.abort();
      await Promise.resolve();
      expect(call.signal.aborted).toBe(true);
      return { success: false, output: '', errorKind: 'cancelled', errorMessage: 'cancelled', executionLog: [], inputTokens: 40, outputTokens: 0, durationMs: 5 };
    });

    const outcome = await runTask(task(), world.ports, controller.signal, options);

    expect(outcome).toMatchObject({ state: 'cancelled', code: 'actor.cancelled', costMicroUsd: 300 });
    expect(world.agents.calls.map((call) => call.backend)).toEqual([classifier]);
    expect(world.billing.reservations.map((reservation) => reservation.state)).toEqual(['settled']);
  });

  it('names the local classifier when no classifier backend is set', async () => {
    const world = setUp(undefined);

    await runTask(task(), world.ports, new AbortController().signal);

    expect(world.trace.classification?.source).toBe('local');
    expect(evaluateEntry(world).message).toMatch(/^Local classifier: Classified as code/);
    expect(world.agents.calls.map((call) => call.method)).toEqual(['execute', 'executeWithSchema']);
  });

  it('hands the adapter a schema every structured-output provider accepts', () => {
    expect(classificationJsonSchema).toMatchObject({
      required: ['task_class', 'difficulty', 'vision', 'reason'],
      additionalProperties: false,
      properties: { task_class: { enum: ['code', 'research', 'action', 'general'] }, difficulty: { minimum: 1, maximum: 3 } },
    });
  });
});
