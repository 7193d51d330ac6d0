import type { Logger } from './logger.js';

/**
 * Runs the given steps in order on SIGINT or SIGTERM (once), then exits. A second signal exits at
 * once, for an operator who does not want to wait for the drain.
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
