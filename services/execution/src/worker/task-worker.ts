import {
  runTask,
  type AgentsPort,
  type BillingPort,
  type EngineOptions,
  type EngineTask,
  type Mode,
  type PlacementPort,
  type PoolPort,
} from '@actor/engine';
import { newId, sleep, type Logger } from '@actor/kit';
import type { TaskRepository, TaskRow } from '../db/task-repository.js';
import { TaskTracePort } from '../ports/task-trace-port.js';
import type { TaskEventHub } from '../task-event-hub.js';

export interface TaskWorkerOptions {
  repository: TaskRepository;
  hub: TaskEventHub;
  placement: PlacementPort;
  billing: BillingPort;
  pool: PoolPort;
  agents: AgentsPort;
  logger: Logger;
  /** Identifies this worker's claims; unique per process. */
  workerId: string;
  /** Tasks run at once by this process. */
  concurrency: number;
  /** A claim lapses this long after its last renewal; another replica then resumes the task. */
  claimTtlMs: number;
  /** How often idle loops look for work written by other replicas. */
  pollIntervalMs: number;
  /** A task whose runs keep crashing (a peer down for good) fails after this many runs. */
  maxRuns: number;
  engine: EngineOptions;
}

/**
 * Claims queued tasks (or tasks whose worker died) and runs the engine on them with this service's
 * ports. Claims are database rows with a TTL, renewed while the task runs, so tasks survive the death
 * of the process that held them.
 */
export class TaskWorker {
  private readonly running = new Map<string, AbortController>();
  private stopped = false;
  private wakeUp: (() => void) | undefined;
  private loops: Promise<void>[] = [];

  constructor(private readonly options: TaskWorkerOptions) {}

  start(): void {
    for (let index = 0; index < this.options.concurrency; index += 1) this.loops.push(this.loop());
  }

  /** A new task was stored by this process: look now instead of at the next poll. */
  wake(): void {
    this.wakeUp?.();
  }

  /** Stops a task this process is running (cancel); false when it runs elsewhere or not at all. */
  abort(taskId: string): boolean {
    const controller = this.running.get(taskId);
    if (!controller) return false;
    controller.abort(new Error('cancel requested'));
    return true;
  }

  /**
   * Stops claiming and waits up to `graceMs` for running tasks; what is still running then is
   * aborted without a terminal write, so its claim lapses and another replica resumes it.
   */
  async stop(graceMs = 5_000): Promise<void> {
    this.stopped = true;
    this.wakeUp?.();
    const finished = Promise.all(this.loops);
    const timedOut = await Promise.race([finished.then(() => false), sleep(graceMs).then(() => true)]);
    if (timedOut) {
      for (const controller of this.running.values()) controller.abort(new Error('shutdown'));
      await finished;
    }
  }

  private async idle(): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, this.options.pollIntervalMs);
      const previous = this.wakeUp;
      function done() {
        clearTimeout(timer);
        resolve();
      }
      // Every idle loop wakes on the same signal: chain the callbacks.
      this.wakeUp = () => {
        previous?.();
        done();
      };
    });
    this.wakeUp = undefined;
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      let task: TaskRow | undefined;
      try {
        task = await this.options.repository.claimNext(this.options.workerId, this.options.claimTtlMs);
      } catch (error) {
        this.options.logger.warn({ err: error }, 'claiming a task failed');
      }
      if (!task) {
        await this.idle();
        continue;
      }
      await this.run(task);
    }
  }

  private async run(task: TaskRow): Promise<void> {
    const { repository, hub, logger } = this.options;
    const log = logger.child({ taskId: task.id });
    const controller = new AbortController();
    this.running.set(task.id, controller);
    let claimLost = false;
    const renewal = setInterval(() => {
      repository
        .renewClaim(task.id, this.options.workerId, this.options.claimTtlMs)
        .then((claim) => {
          if (!claim) {
            claimLost = true;
            controller.abort(new Error('claim lost'));
          } else if (claim.cancelRequested) {
            controller.abort(new Error('cancel requested'));
          }
        })
        .catch((error: unknown) => log.warn({ err: error }, 'renewing the claim failed'));
    }, Math.max(200, Math.floor(this.options.claimTtlMs / 3)));
    try {
      if (task.cancelRequestedAt) controller.abort(new Error('cancel requested'));
      if (task.runs > this.options.maxRuns) {
        await this.finish(task.id, {
          state: 'failed',
          errorCode: 'actor.backend.failed',
          errorMessage: `gave up after ${task.runs - 1} interrupted runs; see the service logs`,
          costMicroUsd: task.costMicroUsd,
        });
        return;
      }
      const attemptOffset = await repository.attemptCount(task.id);
      const outcome = await runTask(
        toEngineTask(task),
        {
          placement: this.options.placement,
          billing: this.options.billing,
          pool: this.options.pool,
          agents: this.options.agents,
          trace: new TaskTracePort(repository, hub, task.id, attemptOffset),
          newAttemptId: () => newId('att'),
        },
        controller.signal,
        // Request ids of a resumed run must differ from the dead run's, or it would pick up that
        // run's reservations and leases.
        { ...this.options.engine, attemptOffset },
      );
      if (claimLost) {
        log.warn('claim lost while running; another worker owns the task now');
        return;
      }
      if (outcome.state === 'cancelled') {
        const current = await repository.get(task.id);
        await this.finish(task.id, {
          state: 'cancelled',
          errorCode: 'actor.cancelled',
          errorMessage: current?.cancelRequestedBy
            ? `cancelled by ${current.cancelRequestedBy}`
            : outcome.message,
          costMicroUsd: outcome.costMicroUsd,
        });
      } else if (outcome.state === 'succeeded') {
        await this.finish(task.id, { state: 'succeeded', result: outcome.result, costMicroUsd: outcome.costMicroUsd });
      } else {
        await this.finish(task.id, {
          state: 'failed',
          errorCode: outcome.code,
          errorMessage: outcome.message,
          costMicroUsd: outcome.costMicroUsd,
        });
      }
    } catch (error) {
      // A peer was unreachable mid-run. The claim lapses and the task is retried from the top, its
      // earlier attempts kept; reservations and leases of this run expire in billing and the pool.
      log.error({ err: error }, 'task run interrupted; it will be retried when its claim lapses');
    } finally {
      clearInterval(renewal);
      this.running.delete(task.id);
    }
  }

  private async finish(taskId: string, finish: Parameters<TaskRepository['finish']>[1]): Promise<void> {
    await this.options.repository.finish(taskId, finish);
    this.options.hub.publish(taskId);
  }
}

function toEngineTask(task: TaskRow): EngineTask {
  return {
    id: task.id,
    projectId: task.projectId,
    input: task.input,
    mode: task.mode as Mode,
    budget: { perTaskMicroUsd: task.perTaskMicroUsd, perDayMicroUsd: task.perDayMicroUsd },
    agentId: task.agentId ?? undefined,
    backends: task.backends,
    capabilities: task.capabilities,
    attachmentMediaTypes: task.attachments.map((attachment) => attachment.mediaType),
    verify: task.verify,
  };
}
