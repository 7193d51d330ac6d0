import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@actor/kit';
import { rejection } from '@actor/kit/testing';
import { TaskState, type Task } from '@actor/proto/execution';
import { startInProcessPlatform, type InProcessPlatform } from '../support/in-process-platform.js';

const projectId = 'prj_default';
const logger = createLogger('integration', 'silent');
const testCommand = 'test "$(cat answer.txt)" = 42';
const input = 'Put the answer to the question in answer.txt.';

function git(repo: string, ...args: string[]): string {
  return execFileSync('git', ['-C', repo, '-c', 'user.name=Actor Test', '-c', 'user.email=test@actor.invalid', ...args], {
    encoding: 'utf8',
  });
}

async function finished(platform: InProcessPlatform, taskId: string): Promise<Task> {
  for await (const { event } of platform.execution.watchTask({ taskId, projectId })) {
    if (event!.kind === 'end') break;
  }
  const { task } = await platform.execution.getTask({ taskId, projectId });
  return task!;
}

/**
 * A code task in a real git repository: each attempt's backend works in its own worktree at the
 * task's ref, the test command runs there before any judge, and the repository itself is untouched.
 * The backends are two script agent slots (no AI) that write different answers, so the outcome is
 * deterministic. Both are of the one `script` adapter type, which placement counts as one backend:
 * a failed attempt has no stronger backend to escalate to, so the failing task ends there.
 */
describe('a code task with a workspace and a test command', () => {
  let platform: InProcessPlatform;
  let repo: string;
  let broken: string;
  let fixed: string;

  beforeAll(async () => {
    repo = mkdtempSync(join(tmpdir(), 'actor-code-task-'));
    git(repo, 'init', '--quiet', '--initial-branch=main');
    writeFileSync(join(repo, 'answer.txt'), 'unknown\n');
    git(repo, 'add', '-A');
    git(repo, 'commit', '--quiet', '-m', 'start');

    platform = await startInProcessPlatform(logger);
    const slot = async (name: string, answer: string) => {
      const { agent } = await platform.pool.createAgent({
        requestId: `create-${name}`,
        agent: {
          name,
          agentType: 'script',
          capabilities: ['*'],
          enabled: true,
          concurrency: 1,
          configurationJson: JSON.stringify({ command: ['sh', '-c', `echo ${answer} > answer.txt && echo wrote ${answer}`] }),
        },
      });
      return agent!.id;
    };
    broken = await slot('writes-a-wrong-answer', '41');
    fixed = await slot('writes-the-right-answer', '42');
  }, 180_000);

  afterAll(async () => {
    await platform?.stop();
    if (repo) rmSync(repo, { recursive: true, force: true });
  });

  it('rejects a task whose workspace is not an absolute path to a git work tree with a ref that resolves', async () => {
    const notGit = mkdtempSync(join(tmpdir(), 'actor-not-git-'));
    try {
      const cases = [
        { repo: 'relative/repo', ref: 'main', message: /must be an absolute path/ },
        { repo: notGit, ref: '', message: /is not a git work tree/ },
        { repo, ref: 'no-such-branch', message: /does not resolve to a commit/ },
      ];
      for (const { repo: path, ref, message } of cases) {
        const refused = await rejection(
          platform.execution.createTask({ projectId, input, workspace: { repo: path, ref }, verify: { testCommand, judge: true, judgeSet: true } }),
        );
        expect(refused.status).toBe(3);
        expect(refused.message).toMatch(message);
      }
    } finally {
      rmSync(notGit, { recursive: true, force: true });
    }
  });

  it('fails with actor.verification.failed when the test command fails in the attempt\'s working copy, without a judge', async () => {
    const { task: created } = await platform.execution.createTask({
      projectId,
      input,
      agentId: broken,
      backends: ['script'],
      workspace: { repo, ref: 'main' },
      verify: { testCommand, judge: true, judgeSet: true },
    });
    const task = await finished(platform, created!.id);

    expect(task.state).toBe(TaskState.TASK_STATE_FAILED);
    expect(task.error?.code).toBe('actor.verification.failed');
    expect(task.error?.message).toContain(`rejected by the test command \`${testCommand}\``);
    expect(task.attempts).toHaveLength(1);
    const [attempt] = task.attempts;
    expect(attempt?.agentId).toBe(broken);
    expect(attempt?.verdict).toMatchObject({ pass: false, judgeBackend: '' });
    expect(attempt?.verdict?.checks).toEqual([`test command \`${testCommand}\` failed with exit code 1`, 'changed files: answer.txt']);
    const verify = task.explanation.find((entry) => entry.step === 'verify');
    expect(JSON.parse(verify!.detailJson)).toMatchObject({ changedFiles: ['answer.txt'], exitCode: 1, passed: false });
    expect(JSON.parse(verify!.detailJson).diff).toContain('+41');
    // No judge was placed for the rejected answer.
    expect(task.explanation.some((entry) => /leased agent \S+ \(demo:[^)]+\) for the judge/.test(entry.message))).toBe(false);
  }, 120_000);

  it('succeeds when the test command passes, then the judge passes, with the change in the verdict', async () => {
    const { task: created } = await platform.execution.createTask({
      projectId,
      input,
      agentId: fixed,
      backends: ['script'],
      workspace: { repo, ref: 'main' },
      verify: { testCommand, judge: true, judgeSet: true },
    });
    const task = await finished(platform, created!.id);

    expect(task.error).toBeUndefined();
    expect(task.state).toBe(TaskState.TASK_STATE_SUCCEEDED);
    expect(task.result).toBe('wrote 42\n');
    const [attempt] = task.attempts;
    expect(attempt?.verdict?.pass).toBe(true);
    expect(attempt?.verdict?.judgeBackend).toMatch(/^demo:/);
    expect(attempt?.verdict?.checks).toEqual([`test command \`${testCommand}\` passed`, 'changed files: answer.txt', 'judge']);
  }, 120_000);

  it('leaves the repository untouched and removes every working copy', async () => {
    expect(readFileSync(join(repo, 'answer.txt'), 'utf8')).toBe('unknown\n');
    expect(git(repo, 'status', '--porcelain')).toBe('');
    const worktrees = git(repo, 'worktree', 'list', '--porcelain')
      .split('\n')
      .filter((line) => line.startsWith('worktree '));
    expect(worktrees).toEqual([`worktree ${repo}`]);
    const { tasks } = await platform.execution.listTasks({ projectId, pageSize: 10 });
    for (const listed of tasks) {
      const { task } = await platform.execution.getTask({ taskId: listed.id, projectId });
      for (const attempt of task!.attempts) expect(existsSync(join(tmpdir(), `actor-ws-${attempt.id}`))).toBe(false);
    }
  });
});
