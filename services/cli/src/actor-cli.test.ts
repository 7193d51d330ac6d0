import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiFakeServer } from '../../../test/fakes/openai-fake-server.js';

/** The real `actor` command, started as a user would start it. */
const actorBin = join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'actor.js');

interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Each test starts one to three CLI processes; on a busy 2-core machine one start can take 10 s. */
const subprocessTimeoutMs = 180_000;

let home: string;

/** Runs `actor ...args` in its own process; `onStderr` sees stderr as it arrives (and may signal the child). */
function actor(
  args: string[],
  options: { cwd?: string; env?: Record<string, string>; onStderr?: (soFar: string, child: ReturnType<typeof spawn>) => void } = {},
): Promise<Finished> {
  return new Promise((resolve, reject) => {
    // A clean environment: no real backend's settings from the developer's shell leak into the run.
    const child = spawn(process.execPath, [actorBin, ...args], {
      cwd: options.cwd ?? home,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, ACTOR_HOME: join(home, 'actor-home'), LANG: 'C.UTF-8', ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      options.onStderr?.(stderr, child);
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

async function traceLines(path: string): Promise<Array<Record<string, unknown>>> {
  return (await readFile(path, 'utf8'))
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), 'actor-cli-test-'));
});

afterAll(async () => {
  await rm(home, { recursive: true, force: true });
});

describe('actor CLI usage', { timeout: subprocessTimeoutMs }, () => {
  it('prints help for the CLI and for each command, and exits 0', async () => {
    const main = await actor(['--help']);
    expect(main.code).toBe(0);
    expect(main.stdout).toContain('actor run "<task>"');
    expect(main.stdout).toContain('actor adapters');
    const run = await actor(['run', '--help']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toContain('--budget-usd');
    expect(run.stdout).toContain('130 cancelled');
  });

  // Every kind of bad value is covered in-process by arguments.test.ts; here the exit code and the message's way out.
  it('rejects bad flags, backends and commands with exit 2 and a clear message', async () => {
    const unknownFlag = await actor(['run', '--mdoe', 'best', 'a task']);
    expect(unknownFlag.code).toBe(2);
    expect(unknownFlag.stderr).toContain("unknown option '--mdoe'");
    expect(unknownFlag.stderr).toContain("actor run --help");

    const unknownBackend = await actor(['run', '--backend', 'gpt-9', 'a task']);
    expect(unknownBackend.code).toBe(2);
    expect(unknownBackend.stderr).toContain('--backend gpt-9 is not a backend found here');

    const unknownCommand = await actor(['frobnicate']);
    expect(unknownCommand.code).toBe(2);
    expect(unknownCommand.stderr).toContain('unknown command "frobnicate"');
  });

  it('lists the adapters found, ready or not and why', async () => {
    const listed = await actor(['adapters', '--json']);
    expect(listed.code).toBe(0);
    const rows = JSON.parse(listed.stdout) as Array<{ type: string; ready: boolean; reason: string; runs_here?: boolean }>;
    const demo = rows.filter((row) => row.type.startsWith('demo:'));
    expect(demo.map((row) => row.type).sort()).toEqual(['demo:alpha-mini', 'demo:alpha-pro', 'demo:beta-large', 'demo:beta-small']);
    expect(demo.every((row) => row.ready && row.runs_here)).toBe(true);
    const openai = rows.find((row) => row.type.startsWith('ai-sdk:openai-compatible'));
    expect(openai).toMatchObject({ ready: false });
    expect(openai?.reason).toContain('ACTOR_OPENAI_BASE_URL');

    const table = await actor(['adapters']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/ready\s+demo:alpha-mini \(demo\)/);
    expect(table.stdout).toMatch(/not ready\s+ai-sdk:openai-compatible/);
  });
});

/**
 * A demo backend's answer is flawed with probability 1 - quality (alpha-pro 0.95, beta-large 0.9, ...), drawn
 * from the run's random execution id, and the demo judge rejects every flawed answer. A test that needs a
 * verdict to pass therefore pins quality to 1; left to the defaults, about one `--mode best` run in ten
 * fails verification with nothing stronger to escalate to. The escalation test pins it to 0 instead.
 */
const goodAnswers = ['--agent-config', '{"quality": 1}'];

describe('actor run on the demo backends, with no real backend configured', { timeout: subprocessTimeoutMs }, () => {
  it('runs a task, streams progress to stderr, prints the answer and writes the trace and the day spend', async () => {
    const run = await actor(['run', ...goodAnswers, 'Write a haiku about routing']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toContain('simulated demo answer');
    expect(run.stdout).toContain('Write a haiku about routing');
    expect(run.stderr).toContain('[place] Attempt 1 will run on demo:');
    expect(run.stderr).toMatch(/\[verify\] Attempt \d: the judge on demo:\S+ \(demo backend\) passed/);
    expect(run.stderr).toMatch(/actor: succeeded on demo:\S+, verified, cost \$/);

    const taskId = /task (tsk_\w+)/.exec(run.stderr)?.[1];
    expect(taskId).toBeDefined();
    const lines = await traceLines(join(home, 'actor-home', 'runs', `${taskId}.jsonl`));
    expect(lines[0]).toMatchObject({ kind: 'task' });
    expect(lines.map((line) => line.kind)).toContain('output');
    expect(lines.at(-1)).toMatchObject({ kind: 'end', outcome: { state: 'succeeded' } });
  });

  it('answers JSON with the result, the cost and the explanation, and bills the day file', async () => {
    const run = await actor(['run', '--json', ...goodAnswers, '--mode', 'best', 'Explain how a hash map works']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const answer = JSON.parse(run.stdout) as {
      id: string;
      state: string;
      result: string;
      verified: boolean;
      cost: { usd: number; micro_usd: number };
      attempts: Array<{ backend: string; state: string; verdict: { pass: boolean } | null }>;
      explanation: Array<{ step: string; detail?: { candidates?: unknown[] } }>;
      trace_file: string;
    };
    expect(answer.state).toBe('succeeded');
    expect(answer.verified).toBe(true);
    expect(answer.result).toContain('hash map');
    expect(answer.cost.micro_usd).toBeGreaterThan(0);
    // best mode: the strongest demo backend (tier 4) does the work.
    expect(answer.attempts[0]).toMatchObject({ backend: 'demo:beta-large', state: 'passed', verdict: { pass: true } });
    const steps = answer.explanation.map((entry) => entry.step);
    expect(steps).toEqual(expect.arrayContaining(['evaluate', 'place', 'reserve', 'lease', 'settle', 'verify', 'finish']));
    // The place entry carries the real placement decision: scored candidates.
    expect(answer.explanation.find((entry) => entry.step === 'place')?.detail?.candidates?.length).toBeGreaterThan(1);

    const spendFiles = await readdir(join(home, 'actor-home', 'spend'));
    const today = new Date().toISOString().slice(0, 10);
    expect(spendFiles).toContain(`${today}.jsonl`);
    const billed = (await traceLines(join(home, 'actor-home', 'spend', `${today}.jsonl`)))
      .filter((line) => line.task_id === answer.id)
      .reduce((sum, line) => sum + (line.micro_usd as number), 0);
    expect(billed).toBe(answer.cost.micro_usd);
  });

  it('keeps the work on the backends named with --backend', async () => {
    const run = await actor(['run', '--json', ...goodAnswers, '--backend', 'demo:alpha-pro', 'Summarise the plot of Hamlet']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const answer = JSON.parse(run.stdout) as { state: string; attempts: Array<{ backend: string; state: string }> };
    expect(answer.state).toBe('succeeded');
    expect(answer.attempts.map((attempt) => [attempt.backend, attempt.state])).toEqual([['demo:alpha-pro', 'passed']]);
  });

  it('asks the --classifier backend to classify the task and bills its call to the task', async () => {
    const run = await actor(['run', '--json', ...goodAnswers, '--classifier', 'demo:beta-small', 'Summarise the plot of Hamlet']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const answer = JSON.parse(run.stdout) as {
      id: string;
      cost: { micro_usd: number };
      attempts: Array<{ cost: { micro_usd: number } }>;
      explanation: Array<{ step: string; message: string; backend?: string; detail?: { classification?: unknown; call?: { costMicroUsd: number } } }>;
    };
    const evaluate = answer.explanation.find((entry) => entry.step === 'evaluate');
    // The demo backend answers the schema's first class and middle difficulty; the local classifier said research.
    expect(evaluate?.message).toContain('Model classifier on demo:beta-small (demo backend): code, difficulty 2 of 3');
    expect(evaluate?.message).toContain('The local classifier had said research');
    expect(evaluate?.detail?.classification).toMatchObject({ taskClass: 'code', difficulty: 2, vision: false, source: 'model' });
    const classifierCost = evaluate?.detail?.call?.costMicroUsd ?? -1;
    expect(classifierCost).toBeGreaterThan(0);
    const attemptsCost = answer.attempts.reduce((sum, attempt) => sum + attempt.cost.micro_usd, 0);
    expect(answer.cost.micro_usd).toBe(attemptsCost + classifierCost);
  });

  it('fails with actor.budget.exceeded and exit 1 when the budget is too small, running nothing', async () => {
    const run = await actor(['run', '--json', '--budget-usd', '0.0001', 'Write a haiku about routing']);
    expect(run.code).toBe(1);
    const answer = JSON.parse(run.stdout) as { state: string; error: { code: string }; attempts: unknown[]; cost: { micro_usd: number } };
    expect(answer).toMatchObject({ state: 'failed', error: { code: 'actor.budget.exceeded' }, attempts: [], cost: { micro_usd: 0 } });
    expect(run.stderr).toContain('actor: failed (actor.budget.exceeded)');
  });

  it("holds every run of the day to the day budget kept under ACTOR_HOME", async () => {
    const spendHome = await mkdtemp(join(tmpdir(), 'actor-cli-day-'));
    const today = new Date().toISOString().slice(0, 10);
    await mkdir(join(spendHome, 'spend'));
    // Earlier runs today spent $0.999: with a $1.00 day budget, no attempt (work + judge) fits any more.
    await writeFile(
      join(spendHome, 'spend', `${today}.jsonl`),
      `${JSON.stringify({ at: new Date().toISOString(), task_id: 'tsk_earlier', backend: 'demo:alpha-pro', micro_usd: 999_000 })}\n`,
    );
    const child = spawn(process.execPath, [actorBin, 'run', '--day-budget-usd', '1', 'Write a haiku'], {
      cwd: home,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, ACTOR_HOME: spendHome },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    await rm(spendHome, { recursive: true, force: true });
    expect(code).toBe(1);
    expect(stderr).toContain('actor: failed (actor.budget.exceeded)');
    expect(stderr).toContain('Nothing was run.');
    expect(stderr).not.toContain('[lease]');
  });

  it('escalates after rejected answers and fails with actor.verification.failed when none passes', async () => {
    // quality 0: every demo answer carries the flaw the demo judges look for.
    const run = await actor(['run', '--json', '--agent-config', '{"quality": 0}', '--mode', 'cheapest', 'Write a haiku about routing']);
    expect(run.code).toBe(1);
    const answer = JSON.parse(run.stdout) as { error: { code: string }; attempts: Array<{ backend: string; state: string }> };
    expect(answer.error.code).toBe('actor.verification.failed');
    expect(answer.attempts.length).toBeGreaterThan(1);
    expect(answer.attempts.every((attempt) => attempt.state === 'rejected')).toBe(true);
    expect(new Set(answer.attempts.map((attempt) => attempt.backend)).size).toBe(answer.attempts.length);
    expect(run.stderr).toContain('[escalate]');
  });

  it('exits 130 on Ctrl-C, cancelling the run through the engine', async () => {
    let sent = false;
    const run = await actor(['run', '--agent-config', '{"latency_ms": 60000}', 'Write a haiku about routing'], {
      onStderr: (soFar, child) => {
        // The work is running once its lease is taken: interrupt it there, as a user pressing Ctrl-C would.
        if (!sent && soFar.includes('to run the work')) {
          sent = true;
          child.kill('SIGINT');
        }
      },
    });
    expect(sent).toBe(true);
    expect(run.code).toBe(130);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('cancelling the run');
    expect(run.stderr).toContain('actor: cancelled (actor.cancelled)');
    const taskId = /task (tsk_\w+)/.exec(run.stderr)?.[1];
    const lines = await traceLines(join(home, 'actor-home', 'runs', `${taskId}.jsonl`));
    expect(lines.at(-1)).toMatchObject({ kind: 'end', outcome: { state: 'cancelled', code: 'actor.cancelled' } });
    expect(lines.some((line) => line.kind === 'attempt' && (line.attempt as { state: string }).state === 'cancelled')).toBe(true);
  });
});

describe('actor run on a real backend declared by env', { timeout: subprocessTimeoutMs }, () => {
  it('runs the ai-sdk adapter on an OpenAI-compatible endpoint, judged by another family', async () => {
    const answerText = 'Packets seek the path / hop by hop through quiet wires / routing finds its way';
    const fake = await startOpenAiFakeServer({ apiKey: 'sk-cli-test', respond: () => ({ content: answerText }) });
    try {
      const run = await actor(['run', '--json', '--backend', 'ai-sdk:openai-compatible/fake-model', 'Write a haiku about routing'], {
        env: { ACTOR_OPENAI_BASE_URL: fake.baseURL, ACTOR_OPENAI_API_KEY: 'sk-cli-test', ACTOR_OPENAI_MODEL: 'fake-model' },
      });
      expect(run.code).toBe(0);
      const answer = JSON.parse(run.stdout) as { result: string; attempts: Array<{ backend: string; model_family: string }>; cost: { micro_usd: number } };
      expect(answer.result).toBe(answerText);
      expect(answer.attempts[0]).toMatchObject({ backend: 'ai-sdk:openai-compatible/fake-model', model_family: 'openai' });
      expect(answer.cost.micro_usd).toBeGreaterThan(0);
      const completions = fake.requests.filter((request) => request.path.endsWith('/chat/completions'));
      expect(completions).toHaveLength(1);
      expect(completions[0]?.authorization).toBe('Bearer sk-cli-test');
      expect(run.stderr).toMatch(/judged by demo:\S+ \(demo backend\), of model family demo-/);
    } finally {
      await fake.close();
    }
  });
});

describe('actor run on a code task in a git repository', { timeout: subprocessTimeoutMs }, () => {
  let repo: string;

  beforeAll(async () => {
    repo = await mkdtemp(join(tmpdir(), 'actor-cli-repo-'));
    const git = (...args: string[]) => execFileSync('git', ['-C', repo, ...args], { stdio: 'pipe' });
    git('init', '-q', '-b', 'main');
    git('config', 'user.email', 'test@example.com');
    git('config', 'user.name', 'Test');
    await writeFile(join(repo, 'add.sh'), 'echo $(( $1 + $2 ))\n');
    git('add', '-A');
    git('commit', '-q', '-m', 'add');
  });

  afterAll(async () => {
    await rm(repo, { recursive: true, force: true });
  });

  it('runs the test command in a working copy before the judge, and removes the copy', async () => {
    const run = await actor(['run', '--json', ...goodAnswers, '--test', 'test "$(sh add.sh 2 3)" = 5', 'Fix the bug in add.sh'], { cwd: repo });
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const answer = JSON.parse(run.stdout) as {
      state: string;
      attempts: Array<{ verdict: { checks: string[] } }>;
      explanation: Array<{ step: string; message: string }>;
    };
    expect(answer.state).toBe('succeeded');
    expect(answer.attempts[0]?.verdict.checks).toEqual(expect.arrayContaining([expect.stringContaining('passed'), 'judge']));
    expect(answer.explanation.some((entry) => entry.step === 'execute' && entry.message.includes('prepared an isolated working copy'))).toBe(true);
    const worktrees = execFileSync('git', ['-C', repo, 'worktree', 'list']).toString().trim().split('\n');
    expect(worktrees).toHaveLength(1);
  });

  it('rejects every attempt whose test command fails: actor.verification.failed, exit 1', async () => {
    const run = await actor(['run', '--json', '--repo', repo, '--max-attempts', '2', '--test', 'test "$(sh add.sh 2 3)" = 6', 'Fix the bug in add.sh']);
    expect(run.code).toBe(1);
    const answer = JSON.parse(run.stdout) as { error: { code: string; message: string }; attempts: Array<{ state: string }> };
    expect(answer.error.code).toBe('actor.verification.failed');
    expect(answer.error.message).toContain('test command');
    expect(answer.attempts.map((attempt) => attempt.state)).toEqual(['rejected', 'rejected']);
  });

  it('refuses --test outside a git repository with exit 2', async () => {
    const plain = await mkdtemp(join(tmpdir(), 'actor-cli-plain-'));
    const run = await actor(['run', '--test', 'true', 'Fix it'], { cwd: plain });
    await rm(plain, { recursive: true, force: true });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('is not a git work tree');
  });
});
