import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { processAlive } from '@actor/kit/testing';

/**
 * `npm start`'s launcher killed with SIGKILL (nothing of it runs to stop the services): every service
 * sees its stdin pipe from the launcher close and shuts down on its own, instead of running on with
 * its ports, its data dir and (for execution) its agent runs.
 */
const fixture = fileURLToPath(new URL('../support/launcher-child.ts', import.meta.url));


describe('the platform launcher killed', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'actor-launcher-'));
  let launcher: ChildProcess | undefined;
  let pids: number[] = [];

  afterAll(() => {
    launcher?.kill('SIGKILL');
    for (const pid of pids) if (processAlive(pid)) process.kill(pid, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('takes every service down with it', async () => {
    launcher = spawn(process.execPath, ['--import', 'tsx', fixture, dataDir], { stdio: ['ignore', 'pipe', 'inherit'] });
    const line = await new Promise<string>((resolve, reject) => {
      let text = '';
      launcher!.stdout!.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        if (text.includes('\n')) resolve(text.slice(0, text.indexOf('\n')));
      });
      launcher!.once('exit', (code) => reject(new Error(`the launcher exited with ${code} before the platform was up`)));
    });
    pids = (JSON.parse(line) as { pids: number[] }).pids;
    expect(pids).toHaveLength(6);
    expect(pids.every(processAlive)).toBe(true);

    launcher.kill('SIGKILL');

    const until = Date.now() + 30_000;
    while (Date.now() < until && pids.some(processAlive)) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(pids.filter(processAlive)).toEqual([]);
  }, 240_000);
});
