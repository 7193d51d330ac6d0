import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EngineTask } from '@actor/engine';
import { GitWorkspacePort, safeRelativePath } from './git-workspace-port.js';

function git(repo: string, ...args: string[]): string {
  return execFileSync('git', ['-C', repo, '-c', 'user.name=Actor Test', '-c', 'user.email=test@actor.invalid', ...args], {
    encoding: 'utf8',
  });
}

function task(repo: string, ref = 'main'): EngineTask {
  return {
    id: 'tsk_ws',
    projectId: 'prj_ws',
    input: 'read files',
    mode: 'balanced',
    budget: { perTaskMicroUsd: 0, perDayMicroUsd: 0 },
    backends: [],
    capabilities: [],
    attachmentMediaTypes: [],
    verify: { judge: false },
    workspace: { repo, ref },
  };
}

let root: string;
let repo: string;
let copies: string;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'actor-ws-port-test-'));
  repo = join(root, 'repo');
  copies = join(root, 'copies');
  mkdirSync(repo);
  mkdirSync(copies);
  writeFileSync(join(root, 'secret.txt'), 'outside the repository');
  git(repo, 'init', '--quiet', '--initial-branch=main');
  mkdirSync(join(repo, 'src'));
  writeFileSync(join(repo, 'src', 'app.ts'), 'export const answer = 42;\n');
  writeFileSync(join(repo, 'big.txt'), 'y'.repeat(50_000));
  writeFileSync(join(repo, 'binary.bin'), Buffer.from([1, 0, 2, 0]));
  symlinkSync(join(root, 'secret.txt'), join(repo, 'link.txt'));
  git(repo, 'add', '-A');
  git(repo, 'commit', '--quiet', '-m', 'start');
  // Not committed: the task's ref is what is read, never the checkout.
  writeFileSync(join(repo, 'src', 'app.ts'), 'uncommitted edit\n');
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

describe('GitWorkspacePort.readFiles', () => {
  it('reads committed files at the ref, cut to the limit, and leaves out every path outside the repository', async () => {
    const port = new GitWorkspacePort({ directory: copies });
    const files = await port.readFiles(
      task(repo),
      ['src/app.ts', './src/app.ts', 'big.txt', 'missing.txt', '../secret.txt', join(root, 'secret.txt'), 'src/../../secret.txt', 'link.txt', '.git/config', 'src', 'binary.bin'],
      1_000,
    );
    expect(files.map((file) => file.path)).toEqual(['src/app.ts', './src/app.ts', 'big.txt']);
    expect(files[0]).toEqual({ path: 'src/app.ts', content: 'export const answer = 42;\n', truncated: false, sizeBytes: 26 });
    expect(files[2]).toMatchObject({ content: 'y'.repeat(1_000), truncated: true, sizeBytes: 50_000 });
  });

  it('knows the safe relative paths', () => {
    expect(safeRelativePath('a/b/../c.txt')).toBe('a/c.txt');
    for (const unsafe of ['', '/etc/passwd', '..', '../x', 'a/../../x', '.git/config', 'a/.git/HEAD', 'a\\..\\x']) {
      expect(safeRelativePath(unsafe)).toBeUndefined();
    }
  });
});

describe('GitWorkspacePort.runCheck', () => {
  it('a task can lower the time limit, never raise it', async () => {
    const port = new GitWorkspacePort({ directory: copies, checkTimeoutMs: 60_000 });
    const workspace = await port.prepare(task(repo), 'att_timeout');
    try {
      const stopped = await port.runCheck(workspace, 'sleep 30', new AbortController().signal, { timeoutMs: 300 });
      expect(stopped).toMatchObject({ passed: false, timedOut: true, exitCode: null });

      const short = new GitWorkspacePort({ directory: copies, checkTimeoutMs: 300 });
      const held = await short.runCheck(workspace, 'sleep 30', new AbortController().signal, { timeoutMs: 120_000 });
      expect(held).toMatchObject({ passed: false, timedOut: true });

      expect(await port.runCheck(workspace, 'test -f src/app.ts', new AbortController().signal, { timeoutMs: 10_000 })).toMatchObject({
        passed: true,
        exitCode: 0,
      });
    } finally {
      await port.dispose(workspace);
    }
    expect(existsSync(workspace.path)).toBe(false);
    expect(existsSync(`${workspace.path}.owner.json`)).toBe(false);
  }, 60_000);
});

describe('GitWorkspacePort.sweepOrphans', () => {
  it('removes the working copy of a process that was killed, and keeps the copies of live processes', async () => {
    const holder = fileURLToPath(new URL('./testing/worktree-holder.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', holder, copies, repo, 'att_crashed'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const path = await new Promise<string>((resolve, reject) => {
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('\n')) resolve(output.trim());
      });
      child.on('exit', (code) => reject(new Error(`the holder exited early (${code})`)));
    });
    expect(existsSync(path)).toBe(true);

    const port = new GitWorkspacePort({ directory: copies });
    const own = await port.prepare(task(repo), 'att_live');
    try {
      // The holder is alive: its copy is not an orphan yet.
      expect((await port.sweepOrphans()).removed).toEqual([]);

      const exited = new Promise((resolve) => child.on('exit', resolve));
      child.kill('SIGKILL');
      await exited;
      expect(git(repo, 'worktree', 'list', '--porcelain')).toContain(path);

      const sweep = await port.sweepOrphans();
      expect(sweep.removed).toEqual([path]);
      expect(sweep.failed).toEqual([]);
      expect(existsSync(path)).toBe(false);
      expect(existsSync(`${path}.owner.json`)).toBe(false);
      expect(git(repo, 'worktree', 'list', '--porcelain')).not.toContain(path);
      // This process's own copy is left alone.
      expect(existsSync(own.path)).toBe(true);
      expect((await port.sweepOrphans()).removed).toEqual([]);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await port.dispose(own);
    }
  }, 60_000);
});
