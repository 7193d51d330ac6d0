import { z } from 'zod';
import { costJson, usdToMicro } from '@actor/kit';
import {
  CitationStyle,
  TaskState,
  type Attempt,
  type CreateTaskRequest,
  type ExplanationEntry,
  type Task,
} from '@actor/proto/execution';
import { idempotencyKey } from '../idempotency-key.js';
import { problems } from '../problem.js';
import { parseWith, readJsonBody } from '../request-body.js';
import type { Route, RouteContext } from '../router.js';
import { sendJson } from '../send-json.js';

export const taskModes = ['cheapest', 'balanced', 'best', 'fastest', 'private'] as const;

const shortText = z.string().min(1).max(200);

/** A budget in dollars: at least one micro-dollar (so it cannot round to 0, "the default"), at most $1M. */
/**
 * A webhook URL: any absolute http(s) URL. Not zod's `httpUrl`, whose host pattern refuses IP literals and
 * single-label names; which addresses are allowed is the execution service's SSRF guard's call (it refuses
 * internal ones unless ACTOR_WEBHOOK_ALLOW_HOSTS names them) and it answers with the reason.
 */
const webhookUrl = z
  .string()
  .max(2_000)
  .refine((value) => {
    try {
      const url = new URL(value);
      return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
    } catch {
      return false;
    }
  }, 'must be an absolute http or https URL');

const usdAmount = z
  .number()
  .positive()
  .max(1_000_000)
  .refine((usd) => usdToMicro(usd) >= 1, 'must be at least 0.000001 (one micro-dollar)');

function compiles(pattern: string): boolean {
  try {
    new RegExp(pattern, 'gm');
    return true;
  } catch {
    return false;
  }
}

/**
 * `verify.citations`: citations the answer must carry, checked before any judge.
 * - `style`: `url` (a distinct http(s) URL), `numbered` (a marker `[n]` in the text with its entry, a
 *   line starting with `[n]`) or `regex` (a distinct match of `pattern`).
 * - `pattern`: for `regex` only, a JavaScript regular expression (flags `gm`), 1..500 characters.
 * - `min`: how many distinct citations at least, 1..1000, default 1.
 */
const citationsSchema = z
  .strictObject({
    style: z.enum(['url', 'numbered', 'regex']),
    pattern: z.string().min(1).max(500).refine(compiles, 'must be a regular expression').optional(),
    min: z.number().int().min(1).max(1_000).default(1),
  })
  .refine((citations) => (citations.style === 'regex') === (citations.pattern !== undefined), {
    message: 'pattern is required for style regex and only allowed there',
    path: ['pattern'],
  });

const citationStyles = { url: CitationStyle.CITATION_STYLE_URL, numbered: CitationStyle.CITATION_STYLE_NUMBERED, regex: CitationStyle.CITATION_STYLE_REGEX };

/**
 * The body of POST /v1/tasks. Every object is strict: an unknown (say, misspelt) field is a 400,
 * never silently ignored.
 * - `task`: the task text, 1..100 000 characters. Required.
 * - `mode`: `cheapest` | `balanced` (default) | `best` | `fastest` | `private`.
 * - `budget`: `per_task_usd` (most the task may spend) and `per_day_usd` (most the project may spend
 *   this UTC day), positive dollars; absent means the platform default.
 * - `webhooks`: up to 10 of `{url (http/https), secret_ref (the project secret that signs), events}`;
 *   `events` from `task.queued` ... `task.cancelled` or `task.*`; empty means the terminal ones.
 * - `agent_id`: an explicitly assigned pool agent. `backends`: the only adapter types allowed.
 * - `workspace`: `{repo, ref?}` where code tasks run.
 * - `verify`: `{judge?, test_command?, citations?, postconditions?, check_timeout_ms?}`: `citations` as
 *   in `citationsSchema`; `postconditions` up to 16 shell commands that must each exit 0 in the
 *   attempt's working copy (they need `workspace`); `check_timeout_ms` lowers the service's time limit
 *   of each command. The task's own checks run before the judge; one failing rejects the attempt.
 * - `capabilities`: features the backend must have (`vision`, `tools`).
 * - `attachments`: `{name, media_type, data_base64 | url}`, exactly one of the last two.
 */
export const createTaskBodySchema = z.strictObject({
  task: z.string().min(1).max(100_000),
  mode: z.enum(taskModes).default('balanced'),
  budget: z
    .strictObject({
      per_task_usd: usdAmount.optional(),
      per_day_usd: usdAmount.optional(),
    })
    .optional(),
  webhooks: z
    .array(
      z.strictObject({
        url: webhookUrl,
        secret_ref: shortText,
        events: z.array(shortText).max(20).default([]),
      }),
    )
    .max(10)
    .default([]),
  agent_id: shortText.optional(),
  backends: z.array(shortText).max(50).default([]),
  workspace: z.strictObject({ repo: z.string().min(1).max(4_000), ref: z.string().max(200).default('') }).optional(),
  verify: z
    .strictObject({
      judge: z.boolean().optional(),
      test_command: z.string().min(1).max(4_000).optional(),
      citations: citationsSchema.optional(),
      postconditions: z.array(z.string().trim().min(1).max(4_000)).min(1).max(16).optional(),
      check_timeout_ms: z.number().int().min(1).max(86_400_000).optional(),
    })
    .refine((verify) => verify.check_timeout_ms === undefined || verify.test_command !== undefined || verify.postconditions !== undefined, {
      message: 'check_timeout_ms limits the test command and postconditions, and the task has neither',
      path: ['check_timeout_ms'],
    })
    .optional(),
  capabilities: z.array(shortText).max(50).default([]),
  attachments: z
    .array(
      z
        .strictObject({
          name: shortText,
          media_type: z.string().regex(/^[\w.+-]+\/[\w.+-]+$/, 'must be a media type such as image/png'),
          data_base64: z.base64().optional(),
          url: z.httpUrl().max(2_000).optional(),
        })
        .refine((attachment) => (attachment.data_base64 === undefined) !== (attachment.url === undefined), {
          message: 'give exactly one of data_base64 and url',
        }),
    )
    .max(20)
    .default([]),
})
  // Postconditions run in a working copy of the workspace: without one there is nowhere honest to run them.
  .refine((body) => body.verify?.postconditions === undefined || body.workspace !== undefined, {
    message: 'postconditions need a workspace: they run in a working copy of workspace.repo',
    path: ['verify', 'postconditions'],
  });

export type CreateTaskBody = z.infer<typeof createTaskBodySchema>;


/** The CreateTask request a validated body becomes, for the token's project. */
export function createTaskRequest(body: CreateTaskBody, projectId: string, requestId: string): CreateTaskRequest {
  return {
    requestId,
    projectId,
    input: body.task,
    mode: body.mode,
    budget: {
      perTaskMicroUsd: body.budget?.per_task_usd === undefined ? 0 : usdToMicro(body.budget.per_task_usd),
      perDayMicroUsd: body.budget?.per_day_usd === undefined ? 0 : usdToMicro(body.budget.per_day_usd),
    },
    webhooks: body.webhooks.map((webhook) => ({ url: webhook.url, secretRef: webhook.secret_ref, events: webhook.events })),
    agentId: body.agent_id ?? '',
    backends: body.backends,
    workspace: body.workspace ? { repo: body.workspace.repo, ref: body.workspace.ref } : undefined,
    verify: body.verify
      ? {
          testCommand: body.verify.test_command ?? '',
          judge: body.verify.judge ?? true,
          judgeSet: body.verify.judge !== undefined,
          citations: body.verify.citations
            ? { style: citationStyles[body.verify.citations.style], pattern: body.verify.citations.pattern ?? '', min: body.verify.citations.min }
            : undefined,
          postconditions: body.verify.postconditions ?? [],
          checkTimeoutMs: body.verify.check_timeout_ms ?? 0,
        }
      : undefined,
    capabilities: body.capabilities,
    attachments: body.attachments.map((attachment) => ({
      name: attachment.name,
      mediaType: attachment.media_type,
      dataBase64: attachment.data_base64 ?? '',
      url: attachment.url ?? '',
    })),
  };
}

function encodeCitations(citations: NonNullable<Task['verify']>['citations']) {
  const style = Object.entries(citationStyles).find(([, value]) => value === citations?.style)?.[0];
  if (!citations || !style) return null;
  return { style, pattern: citations.pattern || null, min: citations.min || 1 };
}

/** The public, lower-case name of a task state (`queued` ... `cancelled`). */
export function taskStateName(state: TaskState): string {
  const name = TaskState[state];
  return name && name.startsWith('TASK_STATE_') ? name.slice('TASK_STATE_'.length).toLowerCase() : 'unspecified';
}

const stateByName = new Map(
  Object.values(TaskState)
    .filter((value): value is TaskState => typeof value === 'number' && value > 0)
    .map((state) => [taskStateName(state), state]),
);

function isoTime(time: Date | undefined): string | null {
  return time ? time.toISOString() : null;
}

function parseObject(json: string): Record<string, unknown> | null {
  if (!json) return null;
  try {
    const value: unknown = JSON.parse(json);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * The task as the REST API shows it (snake_case, costs as `{usd, micro_usd}`, times as ISO 8601 or
 * null). `result` is null until there is one; `error` and `classification` are null when absent;
 * `explanation` lists every pipeline decision in order, with `detail` the step's structured detail
 * (for `place`, the whole placement decision) or null; `attempts` lists every backend run with its
 * judge's `verdict` (null until verified). Tasks from a list carry empty `explanation` and `attempts`.
 * Besides the task itself: `workspace`, `verify` and `webhooks` as given, `webhook_deliveries` (each
 * state change sent to each webhook: status `pending` | `delivered` | `failed`, tries, last HTTP
 * status and error; empty in lists), and `links` to the task, its event stream and its cancel action.
 */
export function encodeTask(task: Task) {
  const state = taskStateName(task.state);
  return {
    id: task.id,
    state,
    mode: task.mode,
    task: task.input,
    budget: {
      per_task: costJson(task.budget?.perTaskMicroUsd ?? 0),
      per_day: costJson(task.budget?.perDayMicroUsd ?? 0),
    },
    result: task.result !== '' || state === 'succeeded' ? task.result : null,
    error: task.error && (task.error.code || task.error.message) ? { code: task.error.code, message: task.error.message } : null,
    cost: costJson(task.costMicroUsd),
    classification: task.classification?.taskClass
      ? {
          task_class: task.classification.taskClass,
          vision: task.classification.vision,
          difficulty: task.classification.difficulty,
          reason: task.classification.reason,
          source: task.classification.source,
        }
      : null,
    explanation: task.explanation.map(encodeExplanationEntry),
    attempts: task.attempts.map(encodeAttempt),
    agent_id: task.agentId || null,
    backends: task.backends,
    capabilities: task.capabilities,
    workspace: task.workspace?.repo ? { repo: task.workspace.repo, ref: task.workspace.ref } : null,
    verify: task.verify
      ? {
          judge: task.verify.judgeSet ? task.verify.judge : true,
          test_command: task.verify.testCommand || null,
          citations: encodeCitations(task.verify.citations),
          postconditions: task.verify.postconditions,
          check_timeout_ms: task.verify.checkTimeoutMs || null,
        }
      : null,
    webhooks: task.webhooks.map((webhook) => ({ url: webhook.url, secret_ref: webhook.secretRef, events: webhook.events })),
    webhook_deliveries: task.webhookDeliveries.map((delivery) => ({
      id: delivery.id,
      webhook_index: delivery.webhookIndex,
      url: delivery.url,
      event_type: delivery.eventType,
      status: delivery.status,
      attempts: delivery.attempts,
      last_status_code: delivery.lastStatusCode || null,
      last_error: delivery.lastError || null,
      next_attempt_at: isoTime(delivery.nextAttemptTime),
      created_at: isoTime(delivery.createTime),
      finished_at: isoTime(delivery.finishTime),
    })),
    created_at: isoTime(task.createTime),
    started_at: isoTime(task.startTime),
    finished_at: isoTime(task.finishTime),
    cancel_requested_by: task.cancelRequestedBy || null,
    links: {
      self: `/v1/tasks/${task.id}`,
      events: `/v1/tasks/${task.id}/events`,
      cancel: `/v1/tasks/${task.id}/cancel`,
    },
  };
}

function encodeExplanationEntry(entry: ExplanationEntry) {
  return {
    step: entry.step,
    attempt: entry.attempt,
    message: entry.message,
    backend: entry.backend || null,
    decision_id: entry.decisionId || null,
    detail: parseObject(entry.detailJson),
    time: isoTime(entry.time),
  };
}

function encodeAttempt(attempt: Attempt) {
  return {
    id: attempt.id,
    number: attempt.number,
    backend: attempt.backend,
    model_family: attempt.modelFamily,
    agent_id: attempt.agentId || null,
    decision_id: attempt.decisionId || null,
    state: attempt.state,
    output: attempt.output,
    error: attempt.error || null,
    cost: costJson(attempt.costMicroUsd),
    input_tokens: attempt.inputTokens,
    output_tokens: attempt.outputTokens,
    latency_ms: attempt.latencyMs,
    verdict: attempt.verdict
      ? {
          pass: attempt.verdict.pass,
          reasons: attempt.verdict.reasons,
          judge_backend: attempt.verdict.judgeBackend,
          judge_model_family: attempt.verdict.judgeModelFamily,
          scores: attempt.verdict.scores,
          checks: attempt.verdict.checks,
        }
      : null,
    started_at: isoTime(attempt.startTime),
    finished_at: isoTime(attempt.finishTime),
  };
}

/**
 * Task ids are `tsk_` + a ULID. A path that cannot be one is answered 404 here, without asking
 * execution.
 */
export function taskIdParam(context: RouteContext): string {
  const id = context.params.id!;
  if (!/^tsk_[0-9A-HJKMNP-TV-Z]{26}$/i.test(id)) throw problems.notFound(`no task ${id}`);
  return id;
}

const listQuerySchema = z.object({
  limit: z
    .string()
    .regex(/^\d+$/, 'must be an integer from 1 to 200')
    .transform(Number)
    .pipe(z.number().min(1, 'must be at least 1').max(200, 'must be at most 200'))
    .optional(),
  page_token: z.string().max(1_000).optional(),
  state: z
    .string()
    .refine((state) => stateByName.has(state), `must be one of ${[...stateByName.keys()].join(', ')}`)
    .optional(),
});

export const taskRoutes: Route[] = [
  {
    method: 'POST',
    pattern: '/v1/tasks',
    access: 'tasks:write',
    async handle(context) {
      const requestId = idempotencyKey(context.request.headers);
      const raw = await readJsonBody(context.request, context.config.GATEWAY_MAX_BODY_BYTES);
      const body = parseWith(createTaskBodySchema, raw, 'task');
      const answer = await context.clients.execution.createTask(
        createTaskRequest(body, context.identity!.projectId, requestId),
        { signal: context.signal },
      );
      const task = encodeTask(answer.task!);
      sendJson(context.response, answer.replayed ? 200 : 201, task, { Location: task.links.self });
    },
  },
  {
    method: 'GET',
    pattern: '/v1/tasks',
    access: 'tasks:read',
    async handle(context) {
      const query = parseWith(listQuerySchema, Object.fromEntries(context.url.searchParams), 'query');
      const answer = await context.clients.execution.listTasks(
        {
          projectId: context.identity!.projectId,
          pageSize: query.limit ?? 0,
          pageToken: query.page_token ?? '',
          state: query.state ? stateByName.get(query.state)! : TaskState.TASK_STATE_UNSPECIFIED,
        },
        { signal: context.signal },
      );
      sendJson(context.response, 200, {
        data: answer.tasks.map(encodeTask),
        next_page_token: answer.nextPageToken || null,
      });
    },
  },
  {
    method: 'GET',
    pattern: '/v1/tasks/{id}',
    access: 'tasks:read',
    async handle(context) {
      const answer = await context.clients.execution.getTask(
        { taskId: taskIdParam(context), projectId: context.identity!.projectId },
        { signal: context.signal },
      );
      sendJson(context.response, 200, encodeTask(answer.task!));
    },
  },
  {
    method: 'POST',
    pattern: '/v1/tasks/{id}/cancel',
    access: 'tasks:write',
    async handle(context) {
      // A cancel carries no body; one that is sent anyway is drained, not parsed.
      context.request.resume();
      const answer = await context.clients.execution.cancelTask(
        { taskId: taskIdParam(context), projectId: context.identity!.projectId, requestedBy: context.identity!.tokenId },
        { signal: context.signal },
      );
      sendJson(context.response, 202, encodeTask(answer.task!));
    },
  },
];
