import type { Logger } from './logger.js';

/**
 * The variable the platform launcher (scripts/platform.ts) sets on the services it starts: their stdin
 * is a pipe from it, and its end means the launcher is gone (the kernel closes the pipe however it
 * ended, SIGKILL included), so the service shuts down as on SIGTERM instead of running on unowned.
 */
export const STOP_WITH_LAUNCHER_VARIABLE = 'ACTOR_STOP_WITH_LAUNCHER';

/**
 * Runs the given steps in order on SIGINT or SIGTERM (once), then exits. A second signal exits at
 * once, for an operator who does not want to wait for the drain. Started by the platform launcher
 * (STOP_WITH_LAUNCHER_VARIABLE=1), the end of stdin counts as SIGTERM.
 */
export function onShutdown(logger: Logger, steps: Array<() => Promise<unknown> | unknown>): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    for (const step of steps) {
      try {
        await step();
      } catch (error) {
        logger.error({ err: error }, 'shutdown step failed');
      }
    }
    process.exit(0);
  };
  process.on('SIGINT', (signal) => void stop(signal));
  process.on('SIGTERM', (signal) => void stop(signal));
  if (process.env[STOP_WITH_LAUNCHER_VARIABLE] === '1') {
    // `end` and `close` both come: one stop, or the second would count as an impatient second signal.
    let gone = false;
    const launcherGone = () => {
      if (gone) return;
      gone = true;
      void stop('launcher gone (stdin closed)');
    };
    process.stdin.once('end', launcherGone);
    process.stdin.once('close', launcherGone);
    process.stdin.once('error', launcherGone);
    // Nothing is ever sent on it; reading is what makes its end visible.
    process.stdin.resume();
  }
}

/** Logs a start-up failure (a ConfigError lists every problem) and exits non-zero. */
export function exitOnStartFailure(logger: Logger, error: unknown): never {
  if (error instanceof Error && error.name === 'ConfigError') {
    logger.fatal(error.message);
  } else {
    logger.fatal({ err: error }, 'start-up failed');
  }
  process.exit(1);
}

/** Resolves after `ms`, or rejects early when the signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
