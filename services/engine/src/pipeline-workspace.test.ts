import { afterEach, describe, expect, it } from 'vitest';
import { runTask } from './pipeline.js';
import type { EngineTask } from './ports.js';
import {
  answers,
  createInMemoryPorts,
  InMemoryWorkspace,
  judges,
  type AgentScript,
  type BackendProfile,
  type InMemoryPorts,
} from './testing/in-memory-ports.js';

const backends: BackendProfile[] = [
  { backend: 'demo:alpha-mini', modelFamily: 'alpha', qualityTier: 1, worstCaseCostMicroUsd: 10_000, demo: true },
  { backend: 'demo:alpha-pro', modelFamily: 'alpha', qualityTier: 2, worstCaseCostMicroUsd: 40_000, demo: true },
  { backend: 'demo:beta-judge', modelFamily: 'beta', qualityTier: 2, worstCaseCostMicroUsd: 20_000, demo: true, purposes: ['judge'] },
];

const testCommand = 'test "$(cat answer.txt)" = 42';

function task(extra: Partial<EngineTask> = {}): EngineTask {
  return {
    id: 'tsk_1',
    projectId: 'prj_1',
    input: 'Fix the function so that answer.txt holds the answer.',
    mode: 'balanced',
    budget: { perTaskMicroUsd: 1_000_000, perDayMicroUsd: 10_000_000 },
    backends: [],
    capabilities: [],
    attachmentMediaTypes: [],
    verify: { judge: true, testCommand },
    workspace: { repo: '/repos/app', ref: 'main' },
    ...extra,
  };
}

/** The test command passes when answer.txt in the copy holds 42. */
function newWorkspace(): InMemoryWorkspace {
  return new InMemoryWorkspace({ 'answer.txt': 'broken', 'readme.md': 'app' }, (files) => {
    const answer = files.get('answer.txt');
    return { passed: answer === '42', output: `answer.txt holds ${answer}` };
  });
}

/** An agent that writes `content` into answer.txt of its working copy, then answers. */
function writesAnswer(workspace: InMemoryWorkspace, content: string): AgentScript {
  const answer = answers(`I wrote ${content} to answer.txt.`);
  return (call) => {
    workspace.write(call.request.workingDirectory, 'answer.txt', content);
    return answer(call);
  };
}

let world: InMemoryPorts | undefined;

afterEach(() => {
  if (!world) return;
  expect(world.billing.held()).toEqual([]);
  expect(world.pool.held()).toEqual([]);
  // Every working copy is disposed, whatever happened.
  expect(world.workspace?.open() ?? []).toEqual([]);
  world = undefined;
});

describe('runTask with a workspace', () => {
  it('rejects an attempt whose test command fails without calling the judge, and escalates', async () => {
    const workspace = newWorkspace();
    world = createInMemoryPorts({
      backends,
      workspace,
      scripts: {
        'demo:alpha-mini': writesAnswer(workspace, '41'),
        'demo:alpha-pro': writesAnswer(workspace, '42'),
        'demo:beta-judge': judges(true),
      },
    });
    const { ports, agents, trace, placement, billing } = world;

    const outcome = await runTask(task(), ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'succeeded', verified: true });
    // Attempt 1's test failed: only attempt 2 was judged.
    expect(agents.calls.map((call) => [call.method, call.backend])).toEqual([
      ['execute', 'demo:alpha-mini'],
      ['execute', 'demo:alpha-pro'],
      ['executeWithSchema', 'demo:beta-judge'],
    ]);
    expect(agents.calls[0]?.request.workingDirectory).toBe('/workspaces/tsk_1/att_1');
    expect(agents.calls[1]?.request.workingDirectory).toBe('/workspaces/tsk_1/att_2');
    expect(workspace.checksRun).toEqual([
      { path: '/workspaces/tsk_1/att_1', command: testCommand },
      { path: '/workspaces/tsk_1/att_2', command: testCommand },
    ]);
    expect(workspace.disposed).toEqual(['/workspaces/tsk_1/att_1', '/workspaces/tsk_1/att_2']);
    expect(placement.requests.filter((request) => request.purpose === 'work')[1]).toMatchObject({
      escalateFromBackend: 'demo:alpha-mini',
      excludeBackends: ['demo:alpha-mini'],
    });

    const [first, second] = [...trace.attempts.values()];
    expect(first).toMatchObject({ state: 'rejected', verdict: { pass: false, judgeBackend: '' } });
    expect(first?.verdict?.checks).toEqual([`test command \`${testCommand}\` failed with exit code 1`, 'changed files: answer.txt']);
    expect(second).toMatchObject({ state: 'passed', verdict: { pass: true, judgeBackend: 'demo:beta-judge' } });
    expect(second?.verdict?.checks).toEqual([`test command \`${testCommand}\` passed`, 'changed files: answer.txt', 'judge']);

    const verifications = trace.explanations.filter((entry) => entry.step === 'verify');
    expect(verifications[0]?.message).toContain(`the task's test command \`${testCommand}\` failed with exit code 1`);
    expect(verifications[0]?.detail).toMatchObject({ changedFiles: ['answer.txt'], outputTail: 'answer.txt holds 41' });
    expect(trace.steps()).toContain('escalate');
    // The judge of attempt 1 was reserved but released: the judge rate was never spent for it.
    expect(billing.held()).toEqual([]);
  });

  it('fails with actor.verification.failed naming the test command when no stronger backend is left', async () => {
    const workspace = newWorkspace();
    world = createInMemoryPorts({
      backends,
      workspace,
      scripts: { 'demo:alpha-mini': writesAnswer(workspace, '41'), 'demo:alpha-pro': writesAnswer(workspace, '40'), 'demo:beta-judge': judges(true) },
    });

    const outcome = await runTask(task(), world.ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'failed', code: 'actor.verification.failed' });
    expect(outcome.state === 'failed' && outcome.message).toContain(`rejected by the test command \`${testCommand}\``);
    expect(world.agents.calls.filter((call) => call.method === 'executeWithSchema')).toEqual([]);
  });

  it('with the judge turned off, a passing test command is the only check and stands in the verdict', async () => {
    const workspace = newWorkspace();
    world = createInMemoryPorts({ backends, workspace, scripts: { 'demo:alpha-mini': writesAnswer(workspace, '42') } });

    const outcome = await runTask(task({ verify: { judge: false, testCommand } }), world.ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'succeeded', verified: false });
    const [attempt] = [...world.trace.attempts.values()];
    expect(attempt?.verdict).toMatchObject({ pass: true, checks: [`test command \`${testCommand}\` passed`, 'changed files: answer.txt'] });
  });

  it('a task without a test command gets no working copy and runs as before', async () => {
    const workspace = newWorkspace();
    world = createInMemoryPorts({
      backends,
      workspace,
      scripts: { 'demo:alpha-mini': answers('42'), 'demo:beta-judge': judges(true) },
    });

    const outcome = await runTask(task({ verify: { judge: true } }), world.ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'succeeded', verified: true });
    expect(workspace.prepared).toEqual([]);
    expect(world.agents.calls[0]?.request.workingDirectory).toBeUndefined();
    expect([...world.trace.attempts.values()][0]?.verdict?.checks).toEqual(['judge']);
  });

  it('without a workspace port the test command is not run, and the explanation says so', async () => {
    world = createInMemoryPorts({ backends, scripts: { 'demo:alpha-mini': answers('42'), 'demo:beta-judge': judges(true) } });

    const outcome = await runTask(task(), world.ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'succeeded', verified: true });
    const verify = world.trace.explanations.find((entry) => entry.step === 'verify');
    expect(verify?.message).toContain("The task's test command was not run: this engine has no workspace to run it in.");
  });
});
