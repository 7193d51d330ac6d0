/** Why a run was stopped from outside: the caller (signal or `cancel`) or its time limit. */
export type StopReason = 'cancelled' | 'timeout';

/** One running call: a signal that fires on cancel or timeout, and why it fired. */
export interface Run {
  /** Aborts when the caller's signal aborts, `cancel(executionId)` is called, or the time limit passes. */
  readonly signal: AbortSignal;
  /** Why the run was stopped, or undefined while it was not. */
  stopReason(): StopReason | undefined;
  /** Clears the timer and forgets the run; call once the call has ended, whatever the outcome. */
  finish(): void;
}

/**
 * The runs of one Agent instance by execution id, so that `cancel(executionId)`, the caller's
 * AbortSignal and the time limit all stop a run the same way.
 */
export class RunRegistry {
  private readonly runs = new Map<string, Set<(reason: StopReason) => void>>();

  start(executionId: string, callerSignal: AbortSignal, timeoutMs: number): Run {
    const controller = new AbortController();
    let reason: StopReason | undefined;
    const stop = (why: StopReason) => {
      if (reason) return;
      reason = why;
      controller.abort(new Error(why === 'timeout' ? `timed out after ${timeoutMs} ms` : 'cancelled by the caller'));
    };
    const onCallerAbort = () => stop('cancelled');
    callerSignal.addEventListener('abort', onCallerAbort, { once: true });
    const timer = setTimeout(() => stop('timeout'), timeoutMs);
    const stoppers = this.runs.get(executionId) ?? new Set();
    stoppers.add(stop);
    this.runs.set(executionId, stoppers);
    if (callerSignal.aborted) stop('cancelled');
    return {
      signal: controller.signal,
      stopReason: () => reason,
      finish: () => {
        clearTimeout(timer);
        callerSignal.removeEventListener('abort', onCallerAbort);
        stoppers.delete(stop);
        if (stoppers.size === 0 && this.runs.get(executionId) === stoppers) this.runs.delete(executionId);
      },
    };
  }

  /** Stops every run started with this execution id; unknown ids are ignored (the run may have ended). */
  cancel(executionId: string): void {
    for (const stop of this.runs.get(executionId) ?? []) stop('cancelled');
  }
}

/** The error message of a stopped run, for `AgentResult.errorMessage`. */
export function stopMessage(reason: StopReason, timeoutMs: number): string {
  return reason === 'timeout' ? `the run timed out after ${timeoutMs} ms` : 'the run was cancelled by the caller';
}

/** Waits `ms`, or less when the signal aborts first; never rejects. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const onAbort = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
