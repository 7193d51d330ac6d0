import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { forgetGroup, watchGroup } from './group-reaper.js';

/** How long a stopped process group gets between SIGTERM and SIGKILL, in ms. */
const killGraceMs = 250;

/** The environment variables a subprocess inherits from this service; nothing else of ours leaks to it. */
const inheritedVariables = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TMPDIR', 'TZ', 'USER', 'SHELL', 'TERM'];

/**
 * The environment of a subprocess agent: a few neutral variables of this process (never its
 * database URL or its own keys), then the adapter's, then the request's (bring-your-own keys).
 */
export function subprocessEnvironment(...layers: Array<Record<string, string> | undefined>): Record<string, string> {
  const environment: Record<string, string> = {};
  for (const name of inheritedVariables) {
    const value = process.env[name];
    if (value !== undefined) environment[name] = value;
  }
  for (const layer of layers) Object.assign(environment, layer);
  return environment;
}

/**
 * A subprocess that leads its own process group, so that stopping it stops everything it started,
 * and that is stopped too if this process dies without stopping it (group-reaper.ts).
 */
export interface ProcessGroup {
  readonly child: ChildProcessWithoutNullStreams;
  /** Resolves once the process exited and its pipes closed; never rejects. */
  readonly closed: Promise<ProcessExit>;
  /** SIGTERM to the whole group, SIGKILL shortly after if it still runs. Safe to call more than once. */
  stop(): void;
}

/** How a subprocess ended. */
export type ProcessExit =
  | { kind: 'exited'; code: number | null; signal: NodeJS.Signals | null }
  | { kind: 'spawn-failed'; error: NodeJS.ErrnoException };

export function spawnProcessGroup(
  command: string,
  args: string[],
  options: { cwd?: string; environment: Record<string, string> },
): ProcessGroup {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.environment,
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  // Stopped by the group reaper's watchdog if this process dies first (see group-reaper.ts).
  const pgid = child.pid;
  if (pgid !== undefined) watchGroup(pgid);
  let exited = false;
  let killTimer: NodeJS.Timeout | undefined;
  const closed = new Promise<ProcessExit>((resolve) => {
    child.once('error', (error: NodeJS.ErrnoException) => {
      // `error` without a pid means the process never started (ENOENT, EACCES).
      if (child.pid === undefined) resolve({ kind: 'spawn-failed', error });
    });
    child.once('exit', () => {
      exited = true;
    });
    child.once('close', (code, signal) => {
      exited = true;
      if (pgid !== undefined) forgetGroup(pgid);
      if (killTimer) clearTimeout(killTimer);
      resolve({ kind: 'exited', code, signal });
    });
  });
  // A process that never reads stdin closes it early; the write then fails with EPIPE, which is not ours to report.
  child.stdin.on('error', () => {});
  const signalGroup = (signal: NodeJS.Signals) => {
    if (child.pid === undefined) return;
    try {
      process.kill(-child.pid, signal);
    } catch {
      // The group is already gone.
    }
  };
  return {
    child,
    closed,
    stop: () => {
      if (killTimer || child.pid === undefined) return;
      signalGroup('SIGTERM');
      // Even after the leader exited, its children may still hold the pipes open: kill the group regardless.
      killTimer = setTimeout(() => signalGroup('SIGKILL'), exited ? 0 : killGraceMs);
      killTimer.unref();
    },
  };
}
