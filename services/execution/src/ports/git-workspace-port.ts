import { execFile, spawn } from 'node:child_process';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { isAbsolute, join, posix } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import {
  PortRefusal,
  type CheckResult,
  type EngineTask,
  type PreparedWorkspace,
  type WorkspaceDiff,
  type WorkspaceFile,
  type WorkspacePort,
} from '@actor/engine';
import { spawnProcessGroup, subprocessEnvironment } from '../agents/subprocess/process-group.js';

/** How much of a test command's output is kept (its end), in characters. */
const outputTailCharacters = 4_000;
/** How much of the patch is kept in the explanation, in characters. */
const diffCharacters = 16_000;
const gitTimeoutMs = 60_000;
const gitOutputBytes = 64 * 1024 * 1024;
/** The default limit of a check command (test command, postcondition), in ms: 10 minutes. */
export const defaultCheckTimeoutMs = 600_000;
const worktreePrefix = 'actor-ws-';
/** Beside each working copy, who made it, so that a later process can tell an orphan from a live copy. */
const ownerSuffix = '.owner.json';

export interface GitWorkspaceOptions {
  /** Where working copies go; default the system's temporary directory. */
  directory?: string;
  /**
   * A check command (test command, postcondition) running longer is stopped and fails; default 10
   * minutes (`EXECUTION_CHECK_TIMEOUT_MS`). A task's `verify.checkTimeoutMs` can only lower it.
   */
  checkTimeoutMs?: number;
}

/** Who made a working copy: written before the copy, removed after it. */
interface WorktreeOwner {
  host: string;
  pid: number;
  repo: string;
  attemptId: string;
  createdAt: string;
}

/** What an orphan sweep did. */
export interface OrphanSweep {
  /** Working copies removed: their process is gone. */
  removed: string[];
  /** `actor-ws-*` folders without an owner record (not made by this version), left alone. */
  unowned: string[];
  /** Copies that could not be removed, with why. */
  failed: Array<{ path: string; error: string }>;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, under another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Reads at most `bytes` bytes of a git command's output, then stops it: a huge file is never read whole. */
function gitHead(args: string[], bytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { env: subprocessEnvironment({ GIT_TERMINAL_PROMPT: '0' }), stdio: ['ignore', 'pipe', 'ignore'] });
    const chunks: Buffer[] = [];
    let length = 0;
    const timer = setTimeout(() => child.kill('SIGKILL'), gitTimeoutMs);
    child.stdout.on('data', (chunk: Buffer) => {
      if (length >= bytes) return;
      chunks.push(chunk);
      length += chunk.length;
      if (length >= bytes) child.kill('SIGKILL');
    });
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).subarray(0, bytes));
    });
  });
}

/** A repository-relative path that stays inside the repository, normalised; undefined for any other. */
export function safeRelativePath(path: string): string | undefined {
  if (path === '' || path.includes('\0') || path.includes('\\') || isAbsolute(path) || path.startsWith('/')) return undefined;
  const normalised = posix.normalize(path);
  if (normalised === '.' || normalised === '..' || normalised.startsWith('../') || normalised.startsWith('/')) return undefined;
  if (normalised.split('/').some((part) => part === '.git')) return undefined;
  return normalised;
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
    this.checkTimeoutMs = options.checkTimeoutMs ?? defaultCheckTimeoutMs;
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
    const path = join(this.directory, `${worktreePrefix}${attemptId}`);
    // A copy left by a run that died with this attempt id is replaced.
    await this.remove(repo, path);
    // The owner record comes first, so that no copy made by this process is ever without one.
    const owner: WorktreeOwner = { host: hostname(), pid: process.pid, repo, attemptId, createdAt: new Date().toISOString() };
    await writeFile(`${path}${ownerSuffix}`, JSON.stringify(owner));
    try {
      await git(['-C', repo, 'worktree', 'add', '--detach', path, commit]);
    } catch (error) {
      if (error instanceof GitFailure) throw new PortRefusal('actor.workspace.unavailable', error.message);
      throw error;
    }
    this.open.set(path, { repo, commit });
    return { path, attemptId };
  }

  async runCheck(workspace: PreparedWorkspace, command: string, signal: AbortSignal, options: { timeoutMs?: number } = {}): Promise<CheckResult> {
    // A task may ask for less time than the service allows, never more.
    const timeoutMs = options.timeoutMs && options.timeoutMs > 0 ? Math.min(options.timeoutMs, this.checkTimeoutMs) : this.checkTimeoutMs;
    const group = spawnProcessGroup('sh', ['-c', command], { cwd: workspace.path, environment: subprocessEnvironment() });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      group.stop();
    }, timeoutMs);
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
    await rm(`${workspace.path}${ownerSuffix}`, { force: true });
  }

  /**
   * Reads files of the task's repository at its ref from git's object store, not from any checkout:
   * a path is taken only when it stays inside the repository (no absolute path, no `..`, nothing
   * under `.git`) and names a regular file at that commit (a symlink, folder, submodule or missing
   * path is left out), so nothing outside the repository's committed files can be read. At most
   * `maxCharacters` characters of each (UTF-8 text; a file with NUL bytes counts as binary and is
   * left out), and at most 4 bytes per character are ever read.
   */
  async readFiles(task: EngineTask, paths: string[], maxCharacters: number): Promise<WorkspaceFile[]> {
    const repo = task.workspace?.repo;
    if (!repo) return [];
    const commit = await this.resolve(repo, task.workspace?.ref ?? '');
    if (commit === undefined) return [];
    const files: WorkspaceFile[] = [];
    for (const asked of paths) {
      const path = safeRelativePath(asked);
      if (path === undefined) continue;
      const entry = await git(['--literal-pathspecs', '-C', repo, 'ls-tree', '-z', '--long', commit, '--', path]).catch(() => '');
      // `<mode> <type> <object> <size>\t<path>\0`; only one entry names exactly this path.
      const match = /^(\d+) (\w+) ([0-9a-f]+) +(\d+|-)\t([^\0]*)\0/.exec(entry);
      if (!match || match[5] !== path || match[2] !== 'blob' || (match[1] !== '100644' && match[1] !== '100755')) continue;
      const sizeBytes = Number(match[4]);
      const head = await gitHead(['-C', repo, 'cat-file', 'blob', match[3]!], Math.min(sizeBytes, maxCharacters * 4));
      if (head.includes(0)) continue;
      const text = head.toString('utf8');
      const content = text.length > maxCharacters ? text.slice(0, maxCharacters) : text;
      files.push({ path: asked, content, truncated: content.length < text.length || head.length < sizeBytes, sizeBytes });
    }
    return files;
  }

  /**
   * Removes the working copies whose process is gone: a process that crashed (or was killed) in the
   * middle of an attempt leaves its worktree behind. A copy is an orphan when its owner record names
   * this host and a process that no longer exists; copies of live processes (other replicas on this
   * host, this process) are kept. Run at start-up and periodically.
   */
  async sweepOrphans(): Promise<OrphanSweep> {
    const sweep: OrphanSweep = { removed: [], unowned: [], failed: [] };
    let names: string[];
    try {
      names = await readdir(this.directory);
    } catch {
      return sweep;
    }
    const owned = new Set<string>();
    for (const name of names) {
      if (!name.startsWith(worktreePrefix) || !name.endsWith(ownerSuffix)) continue;
      const path = join(this.directory, name.slice(0, -ownerSuffix.length));
      owned.add(path);
      let owner: WorktreeOwner;
      try {
        owner = JSON.parse(await readFile(join(this.directory, name), 'utf8')) as WorktreeOwner;
      } catch {
        continue;
      }
      if (owner.host !== hostname() || owner.pid === process.pid || processAlive(owner.pid)) continue;
      try {
        await this.remove(owner.repo, path);
        await rm(`${path}${ownerSuffix}`, { force: true });
        sweep.removed.push(path);
      } catch (error) {
        sweep.failed.push({ path, error: error instanceof Error ? error.message : String(error) });
      }
    }
    for (const name of names) {
      const path = join(this.directory, name);
      if (name.startsWith(worktreePrefix) && !name.endsWith(ownerSuffix) && !owned.has(path)) sweep.unowned.push(path);
    }
    return sweep;
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
