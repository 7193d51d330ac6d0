import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@actor/kit';
import { CitationStyle, TaskState, type Task } from '@actor/proto/execution';
import { startInProcessPlatform, type InProcessPlatform } from '../support/in-process-platform.js';

const projectId = 'prj_default';
const logger = createLogger('integration', 'silent');
const postcondition = 'grep -q sent outbox.txt';

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
 * The task's own checks besides the test command, through the five real services: an action task's
 * postconditions run in the attempt's git worktree, and a research task's citations are checked
 * before any judge, a rejection escalating to a stronger backend.
 */
describe('tasks with postconditions and citations', () => {
  let platform: InProcessPlatform;
  let repo: string;
  let forgets: string;
  let sends: string;

  beforeAll(async () => {
    repo = mkdtempSync(join(tmpdir(), 'actor-action-task-'));
    git(repo, 'init', '--quiet', '--initial-branch=main');
    writeFileSync(join(repo, 'outbox.txt'), 'draft: release 1.2 is out\n');
    git(repo, 'add', '-A');
    git(repo, 'commit', '--quiet', '-m', 'start');

    platform = await startInProcessPlatform(logger);
    const slot = async (name: string, script: string) => {
      const { agent } = await platform.pool.createAgent({
        requestId: `create-${name}`,
        agent: {
          name,
          agentType: 'script',
          capabilities: ['*'],
          enabled: true,
          concurrency: 1,
          configurationJson: JSON.stringify({ command: ['sh', '-c', script] }),
        },
      });
      return agent!.id;
    };
    // The script reads the (enhanced) prompt on stdin; one only answers, the other also acts.
    forgets = await slot('answers-only', 'cat > prompt.txt && echo will send it later');
    sends = await slot('sends', 'cat > prompt.txt && echo "sent: release 1.2 is out" > outbox.txt && echo sent it');
  }, 180_000);

  afterAll(async () => {
    await platform?.stop();
    if (repo) rmSync(repo, { recursive: true, force: true });
  });

  it("rejects an action whose postcondition fails in the attempt's working copy, without a judge", async () => {
    const { task: created } = await platform.execution.createTask({
      projectId,
      input: 'Send the release email in outbox.txt.',
      agentId: forgets,
      backends: ['script'],
      workspace: { repo, ref: 'main' },
      verify: { judge: true, judgeSet: true, testCommand: '', citations: undefined, postconditions: [postcondition], checkTimeoutMs: 20_000 },
    });
    const task = await finished(platform, created!.id);

    expect(task.state).toBe(TaskState.TASK_STATE_FAILED);
    expect(task.error?.code).toBe('actor.verification.failed');
    expect(task.error?.message).toContain(`rejected by the postcondition \`${postcondition}\` (failed with exit code 1)`);
    const [attempt] = task.attempts;
    expect(attempt?.verdict?.checks).toEqual([`postcondition \`${postcondition}\` failed with exit code 1`, 'changed files: prompt.txt']);
    expect(task.explanation.some((entry) => /leased agent \S+ \(demo:[^)]+\) for the judge/.test(entry.message))).toBe(false);
    expect(task.verify).toMatchObject({ postconditions: [postcondition], checkTimeoutMs: 20_000 });
  }, 120_000);

  it('passes an action whose postcondition holds, then the judge; the enhance step added the file the task names', async () => {
    const { task: created } = await platform.execution.createTask({
      projectId,
      input: 'Send the release email in outbox.txt.',
      agentId: sends,
      backends: ['script'],
      workspace: { repo, ref: 'main' },
      verify: { judge: true, judgeSet: true, testCommand: '', citations: undefined, postconditions: [postcondition], checkTimeoutMs: 0 },
    });
    const task = await finished(platform, created!.id);

    expect(task.error).toBeUndefined();
    expect(task.state).toBe(TaskState.TASK_STATE_SUCCEEDED);
    const [attempt] = task.attempts;
    expect(attempt?.verdict?.checks).toEqual([`postcondition \`${postcondition}\` passed`, 'changed files: outbox.txt, prompt.txt', 'judge']);
    expect(attempt?.verdict?.judgeBackend).toMatch(/^demo:/);

    const enhance = task.explanation.find((entry) => entry.step === 'enhance');
    expect(enhance?.message).toContain('the file the task names (outbox.txt)');
    const detail = JSON.parse(enhance!.detailJson) as { files: Array<{ path: string; sizeBytes: number }>; memory: string[]; addedCharacters: number };
    expect(detail.files).toEqual([{ path: 'outbox.txt', characters: 26, sizeBytes: 26, truncated: false }]);
    // The earlier task of this project (the failed one above) is recalled from execution's own table.
    expect(detail.memory).toHaveLength(1);
    expect(detail.memory[0]).toMatch(/^tsk_\S+ "Send the release email in outbox.txt." failed \(actor.verification.failed\)/);
    expect(detail.addedCharacters).toBeGreaterThan(26);
    // The repository itself is untouched: the action ran in a worktree.
    expect(readFileSync(join(repo, 'outbox.txt'), 'utf8')).toBe('draft: release 1.2 is out\n');
    expect(git(repo, 'status', '--porcelain')).toBe('');
  }, 120_000);

  it('rejects a research answer without the citations asked before any judge, and passes after escalation', async () => {
    // Demo backends write no URLs, and their slot configuration has no switch for citations; what
    // tells their answers apart is the approach: tier 3 and up write four numbered steps, lower tiers
    // three. A `regex` requirement of four numbered lines stands in for citations here.
    const { agents } = await platform.pool.listAgents({});
    for (const agent of agents.filter((listed) => listed.agentType.startsWith('demo:'))) {
      await platform.pool.updateAgent({ agent: { ...agent, configurationJson: JSON.stringify({ quality: 1, latency_ms: 20 }) } });
    }
    const citations = { style: CitationStyle.CITATION_STYLE_REGEX, pattern: '^\\d+\\. ', min: 4 };

    const { task: created } = await platform.execution.createTask({
      projectId,
      input: 'Research the history of the printing press and cite your sources.',
      // The cheapest of the two answers first; the escalation must go to the stronger one.
      mode: 'cheapest',
      backends: ['demo:alpha-mini', 'demo:alpha-pro'],
      verify: { judge: true, judgeSet: true, testCommand: '', citations, postconditions: [], checkTimeoutMs: 0 },
    });
    const task = await finished(platform, created!.id);

    expect(task.error).toBeUndefined();
    expect(task.state).toBe(TaskState.TASK_STATE_SUCCEEDED);
    expect(task.classification?.taskClass).toBe('research');
    const [first, second] = task.attempts;
    expect(first?.backend).toBe('demo:alpha-mini');
    expect(first?.state).toBe('rejected');
    expect(first?.verdict).toMatchObject({ pass: false, judgeBackend: '' });
    expect(first?.verdict?.checks).toEqual(['citations (at least 4 distinct matches of /^\\d+\\. /) failed: 3 found']);
    expect(second?.backend).toBe('demo:alpha-pro');
    expect(second?.state).toBe('passed');
    expect(second?.verdict?.checks).toEqual(['citations (at least 4 distinct matches of /^\\d+\\. /) passed: 4 found', 'judge']);
    const escalate = task.explanation.find((entry) => entry.step === 'escalate');
    expect(escalate?.message).toContain('needs a backend stronger than demo:alpha-mini');
    // Only the second attempt was judged.
    expect(
      task.explanation.filter((entry) => /leased agent \S+ \(demo:[^)]+\) for the judge/.test(entry.message)).map((entry) => entry.attempt),
    ).toEqual([2]);
    expect(task.verify?.citations).toEqual(citations);
  }, 180_000);
});
