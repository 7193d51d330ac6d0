import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * One JSON logger per process, tagged with the service name, writing to stdout synchronously.
 * Synchronous because pino's default (asynchronous) stdout flushes what it still holds when the
 * process exits, and that flush retries a write to a broken pipe forever: a service whose launcher
 * died (its stdout a pipe to nobody) spun at full CPU on exit instead of exiting. A synchronous
 * write that meets a broken pipe fails once, and pino then stops logging.
 */
export function createLogger(service: string, level: string = 'info'): Logger {
  return pino({ name: service, level, base: { service } }, pino.destination({ dest: 1, sync: true }));
}
