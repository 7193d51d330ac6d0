import { afterEach, describe, expect, it } from 'vitest';
import { enhanceLimits, namedFiles, runTask } from './pipeline.js';
import type { EngineTask } from './ports.js';
import {
  answers,
  createInMemoryPorts,
  InMemoryMemory,
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

function task(extra: Partial<EngineTask> = {}): EngineTask {
  return {
    id: 'tsk_1',
    projectId: 'prj_1',
    input: 'Research the boiling point of water and cite your sources.',
    mode: 'balanced',
    budget: { perTaskMicroUsd: 1_000_000, perDayMicroUsd: 10_000_000 },
    backends: [],
    capabilities: [],
    attachmentMediaTypes: [],
    verify: { judge: true },
    ...extra,
  };
}

const uncited = 'Water boils at 100 C at sea level.';
const cited = 'Water boils at 100 C at sea level (https://example.org/water, https://example.org/pressure).';

let world: InMemoryPorts | undefined;

afterEach(() => {
  if (!world) return;
  expect(world.billing.held()).toEqual([]);
  expect(world.pool.held()).toEqual([]);
  expect(world.workspace?.open() ?? []).toEqual([]);
  world = undefined;
});

describe('citations', () => {
  const citations = { style: 'url' as const, min: 2 };

  it('rejects an answer without them before any judge, escalates, and passes a cited answer', async () => {
    world = createInMemoryPorts({
      backends,
      scripts: { 'demo:alpha-mini': answers(uncited), 'demo:alpha-pro': answers(cited), 'demo:beta-judge': judges(true) },
    });
    const outcome = await runTask(task({ verify: { judge: true, citations } }), world.ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'succeeded', result: cited, verified: true });
    expect(world.agents.calls.map((call) => [call.method, call.backend])).toEqual([
      ['execute', 'demo:alpha-mini'],
      ['execute', 'demo:alpha-pro'],
      ['executeWithSchema', 'demo:beta-judge'],
    ]);
    const [first, second] = [...world.trace.attempts.values()];
    expect(first).toMatchObject({ state: 'rejected', verdict: { pass: false, judgeBackend: '' } });
    expect(first?.verdict?.checks).toEqual(['citations (at least 2 distinct URLs) failed: 0 found']);
    expect(second?.verdict?.checks).toEqual(['citations (at least 2 distinct URLs) passed: 2 found', 'judge']);
    expect(world.placement.requests.filter((request) => request.purpose === 'work')[1]).toMatchObject({
      escalateFromBackend: 'demo:alpha-mini',
    });
    const verify = world.trace.explanations.filter((entry) => entry.step === 'verify');
    expect(verify[0]?.message).toContain('lacks the citations the task asks for');
    expect(verify[1]?.detail).toMatchObject({ passed: true, found: ['https://example.org/water', 'https://example.org/pressure'] });
  });

  it('fails with actor.verification.failed naming the citation check when no backend cites', async () => {
    world = createInMemoryPorts({
      backends,
      scripts: { 'demo:alpha-mini': answers(uncited), 'demo:alpha-pro': answers(uncited), 'demo:beta-judge': judges(true) },
    });
    const outcome = await runTask(task({ verify: { judge: true, citations } }), world.ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'failed', code: 'actor.verification.failed' });
    expect(outcome.state === 'failed' && outcome.message).toContain('rejected by the citation check (citations (at least 2 distinct URLs) failed: 0 found)');
    expect(world.agents.calls.filter((call) => call.method === 'executeWithSchema')).toEqual([]);
  });

  it('with the judge off, passing citations are the verdict', async () => {
    world = createInMemoryPorts({ backends, scripts: { 'demo:alpha-mini': answers(cited) } });
    const outcome = await runTask(task({ verify: { judge: false, citations } }), world.ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'succeeded', verified: false });
    expect([...world.trace.attempts.values()][0]?.verdict).toMatchObject({
      pass: true,
      reasons: ["the task's own checks passed"],
      checks: ['citations (at least 2 distinct URLs) passed: 2 found'],
    });
  });
});

/** A "repository" whose postcondition `grep -q sent outbox.txt` passes once outbox.txt says sent. */
function outbox(): InMemoryWorkspace {
  return new InMemoryWorkspace({ 'outbox.txt': 'draft' }, (files, command) => {
    if (command === 'grep -q sent outbox.txt') return { passed: files.get('outbox.txt') === 'sent', output: `outbox: ${files.get('outbox.txt')}` };
    if (command === 'true') return { passed: true, output: '' };
    return { passed: false, output: `unknown command ${command}` };
  });
}

function writes(workspace: InMemoryWorkspace, content: string): AgentScript {
  const answer = answers(`Outbox now says ${content}.`);
  return (call) => {
    workspace.write(call.request.workingDirectory, 'outbox.txt', content);
    return answer(call);
  };
}

describe('postconditions', () => {
  const action = (postconditions: string[], extra: Partial<EngineTask['verify']> = {}) =>
    task({
      input: 'Send the release email.',
      workspace: { repo: '/repos/mail', ref: 'main' },
      verify: { judge: true, postconditions, ...extra },
    });

  it('runs each in the working copy after the work; the first failing one rejects without a judge, and escalation fixes it', async () => {
    const workspace = outbox();
    world = createInMemoryPorts({
      backends,
      workspace,
      scripts: { 'demo:alpha-mini': writes(workspace, 'draft'), 'demo:alpha-pro': writes(workspace, 'sent'), 'demo:beta-judge': judges(true) },
    });
    const outcome = await runTask(action(['grep -q sent outbox.txt', 'true'], { checkTimeoutMs: 5_000 }), world.ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'succeeded', verified: true });
    // Attempt 1 stopped at its first failing postcondition; the second was not run for it.
    expect(workspace.checksRun).toEqual([
      { path: '/workspaces/tsk_1/att_1', command: 'grep -q sent outbox.txt', timeoutMs: 5_000 },
      { path: '/workspaces/tsk_1/att_2', command: 'grep -q sent outbox.txt', timeoutMs: 5_000 },
      { path: '/workspaces/tsk_1/att_2', command: 'true', timeoutMs: 5_000 },
    ]);
    expect(world.agents.calls.map((call) => [call.method, call.backend])).toEqual([
      ['execute', 'demo:alpha-mini'],
      ['execute', 'demo:alpha-pro'],
      ['executeWithSchema', 'demo:beta-judge'],
    ]);
    const [first, second] = [...world.trace.attempts.values()];
    expect(first?.verdict).toMatchObject({
      pass: false,
      reasons: ['the postcondition `grep -q sent outbox.txt` failed with exit code 1'],
      checks: ['postcondition `grep -q sent outbox.txt` failed with exit code 1', 'changed files: none'],
    });
    expect(second?.verdict?.checks).toEqual([
      'postcondition `grep -q sent outbox.txt` passed',
      'postcondition `true` passed',
      'changed files: outbox.txt',
      'judge',
    ]);
    const verify = world.trace.explanations.filter((entry) => entry.step === 'verify');
    expect(verify[0]?.message).toContain('postcondition 1 of 2 `grep -q sent outbox.txt` failed with exit code 1');
    expect(verify[0]?.detail).toMatchObject({ postcondition: 'grep -q sent outbox.txt', outputTail: 'outbox: draft' });
  });

  it('a cancel while a postcondition runs ends the task cancelled, its working copy removed', async () => {
    const workspace = outbox();
    const controller = new AbortController();
    workspace.beforeCheckResult = () => controller.abort(new Error('cancel requested'));
    world = createInMemoryPorts({
      backends,
      workspace,
      scripts: { 'demo:alpha-mini': writes(workspace, 'sent'), 'demo:beta-judge': judges(true) },
    });
    const outcome = await runTask(action(['grep -q sent outbox.txt']), world.ports, controller.signal);

    expect(outcome).toMatchObject({ state: 'cancelled', code: 'actor.cancelled' });
    expect(world.agents.calls.filter((call) => call.method === 'executeWithSchema')).toEqual([]);
    expect([...world.trace.attempts.values()][0]?.state).toBe('cancelled');
    expect(workspace.disposed).toEqual(['/workspaces/tsk_1/att_1']);
  });

  it('without a workspace port nothing runs: the task fails actor.verification.unavailable', async () => {
    world = createInMemoryPorts({ backends, scripts: { 'demo:alpha-mini': answers('sent'), 'demo:beta-judge': judges(true) } });
    const outcome = await runTask(action(['true']), world.ports, new AbortController().signal);

    expect(outcome).toMatchObject({ state: 'failed', code: 'actor.verification.unavailable' });
    expect(world.agents.calls).toEqual([]);
    expect(world.billing.reservations).toHaveLength(0);
  });
});

describe('enhance', () => {
  it('finds the files a task names', () => {
    expect(namedFiles('Fix `src/app.ts` and README.md, see https://example.org/x.html and ../etc/passwd.txt.')).toEqual([
      'src/app.ts',
      'README.md',
    ]);
  });

  it('adds named files of the repository and memory notes to the prompt, bounded, and records what and how much', async () => {
    const big = 'x'.repeat(enhanceLimits.fileCharacters + 500);
    const workspace = new InMemoryWorkspace({ 'notes/plan.md': 'Ship on Friday.', 'big.log': big }, () => ({ passed: true, output: '' }));
    world = createInMemoryPorts({
      backends,
      workspace,
      memory: { prj_1: ['tsk_0 research succeeded on demo:alpha-pro: cited two sources.'] },
      scripts: { 'demo:alpha-mini': answers('Done.'), 'demo:beta-judge': judges(true) },
    });
    const input = 'Summarize notes/plan.md and big.log, and also missing.txt.';
    await runTask(task({ input, workspace: { repo: '/repos/app', ref: 'main' } }), world.ports, new AbortController().signal);

    const prompt = world.agents.calls[0]!.request.prompt;
    expect(prompt.startsWith(input)).toBe(true);
    expect(prompt).toContain('--- notes/plan.md (15 bytes) ---\nShip on Friday.\n--- end of notes/plan.md ---');
    expect(prompt).toContain(`--- big.log (${big.length} bytes, first ${enhanceLimits.fileCharacters} characters) ---`);
    expect(prompt).toContain('- tsk_0 research succeeded on demo:alpha-pro: cited two sources.');
    expect(prompt.length).toBeLessThan(input.length + enhanceLimits.fileCharacters + 2_000);

    const entry = world.trace.explanations.find((explanation) => explanation.step === 'enhance');
    expect(entry?.message).toBe(
      `Added one note from earlier tasks of this project and 2 files the task names (notes/plan.md, big.log) to the prompt: ${prompt.length - input.length} characters. Not in the repository at the task's ref: missing.txt.`,
    );
    expect(entry?.detail).toMatchObject({
      files: [
        { path: 'notes/plan.md', characters: 15, sizeBytes: 15, truncated: false },
        { path: 'big.log', characters: enhanceLimits.fileCharacters, truncated: true },
      ],
      notFound: ['missing.txt'],
      addedCharacters: prompt.length - input.length,
    });
    // Memory is asked with the task and its class, so it can leave the task itself out.
    expect((world.ports.memory as InMemoryMemory).calls).toEqual([
      { projectId: 'prj_1', input, context: { taskId: 'tsk_1', taskClass: world.trace.classification!.taskClass } },
    ]);
    // The judge sees the task as given, not the added context.
    expect(world.agents.calls[1]!.request.prompt).not.toContain('Ship on Friday.');
    expect(workspace.prepared).toEqual([]);
  });

  it('adds nothing and records nothing when there is nothing to add', async () => {
    world = createInMemoryPorts({ backends, scripts: { 'demo:alpha-mini': answers('Done.'), 'demo:beta-judge': judges(true) } });
    await runTask(task(), world.ports, new AbortController().signal);
    expect(world.agents.calls[0]!.request.prompt).toBe(task().input);
    expect(world.trace.steps()).not.toContain('enhance');
  });
});
