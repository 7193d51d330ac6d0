import { pino, type Logger } from 'pino';

export type { Logger };

/** One JSON logger per process, tagged with the service name. */
export function createLogger(service: string, level: string = 'info'): Logger {
  return pino({ name: service, level, base: { service } });
}
