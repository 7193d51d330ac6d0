import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { processAlive } from '@actor/kit/testing';

const fixture = fileURLToPath(new URL('./testing/hold-process-group.ts', import.meta.url));

const groupAlive = (pgid: number) => processAlive(-pgid);

async function waitUntil(condition: () => boolean, deadlineMs: number): Promise<boolean> {
  const until = Date.now() + deadlineMs;
  while (Date.now() < until) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return condition();
}

const started: ChildProcess[] = [];
const groups: number[] = [];

afterEach(() => {
  for (const child of started.splice(0)) child.kill('SIGKILL');
  for (const pgid of groups.splice(0)) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // gone, as it should be
    }
  }
});

/** Runs the fixture in its own node process and reads the group and watchdog it reports. */
async function runFixture(mode: 'hold' | 'exit'): Promise<{ child: ChildProcess; pgid: number; watchdog: number }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fixture, mode], { stdio: ['ignore', 'pipe', 'inherit'] });
  started.push(child);
  const line = await new Promise<string>((resolve, reject) => {
    let text = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes('\n')) resolve(text.slice(0, text.indexOf('\n')));
    });
    child.once('exit', (code) => reject(new Error(`fixture exited with ${code} before reporting`)));
  });
  const { pgid, watchdog } = JSON.parse(line) as { pgid: number; watchdog: number };
  groups.push(pgid);
  return { child, pgid, watchdog };
}

describe('group reaper', () => {
  it('stops the subprocess groups of a process killed with SIGKILL', async () => {
    const { child, pgid, watchdog } = await runFixture('hold');
    expect(groupAlive(pgid)).toBe(true);
    expect(processAlive(watchdog)).toBe(true);

    child.kill('SIGKILL');

    // The group's shell and both of its sleeps go, then the watchdog itself.
    expect(await waitUntil(() => !groupAlive(pgid), 10_000)).toBe(true);
    expect(await waitUntil(() => !processAlive(watchdog), 10_000)).toBe(true);
  });

  it('lets a process that exits normally end its watchdog, with no group left to stop', async () => {
    const { child, pgid, watchdog } = await runFixture('exit');
    expect(watchdog).toBeGreaterThan(0);
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(0);
    expect(groupAlive(pgid)).toBe(false);
    expect(await waitUntil(() => !processAlive(watchdog), 10_000)).toBe(true);
  });
});
