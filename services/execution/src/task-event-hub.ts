import { EventEmitter } from 'node:events';

/**
 * Wakes WatchTask streams of this process when their task gets a new event. It is only a hint:
 * watchers also poll the database, so events written by another replica arrive too (a little later).
 */
export class TaskEventHub {
  private readonly emitter = new EventEmitter();

  constructor() {
    this.emitter.setMaxListeners(0);
  }

  publish(taskId: string): void {
    this.emitter.emit(taskId);
  }

  /** Resolves on the next event of the task, after `timeoutMs`, or when the signal aborts. */
  next(taskId: string, timeoutMs: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.emitter.off(taskId, done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.emitter.once(taskId, done);
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
