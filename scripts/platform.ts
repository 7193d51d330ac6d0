import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { STOP_WITH_LAUNCHER_VARIABLE } from '@actor/kit';

/** The processes of a platform, in start order; the gateway comes last. */
export const platformProcesses = ['registry', 'pool', 'placement', 'billing', 'execution', 'gateway'] as const;
export type PlatformProcess = (typeof platformProcesses)[number];

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function entryPoint(name: PlatformProcess): string {
  return name === 'gateway' ? join(root, 'gateway', 'src', 'main.ts') : join(root, 'services', name, 'src', 'main.ts');
}

/** A free loopback port (the OS picks one; released before the service binds it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

export interface LaunchOptions {
  /** Environment for every process (DATABASE_URL, ACTOR_DATA_DIR, ACTOR_DEV_TOKEN, addresses...). */
  env: Record<string, string | undefined>;
  /** Receives each output line of each process, prefixed by its name. */
  onLine?: (name: PlatformProcess, line: string) => void;
  /** Called when a process exits on its own (not through stop()). */
  onExit?: (name: PlatformProcess, code: number | null, signal: NodeJS.Signals | null) => void;
}

export interface RunningPlatform {
  processes: Map<PlatformProcess, ChildProcess>;
  /** Sends SIGTERM to every process (gateway first) and waits for them, SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
  /** Kills one process hard (tests of crash recovery). */
  kill(name: PlatformProcess, signal?: NodeJS.Signals): Promise<void>;
  /** Starts one process again (after kill). */
  restart(name: PlatformProcess): void;
}

/**
 * Starts every service and the gateway as separate OS processes running their own `main.ts` through
 * tsx, as `npm run start -w services/<name>` would. Used by `npm start` and the e2e tests.
 */
export function launchPlatform(options: LaunchOptions): RunningPlatform {
  const processes = new Map<PlatformProcess, ChildProcess>();
  const stopping = new Set<PlatformProcess>();

  const startOne = (name: PlatformProcess) => {
    // `node --import tsx` keeps each service ONE process (the tsx CLI would add a wrapper parent), so
    // SIGTERM reaches the service's own drain and SIGKILL really kills it. `detached` gives each its own
    // process group: Ctrl-C reaches only the launcher, which then stops the services in order, once.
    // Their stdin is a pipe from the launcher that is never written: if the launcher dies without
    // stopping them (SIGKILL, a crash), the pipe closes and each service shuts down (kit onShutdown).
    const child = spawn(process.execPath, ['--import', 'tsx', entryPoint(name)], {
      cwd: root,
      env: { ...process.env, ...options.env, [STOP_WITH_LAUNCHER_VARIABLE]: '1' } as NodeJS.ProcessEnv,
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    for (const stream of [child.stdout, child.stderr]) {
      let buffered = '';
      stream?.setEncoding('utf8');
      stream?.on('data', (chunk: string) => {
        buffered += chunk;
        let newline = buffered.indexOf('\n');
        while (newline >= 0) {
          options.onLine?.(name, buffered.slice(0, newline));
          buffered = buffered.slice(newline + 1);
          newline = buffered.indexOf('\n');
        }
      });
    }
    child.on('exit', (code, signal) => {
      if (!stopping.has(name)) options.onExit?.(name, code, signal);
    });
    processes.set(name, child);
  };

  const waitExit = (child: ChildProcess, graceMs: number) =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
    });

  for (const name of platformProcesses) startOne(name);

  return {
    processes,
    async stop(graceMs = 10_000) {
      for (const name of [...platformProcesses].reverse()) {
        stopping.add(name);
        const child = processes.get(name);
        if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      }
      await Promise.all([...processes.values()].map((child) => waitExit(child, graceMs)));
    },
    async kill(name, signal = 'SIGKILL') {
      stopping.add(name);
      const child = processes.get(name);
      if (!child) return;
      child.kill(signal);
      await waitExit(child, 5_000);
    },
    restart(name) {
      stopping.delete(name);
      startOne(name);
    },
  };
}

/** Polls the gateway's /readyz until every service answers healthy, or throws after `timeoutMs`. */
export async function waitUntilReady(gatewayUrl: string, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer yet';
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`${gatewayUrl}/readyz`);
      if (response.ok) return;
      last = `${response.status} ${await response.text()}`;
    } catch (error) {
      last = (error as Error).message;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`platform not ready after ${timeoutMs} ms: ${last}`);
}
