import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { STOP_WITH_LAUNCHER_VARIABLE } from './shutdown.js';

const fixture = fileURLToPath(new URL('./testing/shutdown-child.ts', import.meta.url));

/** Starts the fixture with stdin as a pipe from this process, resolves once it is ready. */
async function startChild(environment: Record<string, string>, mode = '') {
  const child = spawn(process.execPath, ['--import', 'tsx', fixture, mode], {
    env: { ...process.env, ...environment },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  while (!output.includes('ready')) {
    if (child.exitCode !== null) throw new Error(`fixture exited with ${child.exitCode}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return { child, exited, output: () => output };
}

async function waitUntil(condition: () => boolean, deadlineMs: number): Promise<boolean> {
  const until = Date.now() + deadlineMs;
  while (Date.now() < until && !condition()) await new Promise((resolve) => setTimeout(resolve, 50));
  return condition();
}

describe('onShutdown', () => {
  it('started by the launcher, shuts down when the launcher end of stdin closes', async () => {
    const { child, exited, output } = await startChild({ [STOP_WITH_LAUNCHER_VARIABLE]: '1' });
    child.stdin!.end();
    expect(await exited).toBe(0);
    expect(output()).toContain('stopped');
  });

  it('started otherwise, ignores stdin and still stops on SIGTERM', async () => {
    const { child, exited, output } = await startChild({ [STOP_WITH_LAUNCHER_VARIABLE]: '' });
    child.stdin!.end();
    // Still running after its stdin closed...
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(child.exitCode).toBeNull();
    // ...and the usual signal still stops it through its steps.
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(output()).toContain('stopped');
  });

  it('exits when its stdout went away first (a dead launcher), instead of retrying the log write forever', async () => {
    const { child, exited } = await startChild({ [STOP_WITH_LAUNCHER_VARIABLE]: '' }, 'quiet');
    // The reading end is gone, as when the launcher that relays the service's log lines was killed.
    child.stdout!.destroy();
    child.kill('SIGTERM'); // logs `shutting down` to the broken stdout, then exits
    const gone = await waitUntil(() => child.exitCode !== null || child.signalCode !== null, 10_000);
    if (!gone) child.kill('SIGKILL');
    expect(gone).toBe(true);
    await exited;
  });
});
