import { execFile } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import {
  PortRefusal,
  type CheckResult,
  type EngineTask,
  type PreparedWorkspace,
  type WorkspaceDiff,
  type WorkspacePort,
} from '@actor/engine';
import { spawnProcessGroup, subprocessEnvironment } from '../agents/subprocess/process-group.js';

/** How much of a test command's output is kept (its end), in characters. */
const outputTailCharacters = 4_000;
/** How much of the patch is kept in the explanation, in characters. */
const diffCharacters = 16_000;
const gitTimeoutMs = 60_000;
const gitOutputBytes = 64 * 1024 * 1024;

export interface GitWorkspaceOptions {
  /** Where working copies go; default the system's temporary directory. */
  directory?: string;
  /** A test command running longer is stopped and fails; default 10 minutes. */
  checkTimeoutMs?: number;
}

class GitFailure extends Error {}

function git(args: string[], cwd?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'git',
      args,
      { cwd, env: subprocessEnvironment({ GIT_TERMINAL_PROMPT: '0' }), timeout: gitTimeoutMs, maxBuffer: gitOutputBytes },
      (error, stdout, stderr) => {
        if (error) reject(new GitFailure(`git ${args[0] ?? ''} failed: ${String(stderr).trim() || error.message}`));
        else resolve(String(stdout));
      },
    );
  });
}

/**
 * The workspace of code tasks in a local git repository: each attempt works in its own detached
 * worktree at the task's ref (`<tmp>/actor-ws-<attempt id>`), its change is read with `git add -A`
 * and `git diff --cached` against that ref, and the task's test command runs there with `sh -c`,
 * in its own process group, stopped on cancel or after the time limit.
 *
 * Trust: the test command is the task author's and runs with this service's user rights (its
 * environment stripped to a few neutral variables); the worktree only keeps the repository's files
 * out of the way of other attempts. See services/execution/README.md.
 */
export class GitWorkspacePort implements WorkspacePort {
  private readonly directory: string;
  private readonly checkTimeoutMs: number;
  /** The repository and commit of each open working copy, by path. */
  private readonly open = new Map<string, { repo: string; commit: string }>();

  constructor(options: GitWorkspaceOptions = {}) {
    this.directory = options.directory ?? tmpdir();
    this.checkTimeoutMs = options.checkTimeoutMs ?? 600_000;
  }

  /** Why `repo` and `ref` make no workspace, or undefined when they do (CreateTask's check). */
  async problem(repo: string, ref: string): Promise<string | undefined> {
    if (ref.startsWith('-')) return `workspace.ref "${ref}" is not a ref`;
    if (!isAbsolute(repo)) return `workspace.repo "${repo}" must be an absolute path to a local git repository`;
    const inside = await git(['-C', repo, 'rev-parse', '--is-inside-work-tree']).catch(() => '');
    if (inside.trim() !== 'true') return `workspace.repo "${repo}" is not a git work tree`;
    if ((await this.resolve(repo, ref)) === undefined) return `workspace.ref "${ref}" does not resolve to a commit in ${repo}`;
    return undefined;
  }

  async prepare(task: EngineTask, attemptId: string): Promise<PreparedWorkspace> {
    const repo = task.workspace?.repo;
    if (!repo) throw new PortRefusal('actor.workspace.missing', 'the task names no workspace repository');
    const ref = task.workspace?.ref ?? '';
    const commit = await this.resolve(repo, ref);
    if (commit === undefined) {
      throw new PortRefusal('actor.workspace.unavailable', `workspace ref "${ref || 'HEAD'}" no longer resolves in ${repo}`);
    }
    const path = join(this.directory, `actor-ws-${attemptId}`);
    // A copy left by a run that died with this attempt id is replaced.
    await this.remove(repo, path);
    try {
      await git(['-C', repo, 'worktree', 'add', '--detach', path, commit]);
    } catch (error) {
      if (error instanceof GitFailure) throw new PortRefusal('actor.workspace.unavailable', error.message);
      throw error;
    }
    this.open.set(path, { repo, commit });
    return { path, attemptId };
  }

  async runCheck(workspace: PreparedWorkspace, command: string, signal: AbortSignal): Promise<CheckResult> {
    const group = spawnProcessGroup('sh', ['-c', command], { cwd: workspace.path, environment: subprocessEnvironment() });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      group.stop();
    }, this.checkTimeoutMs);
    const onAbort = () => group.stop();
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) group.stop();

    let output = '';
    const keep = (decoder: StringDecoder) => (chunk: Buffer) => {
      output = (output + decoder.write(chunk)).slice(-outputTailCharacters);
    };
    group.child.stdout.on('data', keep(new StringDecoder('utf8')));
    group.child.stderr.on('data', keep(new StringDecoder('utf8')));
    group.child.stdin.end();
    const exit = await group.closed;
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);

    if (exit.kind === 'spawn-failed') {
      return { passed: false, exitCode: null, outputTail: `cannot start sh: ${exit.error.code ?? exit.error.message}`, timedOut: false };
    }
    const stopped = timedOut || signal.aborted;
    return { passed: !stopped && exit.code === 0, exitCode: exit.code, outputTail: output, timedOut };
  }

  async diff(workspace: PreparedWorkspace): Promise<WorkspaceDiff> {
    const base = this.open.get(workspace.path)?.commit ?? 'HEAD';
    await git(['-C', workspace.path, 'add', '-A']);
    const [stat, names, patch] = await Promise.all([
      git(['-C', workspace.path, 'diff', '--cached', '--stat', base]),
      git(['-C', workspace.path, 'diff', '--cached', '--name-only', base]),
      git(['-C', workspace.path, 'diff', '--cached', base]),
    ]);
    const shortened = patch.length > diffCharacters ? `${patch.slice(0, diffCharacters)}\n[... ${patch.length - diffCharacters} more characters]` : patch;
    return {
      diff: `${stat.trimEnd()}\n\n${shortened}`.trim(),
      changedFiles: names.split('\n').filter((name) => name !== ''),
    };
  }

  async dispose(workspace: PreparedWorkspace): Promise<void> {
    const repo = this.open.get(workspace.path)?.repo;
    this.open.delete(workspace.path);
    if (repo) await this.remove(repo, workspace.path);
    else await rm(workspace.path, { recursive: true, force: true });
  }

  private async resolve(repo: string, ref: string): Promise<string | undefined> {
    const commit = await git(['-C', repo, 'rev-parse', '--verify', '--quiet', `${ref || 'HEAD'}^{commit}`]).catch(() => '');
    return commit.trim() || undefined;
  }

  private async remove(repo: string, path: string): Promise<void> {
    await git(['-C', repo, 'worktree', 'remove', '--force', path]).catch(() => undefined);
    await rm(path, { recursive: true, force: true });
    await git(['-C', repo, 'worktree', 'prune']).catch(() => undefined);
  }
}
