import {
  formatUsd,
  runTask,
  type AgentsPort,
  type BillingPort,
  type EngineOptions,
  type EngineTask,
  type MemoryPort,
  type Mode,
  type PlacementPort,
  type PoolPort,
  type WorkspacePort,
} from '@actor/engine';
import { newId, sleep, type Logger } from '@actor/kit';
import type { TaskRepository, TaskRow } from '../db/task-repository.js';
import { TaskTracePort } from '../ports/task-trace-port.js';
import type { TaskEventHub } from '../task-event-hub.js';

/**
 * Gives back what an earlier run of a task still holds in billing and the pool. A run whose process
 * died cannot release its reservations and leases; the run that resumes the task (it holds the
 * claim now, so the dead run can no longer act) releases them before it starts.
 */
export interface RunLeftovers {
  releaseTaskReservations(projectId: string, taskId: string): Promise<{ count: number; amountMicroUsd: number }>;
  releaseWorkLeases(projectId: string, workId: string): Promise<number>;
}

export interface TaskWorkerOptions {
  repository: TaskRepository;
  hub: TaskEventHub;
  placement: PlacementPort;
  billing: BillingPort;
  pool: PoolPort;
  agents: AgentsPort;
  /** Working copies for tasks that name a workspace and a test command or postconditions; also reads the files a task names. */
  workspace?: WorkspacePort;
  /** What earlier tasks of the project taught, for the engine's enhance step. */
  memory?: MemoryPort;
  leftovers: RunLeftovers;
  logger: Logger;
  /** Identifies this worker's claims; unique per process. */
  workerId: string;
  /** Tasks run at once by this process. */
  concurrency: number;
  /** A claim lapses this long after its last renewal; another replica then resumes the task. */
  claimTtlMs: number;
  /** How often idle loops look for work written by other replicas. */
  pollIntervalMs: number;
  /**
   * While tasks run, this process reads their cancel flags this often, in one query for all of them,
   * so a cancel received by another replica stops the adapter here within about this long.
   */
  cancelPollMs: number;
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
  private cancelPoll: NodeJS.Timeout | undefined;
  private cancelPollBusy = false;

  constructor(private readonly options: TaskWorkerOptions) {}

  start(): void {
    for (let index = 0; index < this.options.concurrency; index += 1) this.loops.push(this.loop());
    this.cancelPoll = setInterval(() => void this.pollCancels(), this.options.cancelPollMs);
    this.cancelPoll.unref();
  }

  /** Aborts the running tasks whose cancel was recorded, wherever the CancelTask call arrived. */
  private async pollCancels(): Promise<void> {
    if (this.cancelPollBusy || this.running.size === 0) return;
    this.cancelPollBusy = true;
    try {
      for (const taskId of await this.options.repository.cancelRequested([...this.running.keys()])) {
        this.abort(taskId);
      }
    } catch (error) {
      this.options.logger.warn({ err: error }, 'reading cancel requests failed');
    } finally {
      this.cancelPollBusy = false;
    }
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
    clearInterval(this.cancelPoll);
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
      // What earlier runs settled is part of the task's cost; the engine counts only this run's.
      let priorCostMicroUsd = 0;
      if (task.runs > 1) {
        try {
          priorCostMicroUsd = await this.releaseLeftovers(task);
        } catch (error) {
          // A task that is given up on must still end, even while billing or the pool is down.
          if (task.runs <= this.options.maxRuns) throw error;
          log.warn({ err: error }, 'releasing what earlier runs held failed; they expire on their own');
        }
      }
      if (task.runs > this.options.maxRuns) {
        await this.finish(task.id, {
          state: 'failed',
          errorCode: 'actor.backend.failed',
          errorMessage: `gave up after ${task.runs - 1} interrupted runs; see the service logs`,
          costMicroUsd: priorCostMicroUsd,
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
          // Only a task that names a workspace gets working copies; one with a test command alone is judged as before.
          workspace: task.workspace ? this.options.workspace : undefined,
          memory: this.options.memory,
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
        // A cancel that aborts a waiting Acquire can cross the pool granting it: the lease exists
        // but this run never learned of it. Give back whatever the pool still holds for the task.
        await this.options.leftovers
          .releaseWorkLeases(task.projectId, task.id)
          .catch((error: unknown) => log.warn({ err: error }, 'releasing leases after a cancel failed; they expire on their own'));
      }
      if (outcome.state === 'cancelled') {
        const current = await repository.get(task.id);
        await this.finish(task.id, {
          state: 'cancelled',
          errorCode: 'actor.cancelled',
          errorMessage: current?.cancelRequestedBy
            ? `cancelled by ${current.cancelRequestedBy}`
            : outcome.message,
          costMicroUsd: priorCostMicroUsd + outcome.costMicroUsd,
        });
      } else if (outcome.state === 'succeeded') {
        await this.finish(task.id, {
          state: 'succeeded',
          result: outcome.result,
          costMicroUsd: priorCostMicroUsd + outcome.costMicroUsd,
        });
      } else {
        await this.finish(task.id, {
          state: 'failed',
          errorCode: outcome.code,
          errorMessage: outcome.message,
          costMicroUsd: priorCostMicroUsd + outcome.costMicroUsd,
        });
      }
    } catch (error) {
      // A peer was unreachable mid-run. The claim lapses and the task is retried from the top, its
      // earlier attempts kept; the run that resumes it releases what this one still holds.
      log.error({ err: error }, 'task run interrupted; it will be retried when its claim lapses');
    } finally {
      clearInterval(renewal);
      this.running.delete(task.id);
    }
  }

  /**
   * Before a resumed run: frees the dead run's reservations and leases, closes its unfinished
   * attempts, and says so in the explanation. Resolves with what earlier runs settled, in micro-USD.
   */
  private async releaseLeftovers(task: TaskRow): Promise<number> {
    const { leftovers, repository } = this.options;
    const reservations = await leftovers.releaseTaskReservations(task.projectId, task.id);
    const leases = await leftovers.releaseWorkLeases(task.projectId, task.id);
    const interrupted = await repository.interruptAttempts(
      task.id,
      'interrupted: the execution process running it stopped; its unsettled spend was released, not billed',
    );
    const { taskMicroUsd: settledMicroUsd } = await this.options.billing.spend(task.projectId, task.id);
    const parts = [
      interrupted.length > 0
        ? `${interrupted.length === 1 ? 'attempt' : 'attempts'} ${interrupted.join(', ')} ${interrupted.length === 1 ? 'was' : 'were'} interrupted`
        : 'no attempt was in progress',
      `${reservations.count} reservation${reservations.count === 1 ? '' : 's'} (${formatUsd(reservations.amountMicroUsd)}) and ${leases} lease${leases === 1 ? '' : 's'} it held were released`,
      `${formatUsd(settledMicroUsd)} it had settled stays billed once`,
    ];
    await repository.appendExplanation({
      taskId: task.id,
      step: 'evaluate',
      attempt: 0,
      message: `Run ${task.runs} resumes the task after the previous run stopped (its claim lapsed): ${parts.join('; ')}.`,
      backend: null,
      decisionId: null,
      detail: {
        run: task.runs,
        interruptedAttempts: interrupted,
        releasedReservations: reservations.count,
        releasedMicroUsd: reservations.amountMicroUsd,
        releasedLeases: leases,
        settledBeforeMicroUsd: settledMicroUsd,
      },
    });
    return settledMicroUsd;
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
    workspace: (task.workspace as { repo: string; ref: string } | null) ?? undefined,
  };
}
