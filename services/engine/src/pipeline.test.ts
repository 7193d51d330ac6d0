import { afterEach, describe, expect, it } from 'vitest';
import { readJudgePrompt } from './judge.js';
import { runTask } from './pipeline.js';
import type { EngineTask } from './ports.js';
import {
  answers,
  createInMemoryPorts,
  fails,
  judges,
  keywordJudge,
  runsUntilCancelled,
  type AgentScript,
  type BackendProfile,
  type InMemoryPorts,
  type InMemoryPortsOptions,
} from './testing/in-memory-ports.js';

const backends: BackendProfile[] = [
  { backend: 'demo:alpha-mini', modelFamily: 'alpha', qualityTier: 1, worstCaseCostMicroUsd: 10_000, demo: true },
  { backend: 'demo:gamma-mini', modelFamily: 'gamma', qualityTier: 1, worstCaseCostMicroUsd: 15_000, demo: true },
  { backend: 'demo:alpha-pro', modelFamily: 'alpha', qualityTier: 2, worstCaseCostMicroUsd: 40_000, demo: true },
  { backend: 'demo:beta-judge', modelFamily: 'beta', qualityTier: 2, worstCaseCostMicroUsd: 20_000, demo: true, purposes: ['judge'] },
];

/** The judge costs its flat per-call rate; workers report their own cost. */
const rates = { 'demo:beta-judge': { inputMicroUsdPerMtok: 0, outputMicroUsdPerMtok: 0, microUsdPerCall: 500 } };

function task(extra: Partial<EngineTask> = {}): EngineTask {
  return {
    id: 'tsk_1',
    projectId: 'prj_1',
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

let world: InMemoryPorts | undefined;

function setUp(scripts: Record<string, AgentScript | AgentScript[]>, extra: Partial<InMemoryPortsOptions> = {}): InMemoryPorts {
  world = createInMemoryPorts({ backends, rates, scripts, ...extra });
  return world;
}

afterEach(() => {
  // Whatever happened, nothing may be left held: no reservation, no lease, no waiting acquire.
  if (!world) return;
  expect(world.billing.held()).toEqual([]);
  expect(world.pool.held()).toEqual([]);
  expect(world.pool.waiting()).toBe(0);
  world = undefined;
});

const goodAnswer = 'function add(a, b) { return a + b; }';

describe('runTask', () => {
  it('succeeds on the first attempt, judged by another model family', async () => {
    const { ports, agents, billing, placement, trace, pool } = setUp({
      'demo:alpha-mini': answers(goodAnswer, { reportedCostMicroUsd: 1_200 }),
      'demo:beta-judge': judges(true),
    });

    const outcome = await runTask(task(), ports, new AbortController().signal);

    expect(outcome).toEqual({ state: 'succeeded', result: goodAnswer, costMicroUsd: 1_700, verified: true });
    expect(agents.calls.map((call) => [call.method, call.backend])).toEqual([
      ['execute', 'demo:alpha-mini'],
      ['executeWithSchema', 'demo:beta-judge'],
    ]);
    const [work, judge] = agents.calls;
    expect(work?.request).toMatchObject({ executionId: 'att_1', maxBudgetMicroUsd: 10_000, prompt: task().input });
    expect(work?.request.configuration).toEqual(pool.granted[0]?.configuration);
    expect(readJudgePrompt(judge!.request.prompt)).toEqual({ task: task().input, answer: goodAnswer });
    expect(placement.requests[1]).toMatchObject({ purpose: 'judge', avoidModelFamily: 'alpha', excludeBackends: ['demo:alpha-mini'] });

    const attempt = [...trace.attempts.values()];
    expect(attempt).toHaveLength(1);
    expect(attempt[0]).toMatchObject({ number: 1, state: 'passed', backend: 'demo:alpha-mini', agentId: 'agt_demo:alpha-mini', costMicroUsd: 1_700 });
    expect(attempt[0]?.verdict).toMatchObject({ pass: true, judgeBackend: 'demo:beta-judge', judgeModelFamily: 'beta' });
    expect(trace.states).toEqual(['running', 'verifying']);
    expect(trace.outputs.map((output) => output.text).join('')).toBe(goodAnswer);
    expect(trace.classification?.taskClass).toBe('code');

    expect(pool.granted.map((lease) => lease.agentType)).toEqual(['demo:alpha-mini', 'demo:beta-judge']);
    expect(billing.reservations.map((reservation) => [reservation.requestId, reservation.state, reservation.costMicroUsd])).toEqual([
      ['tsk_1:1:work', 'settled', 1_200],
      ['tsk_1:1:judge', 'settled', 500],
    ]);
    expect(placement.outcomes.map((reported) => [reported.backend, reported.judge, reported.verified, reported.costMicroUsd])).toEqual([
      ['demo:beta-judge', true, true, 500],
      ['demo:alpha-mini', false, true, 1_200],
    ]);
    expect(placement.outcomes.map((reported) => reported.decisionId)).toEqual([placement.decisions[1]?.decisionId, placement.decisions[0]?.decisionId]);

    expect(trace.steps()).toEqual(['evaluate', 'place', 'place', 'reserve', 'lease', 'settle', 'lease', 'settle', 'verify', 'finish']);
    for (const entry of trace.explanations) expect(entry.message).toMatch(/^[A-Z].*[.]$/s);
    const [, workPlace, judgePlace, reserve] = trace.explanations;
    expect(workPlace?.message).toContain('demo:alpha-mini (demo backend)');
    expect(workPlace?.detail).toEqual(placement.decisions[0]?.detail);
    expect(judgePlace?.message).toContain("another family than the worker's alpha");
    expect(reserve?.message).toContain('reserved $0.01 for the work and $0.02 for the judge');
    expect(trace.explanations.at(-1)?.message).toContain('It cost $0.0017 in all.');
  });

  it('escalates to a stronger backend after a rejected answer, and bills every call', async () => {
    const { ports, billing, placement, trace } = setUp({
      'demo:alpha-mini': answers('function add(a, b) { return a - b; }', { reportedCostMicroUsd: 1_200 }),
      'demo:alpha-pro': answers(goodAnswer, { reportedCostMicroUsd: 7_000 }),
      'demo:beta-judge': [judges(false, ['It subtracts instead of adding.']), judges(true)],
    });

    const outcome = await runTask(task(), ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'succeeded', result: goodAnswer, verified: true });
    expect(outcome.costMicroUsd).toBe(1_200 + 500 + 7_000 + 500);
    expect(outcome.costMicroUsd).toBe(billing.settledMicroUsd('tsk_1'));
    expect(placement.requests[2]).toMatchObject({
      purpose: 'work',
      escalateFromBackend: 'demo:alpha-mini',
      excludeBackends: ['demo:alpha-mini'],
      requestId: 'tsk_1:2:work',
    });

    const steps = trace.steps().filter((step) => ['place', 'verify', 'escalate'].includes(step));
    expect(steps).toEqual(['place', 'place', 'verify', 'escalate', 'place', 'place', 'verify']);
    const verifyEntries = trace.explanations.filter((entry) => entry.step === 'verify');
    expect(verifyEntries[0]?.message).toContain('rejected the answer of demo:alpha-mini (demo backend)');
    expect(verifyEntries[0]?.message).toContain('It subtracts instead of adding.');
    const secondPlace = trace.explanations.filter((entry) => entry.step === 'place')[2];
    expect(secondPlace?.message).toContain('demo:alpha-pro (demo backend), stronger than demo:alpha-mini');

    const attempts = [...trace.attempts.values()];
    expect(attempts.map((attempt) => [attempt.number, attempt.backend, attempt.state])).toEqual([
      [1, 'demo:alpha-mini', 'rejected'],
      [2, 'demo:alpha-pro', 'passed'],
    ]);
    expect(attempts[0]?.verdict?.pass).toBe(false);
    expect(attempts.map((attempt) => attempt.costMicroUsd)).toEqual([1_700, 7_500]);
    expect(trace.states).toEqual(['running', 'verifying', 'running', 'verifying']);
    expect(placement.outcomes.filter((reported) => !reported.judge).map((reported) => [reported.backend, reported.verified])).toEqual([
      ['demo:alpha-mini', false],
      ['demo:alpha-pro', true],
    ]);
  });

  it('fails over at once after a backend error, without asking for a stronger backend', async () => {
    const { ports, billing, placement, trace } = setUp({
      'demo:alpha-mini': fails('backend', 'HTTP 502 from upstream', 'function add(a,', { reportedCostMicroUsd: 300 }),
      'demo:gamma-mini': answers(goodAnswer, { reportedCostMicroUsd: 900 }),
      'demo:beta-judge': judges(true),
    });

    // Room for both attempts only if the first attempt's unused judge reservation is given back.
    const outcome = await runTask(task({ budget: { perTaskMicroUsd: 50_000, perDayMicroUsd: 1_000_000 } }), ports, new AbortController().signal);

    expect(outcome).toEqual({ state: 'succeeded', result: goodAnswer, costMicroUsd: 300 + 900 + 500, verified: true });
    expect(placement.requests[2]).toMatchObject({ purpose: 'work', excludeBackends: ['demo:alpha-mini'], escalateFromBackend: undefined });
    expect(placement.decisions[2]?.backend).toBe('demo:gamma-mini');

    const attempts = [...trace.attempts.values()];
    expect(attempts[0]).toMatchObject({ state: 'errored', backend: 'demo:alpha-mini', costMicroUsd: 300 });
    expect(attempts[0]?.error).toContain('HTTP 502 from upstream');
    expect(attempts[0]?.error).toContain('partial output');
    const failover = trace.explanations.find((entry) => entry.step === 'failover');
    expect(failover?.message).toContain('demo:alpha-mini (demo backend) failed');
    expect(failover?.message).toContain('attempt 2 fails over to another backend');
    expect(trace.outputs).toEqual([
      { attempt: 1, text: 'function add(a,' },
      { attempt: 2, text: goodAnswer.slice(0, Math.ceil(goodAnswer.length / 2)) },
      { attempt: 2, text: goodAnswer.slice(Math.ceil(goodAnswer.length / 2)) },
    ]);
    // The first attempt's judge never ran: its reservation was given back, not billed.
    expect(billing.reservations.find((reservation) => reservation.requestId === 'tsk_1:1:judge')?.state).toBe('released');
    expect(placement.outcomes[0]).toMatchObject({ backend: 'demo:alpha-mini', success: false, errorKind: 'backend', judge: false });
  });

  it('fails with actor.budget.exceeded before anything runs when placement finds no room', async () => {
    const { ports, agents, pool, billing } = setUp({ 'demo:alpha-mini': answers(goodAnswer), 'demo:beta-judge': judges(true) });

    const outcome = await runTask(task({ budget: { perTaskMicroUsd: 20_000, perDayMicroUsd: 1_000_000 } }), ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'failed', code: 'actor.budget.exceeded', costMicroUsd: 0 });
    if (outcome.state === 'failed') expect(outcome.message).toContain('Nothing was run.');
    expect(agents.calls).toEqual([]);
    expect(pool.granted).toEqual([]);
    expect(billing.reservations).toEqual([]);
  });

  it('fails with actor.budget.exceeded when billing refuses, giving back what was reserved', async () => {
    const { ports, agents, pool, billing, trace } = setUp(
      { 'demo:alpha-mini': answers(goodAnswer), 'demo:beta-judge': judges(true) },
      // Placement working from stale spend figures: billing is the one that must say no.
      { placement: { enforceBudget: false } },
    );

    const outcome = await runTask(task({ budget: { perTaskMicroUsd: 25_000, perDayMicroUsd: 1_000_000 } }), ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'failed', code: 'actor.budget.exceeded', costMicroUsd: 0 });
    if (outcome.state === 'failed') {
      expect(outcome.message).toContain('Attempt 1 needs up to $0.01 for the work on demo:alpha-mini (demo backend) and $0.02 for its judge');
      expect(outcome.message).toContain('Nothing was run.');
    }
    expect(agents.calls).toEqual([]);
    expect(pool.granted).toEqual([]);
    expect(billing.reservations.map((reservation) => reservation.state)).toEqual(['released']);
    expect(trace.attempts.size).toBe(0);
  });

  it('fails with actor.verification.unavailable when no judge can be placed, and runs nothing', async () => {
    const { ports, agents, billing } = setUp(
      { 'demo:alpha-mini': answers(goodAnswer) },
      { backends: [backends[0]!] },
    );

    const outcome = await runTask(task(), ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'failed', code: 'actor.verification.unavailable' });
    if (outcome.state === 'failed') expect(outcome.message).toContain('No judge could be placed');
    expect(agents.calls).toEqual([]);
    expect(billing.reservations).toEqual([]);
  });

  it('tries another judge once when a judge returns no valid verdict', async () => {
    const { ports, agents, trace } = setUp({
      'demo:alpha-mini': answers(goodAnswer, { reportedCostMicroUsd: 1_000 }),
      'demo:beta-judge': answers('Looks fine to me.', { reportedCostMicroUsd: 200 }),
      'demo:gamma-mini': keywordJudge({ reportedCostMicroUsd: 300 }),
    });

    const outcome = await runTask(task(), ports, new AbortController().signal);

    expect(outcome).toEqual({ state: 'succeeded', result: goodAnswer, costMicroUsd: 1_500, verified: true });
    expect(agents.calls.map((call) => call.backend)).toEqual(['demo:alpha-mini', 'demo:beta-judge', 'demo:gamma-mini']);
    expect([...trace.attempts.values()][0]?.verdict).toMatchObject({ pass: true, judgeBackend: 'demo:gamma-mini' });
    expect(trace.explanations.find((entry) => entry.step === 'verify')?.message).toContain('gave no verdict');
  });

  it('never returns an answer as a success when no judge gives a valid verdict', async () => {
    const { ports, trace } = setUp({
      'demo:alpha-mini': answers(goodAnswer, { reportedCostMicroUsd: 1_000 }),
      'demo:beta-judge': fails('timeout', 'judge took too long'),
      'demo:gamma-mini': answers('{"pass": true}'),
    });

    const outcome = await runTask(task(), ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'failed', code: 'actor.verification.unavailable' });
    expect(JSON.stringify(outcome)).not.toContain(goodAnswer);
    expect([...trace.attempts.values()][0]?.state).toBe('errored');
  });

  it('accepts an unverified answer only when the task turns the judge off, and says so', async () => {
    const { ports, agents, billing, trace } = setUp({ 'demo:alpha-mini': answers(goodAnswer, { reportedCostMicroUsd: 1_000 }) });

    const outcome = await runTask(task({ verify: { judge: false } }), ports, new AbortController().signal);

    expect(outcome).toEqual({ state: 'succeeded', result: goodAnswer, costMicroUsd: 1_000, verified: false });
    expect(agents.calls.map((call) => call.method)).toEqual(['execute']);
    expect(billing.reservations).toHaveLength(1);
    const verify = trace.explanations.find((entry) => entry.step === 'verify');
    expect(verify?.message).toContain('not verified: judge disabled by the task');
    expect([...trace.attempts.values()][0]?.verdict).toBeUndefined();
    expect(trace.states).toEqual(['running']);
  });

  it('cancels a running attempt: the adapter stops, the lease is released, the spend is settled', async () => {
    const controller = new AbortController();
    const { ports, billing, pool, trace, placement } = setUp({
      'demo:alpha-mini': runsUntilCancelled('function add(', () => controller.abort(), { reportedCostMicroUsd: 700 }),
      'demo:beta-judge': judges(true),
    });

    const outcome = await runTask(task(), ports, controller.signal);

    expect(outcome).toMatchObject({ state: 'cancelled', code: 'actor.cancelled', costMicroUsd: 700 });
    expect(pool.granted).toHaveLength(1);
    expect(billing.reservations.map((reservation) => [reservation.requestId, reservation.state, reservation.costMicroUsd])).toEqual([
      ['tsk_1:1:work', 'settled', 700],
      ['tsk_1:1:judge', 'released', 0],
    ]);
    expect([...trace.attempts.values()][0]).toMatchObject({ state: 'cancelled', output: 'function add(' });
    expect(trace.explanations.at(-1)?.message).toContain('cancelled during attempt 1');
    expect(placement.outcomes).toEqual([]);
  });

  it('cancels while waiting for a busy slot, giving back both reservations', async () => {
    const controller = new AbortController();
    const { ports, billing, pool, agents } = setUp({ 'demo:alpha-mini': answers(goodAnswer), 'demo:beta-judge': judges(true) });
    // Another task holds the only alpha-mini slot for the whole test.
    const other = await pool.acquire(
      { requestId: 'other', workType: 'task', workId: 'tsk_other', projectId: 'prj_1', agentType: 'demo:alpha-mini' },
      new AbortController().signal,
    );

    const running = runTask(task(), ports, controller.signal);
    await until(() => pool.waiting() === 1);
    controller.abort();
    const outcome = await running;
    await pool.release(other);

    expect(outcome).toMatchObject({ state: 'cancelled', code: 'actor.cancelled', costMicroUsd: 0 });
    if (outcome.state === 'cancelled') expect(outcome.message).toContain('before any attempt ran');
    expect(agents.calls).toEqual([]);
    expect(billing.reservations.map((reservation) => reservation.state)).toEqual(['released', 'released']);
  });

  it('does nothing for a task cancelled before it starts', async () => {
    const controller = new AbortController();
    controller.abort();
    const { ports, placement } = setUp({ 'demo:alpha-mini': answers(goodAnswer) });

    const outcome = await runTask(task(), ports, controller.signal);

    expect(outcome).toMatchObject({ state: 'cancelled', costMicroUsd: 0 });
    expect(placement.requests).toEqual([]);
  });

  it('fails with actor.verification.failed when every attempt is rejected', async () => {
    const { ports, trace } = setUp({
      'demo:alpha-mini': answers('wrong', { reportedCostMicroUsd: 100 }),
      'demo:alpha-pro': answers('still wrong', { reportedCostMicroUsd: 200 }),
      'demo:beta-judge': judges(false),
    });

    const outcome = await runTask(task(), ports, new AbortController().signal, { maxAttempts: 2 });

    expect(outcome).toMatchObject({ state: 'failed', code: 'actor.verification.failed', costMicroUsd: 100 + 500 + 200 + 500 });
    if (outcome.state === 'failed') {
      expect(outcome.message).toContain('All 2 attempts were used');
      expect(outcome.message).toContain('attempt 1 on demo:alpha-mini (demo backend) was rejected by the judge');
      expect(outcome.message).toContain('attempt 2 on demo:alpha-pro (demo backend) was rejected by the judge');
    }
    expect([...trace.attempts.values()].map((attempt) => attempt.state)).toEqual(['rejected', 'rejected']);
  });

  it('fails with actor.verification.failed when no stronger backend is left', async () => {
    const { ports, placement } = setUp({
      'demo:alpha-mini': answers('wrong'),
      'demo:alpha-pro': answers('still wrong'),
      'demo:beta-judge': judges(false),
    });

    const outcome = await runTask(task(), ports, new AbortController().signal, { maxAttempts: 5 });

    expect(outcome).toMatchObject({ state: 'failed', code: 'actor.verification.failed' });
    if (outcome.state === 'failed') expect(outcome.message).toContain('No other backend could be placed for attempt 3');
    expect(placement.requests.at(-1)).toMatchObject({ escalateFromBackend: 'demo:alpha-pro', excludeBackends: ['demo:alpha-mini', 'demo:alpha-pro'] });
  });

  it('fails with actor.backend.failed when every backend errors', async () => {
    const { ports } = setUp({
      'demo:alpha-mini': fails('timeout', 'took longer than 120 s'),
      'demo:gamma-mini': fails('backend', 'rate limited'),
      'demo:alpha-pro': fails('unavailable', 'connection refused'),
      'demo:beta-judge': judges(true),
    });

    const outcome = await runTask(task(), ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'failed', code: 'actor.backend.failed' });
    if (outcome.state === 'failed') expect(outcome.message).toContain('failed (timeout: took longer than 120 s)');
  });

  it('fails with actor.no_capable_backend when the first placement finds nothing', async () => {
    const { ports, agents } = setUp({ 'demo:alpha-mini': answers(goodAnswer) });

    const outcome = await runTask(task({ attachmentMediaTypes: ['image/png'] }), ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'failed', code: 'actor.no_capable_backend' });
    if (outcome.state === 'failed') expect(outcome.message).toContain('lacks vision');
    expect(agents.calls).toEqual([]);
  });

  it('leases the agent the task names on the first attempt only', async () => {
    const { ports, pool } = setUp(
      {
        'demo:alpha-mini': answers('wrong'),
        'demo:alpha-pro': answers(goodAnswer),
        'demo:beta-judge': [judges(false), judges(true)],
      },
      {
        agents: [
          { agentId: 'agt_general', agentType: 'demo:alpha-mini', configuration: { quality: 0.2 } },
          { agentId: 'agt_named', agentType: 'demo:alpha-mini', configuration: { quality: 0.9 } },
          { agentId: 'agt_pro', agentType: 'demo:alpha-pro' },
          { agentId: 'agt_judge', agentType: 'demo:beta-judge' },
        ],
      },
    );

    const outcome = await runTask(task({ agentId: 'agt_named' }), ports, new AbortController().signal);

    expect(outcome.state).toBe('succeeded');
    expect(pool.granted.map((lease) => lease.agentId)).toEqual(['agt_named', 'agt_judge', 'agt_pro', 'agt_judge']);
  });

  it('adds what memory recalls to the prompt and records it', async () => {
    const { ports, agents, trace } = setUp(
      { 'demo:alpha-mini': answers(goodAnswer), 'demo:beta-judge': judges(true) },
      { memory: { prj_1: ['This project uses tabs for indentation.'] } },
    );

    await runTask(task(), ports, new AbortController().signal);

    expect(agents.calls[0]?.request.prompt).toContain('This project uses tabs for indentation.');
    expect(readJudgePrompt(agents.calls[1]!.request.prompt)?.task).toBe(task().input);
    const memory = trace.explanations.find((entry) => entry.step === 'enhance');
    expect(memory?.message).toMatch(/^Added one note from earlier tasks of this project to the prompt: \d+ characters\.$/);
    expect(memory?.detail).toMatchObject({ memory: ['This project uses tabs for indentation.'], files: [] });
    expect((memory?.detail as { addedCharacters: number }).addedCharacters).toBe(agents.calls[0]!.request.prompt.length - task().input.length);
  });

  it('gives back what it holds and rethrows when a port fails unexpectedly', async () => {
    const { ports, billing } = setUp({ 'demo:alpha-mini': answers(goodAnswer), 'demo:beta-judge': judges(true) });
    const broken = { ...ports, billing: Object.assign(Object.create(billing) as typeof billing, {
      settle: async () => {
        throw new Error('billing unreachable');
      },
    }) };

    await expect(runTask(task(), broken, new AbortController().signal)).rejects.toThrow('billing unreachable');
    expect(billing.reservations.map((reservation) => reservation.state)).toEqual(['released', 'released']);
  });
});

async function until(condition: () => boolean): Promise<void> {
  for (let tries = 0; tries < 1_000; tries++) {
    if (condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  throw new Error('condition never became true');
}
