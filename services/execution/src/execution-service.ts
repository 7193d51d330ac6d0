import { Status, type CallContext } from 'nice-grpc';
import { estimateTokens, fail, newId, remoteError, worstCaseCost, type ActorClient, type Logger } from '@actor/kit';
import { PortRefusal, type AgentResult, type AgentsPort, type BillingPort } from '@actor/engine';
import type { ExecutionServiceImplementation } from '@actor/proto/execution';
import type { PoolServiceDefinition } from '@actor/proto/pool';
import type { RegistryServiceDefinition } from '@actor/proto/registry';
import type { TaskRepository, TaskState } from './db/task-repository.js';
import { validateTaskInput, type TaskDefaults } from './domain/task-input.js';
import { encodeEvent, encodeTask, stateFromProto } from './task-encoding.js';
import type { TaskEventHub } from './task-event-hub.js';
import type { GitWorkspacePort } from './ports/git-workspace-port.js';
import type { TaskWorker } from './worker/task-worker.js';
import { webhookUrlProblem } from './webhooks/webhook-address-guard.js';

export interface ExecutionServiceDependencies {
  repository: TaskRepository;
  hub: TaskEventHub;
  worker: TaskWorker;
  pool: ActorClient<typeof PoolServiceDefinition>;
  /** Reads the adapter's limits and rate card for Execute's worst case. */
  registry: ActorClient<typeof RegistryServiceDefinition>;
  billing: BillingPort;
  agents: AgentsPort;
  /** Checks a task's workspace (a local git work tree and a ref that resolves). */
  workspace: Pick<GitWorkspacePort, 'problem'>;
  /** Hosts exempt from the webhook SSRF guard (`ACTOR_WEBHOOK_ALLOW_HOSTS`); default none. */
  webhookAllowHosts?: readonly string[];
  defaults: TaskDefaults;
  logger: Logger;
  /** Ends open WatchTask streams at shutdown. */
  shutdownSignal: AbortSignal;
  /** How often a watcher re-reads the database for events written by other replicas. */
  watchPollMs: number;
}

const defaultExecuteTimeoutMs = 120_000;

/** The ExecutionService: decode, validate, store or read, encode. The pipeline runs in the worker. */
export function createExecutionService(deps: ExecutionServiceDependencies): ExecutionServiceImplementation {
  const { repository, hub, worker } = deps;

  async function taskWithDetails(taskId: string, projectId: string) {
    const row = await repository.get(taskId, projectId);
    if (!row) throw fail.notFound(`no task "${taskId}" in this project`, 'actor.task.not_found');
    return encodeTask(row, await repository.details(row.id));
  }

  return {
    async createTask(request) {
      const valid = validateTaskInput(request, deps.defaults);
      // A URL that is internal as written is refused now; one whose name resolves inside is refused at delivery.
      const refused = request.webhooks
        .map((webhook) => webhookUrlProblem(webhook.url, deps.webhookAllowHosts ?? []))
        .filter((problem): problem is string => problem !== undefined);
      if (refused.length > 0) throw fail.invalid(refused.join('; '));
      if (request.workspace?.repo) {
        const problem = await deps.workspace.problem(request.workspace.repo, request.workspace.ref);
        if (problem) throw fail.invalid(problem);
      }
      if (request.agentId) {
        const known = await deps.pool.getAgent({ id: request.agentId }).catch((error: unknown) => {
          if (remoteError(error)?.code === 'actor.not_found' || remoteError(error)?.status === 5) return undefined;
          throw error;
        });
        if (!known) throw fail.invalid(`agent_id "${request.agentId}" names no agent in the pool`);
      }
      const { task, replayed } = await repository.create({
        id: newId('tsk'),
        projectId: request.projectId,
        requestId: request.requestId || null,
        state: 'queued',
        input: request.input,
        mode: valid.mode,
        perTaskMicroUsd: valid.perTaskMicroUsd,
        perDayMicroUsd: valid.perDayMicroUsd,
        agentId: request.agentId || null,
        backends: request.backends,
        capabilities: request.capabilities,
        workspace: request.workspace?.repo ? request.workspace : null,
        verify: valid.verify,
        webhooks: request.webhooks.map((webhook) => ({
          url: webhook.url,
          secretRef: webhook.secretRef,
          events: webhook.events,
        })),
        attachments: request.attachments.map((attachment) => ({
          name: attachment.name,
          mediaType: attachment.mediaType,
          dataBase64: attachment.dataBase64,
          url: attachment.url,
        })),
      });
      if (!replayed) worker.wake();
      return { task: encodeTask(task, await repository.details(task.id)), replayed };
    },

    async getTask(request) {
      return { task: await taskWithDetails(request.taskId, request.projectId) };
    },

    async listTasks(request) {
      const pageSize = Math.min(Math.max(request.pageSize || 50, 1), 200);
      const state = request.state ? (stateFromProto(request.state) as TaskState | undefined) : undefined;
      const rows = await repository.list(request.projectId, pageSize + 1, request.pageToken || undefined, state);
      const page = rows.slice(0, pageSize);
      return {
        tasks: page.map((row) => encodeTask(row)),
        nextPageToken: rows.length > pageSize ? page[page.length - 1]!.id : '',
      };
    },

    async cancelTask(request) {
      const { task, events } = await repository.requestCancel(
        request.taskId,
        request.projectId,
        request.requestedBy || 'unknown caller',
      );
      if (!task) throw fail.notFound(`no task "${request.taskId}" in this project`, 'actor.task.not_found');
      if (events.length > 0) hub.publish(task.id);
      // A task running in this process stops now; one running on another replica sees the flag at
      // that replica's next cancel poll (EXECUTION_CANCEL_POLL_MS).
      worker.abort(task.id);
      return { task: await taskWithDetails(task.id, request.projectId) };
    },

    async *watchTask(request, context: CallContext) {
      const task = await repository.get(request.taskId, request.projectId);
      if (!task) throw fail.notFound(`no task "${request.taskId}" in this project`, 'actor.task.not_found');
      const stop = AbortSignal.any([context.signal, deps.shutdownSignal]);
      let afterSeq = Math.max(0, request.afterSeq);
      while (!stop.aborted) {
        // Subscribe before reading so an event written between the read and the wait is not missed.
        const nextEvent = hub.next(task.id, deps.watchPollMs, stop);
        const events = await repository.eventsAfter(task.id, afterSeq);
        for (const event of events) {
          yield { event: encodeEvent(event) };
          afterSeq = event.seq;
          if (event.kind === 'end') return;
        }
        if (events.length === 0) await nextEvent;
      }
    },

    async execute(request, context: CallContext) {
      if (!request.backend) throw fail.invalid('backend is required');
      if (!request.prompt.trim()) throw fail.invalid('prompt is required');
      let jsonSchema: Record<string, unknown> | undefined;
      if (request.jsonSchema) {
        try {
          jsonSchema = JSON.parse(request.jsonSchema) as Record<string, unknown>;
        } catch {
          throw fail.invalid('json_schema is not valid JSON');
        }
      }
      const executionId = newId('att');
      const adapter = await deps.registry.getAdapter({ type: request.backend }).then(
        (answer) => answer.adapter,
        (error: unknown) => {
          if (remoteError(error)?.status === Status.NOT_FOUND) return undefined;
          throw error;
        },
      );
      if (!adapter) throw fail.invalid(`backend "${request.backend}" is not registered`, 'actor.no_capable_backend');
      const rateCard = adapter.rateCard;
      if (!rateCard) throw fail.precondition(`backend "${request.backend}" has no rate card`, 'actor.no_capable_backend');
      // The caller's time limit and the adapter's declared one: the stricter wins.
      const declaredTimeoutMs = adapter.limits?.timeoutMs || defaultExecuteTimeoutMs;
      const timeoutMs = Math.min(request.timeoutMs > 0 ? request.timeoutMs : defaultExecuteTimeoutMs, declaredTimeoutMs);
      // Direct calls are billed like any work: the worst case (the declared output limit, the prompt,
      // the whole time limit) is held against the project's day first, then the real usage settled.
      const worstCaseMicroUsd = worstCaseCost(
        rateCard,
        { maxOutputTokens: adapter.limits?.maxOutputTokens ?? 0, timeoutMs },
        estimateTokens(`${request.systemPrompt}${request.prompt}${request.jsonSchema}`),
      );
      const reference = request.requestId || executionId;
      let reservation: Awaited<ReturnType<BillingPort['reserve']>>;
      try {
        reservation = await deps.billing.reserve({
          requestId: `${request.projectId}:${reference}:execute`,
          projectId: request.projectId,
          taskId: `direct:${reference}`,
          attemptId: executionId,
          amountMicroUsd: worstCaseMicroUsd,
          perTaskLimitMicroUsd: 0,
          perDayLimitMicroUsd: deps.defaults.perDayMicroUsd,
        });
      } catch (error) {
        if (error instanceof PortRefusal) throw fail.budgetExceeded(error.message);
        throw error;
      }
      const agentRequest = {
        prompt: request.prompt,
        systemPrompt: request.systemPrompt || undefined,
        timeoutMs,
        maxBudgetMicroUsd: worstCaseMicroUsd,
        executionId,
        projectId: request.projectId,
      };
      let result: AgentResult;
      try {
        result = jsonSchema
          ? await deps.agents.executeWithSchema(request.backend, agentRequest, jsonSchema, context.signal)
          : await deps.agents.execute(request.backend, agentRequest, context.signal, () => undefined);
      } catch (error) {
        // Nothing ran to completion that could be priced: the hold goes back whole.
        await deps.billing.release(reservation.reservationId).catch(() => undefined);
        if (error instanceof PortRefusal) throw fail.invalid(error.message, 'actor.no_capable_backend');
        throw error;
      }
      const { costMicroUsd } = await deps.billing.settle({
        reservationId: reservation.reservationId,
        backend: request.backend,
        rateCardRevision: rateCard.revision,
        usage: {
          inputTokens: result.inputTokens,
          outputTokens: result.outputTokens,
          durationMs: Math.round(result.durationMs),
          calls: 1,
        },
        reportedCostMicroUsd: result.reportedCostMicroUsd,
        producedOutput: result.output.length > 0,
      });
      if (!result.success) {
        throw fail.unavailable(result.errorMessage ?? 'the backend failed', 'actor.backend.failed');
      }
      return {
        output: result.output,
        structuredJson: result.structured === undefined ? '' : JSON.stringify(result.structured),
        backend: request.backend,
        inputTokens: result.inputTokens,
        outputTokens: result.outputTokens,
        costMicroUsd,
      };
    },
  };
}
