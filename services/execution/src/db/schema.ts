import { sql } from 'drizzle-orm';
import { bigint, index, integer, jsonb, pgSchema, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import type { TaskVerify } from '@actor/engine';

export const execution = pgSchema('execution');

/** One row per task; `last_event_seq` is bumped under the row lock so event seqs stay gapless. */
export const tasks = execution.table(
  'tasks',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id').notNull(),
    requestId: text('request_id'),
    state: text('state').notNull(),
    input: text('input').notNull(),
    mode: text('mode').notNull(),
    perTaskMicroUsd: bigint('per_task_micro_usd', { mode: 'number' }).notNull(),
    perDayMicroUsd: bigint('per_day_micro_usd', { mode: 'number' }).notNull(),
    result: text('result'),
    errorCode: text('error_code'),
    errorMessage: text('error_message'),
    costMicroUsd: bigint('cost_micro_usd', { mode: 'number' }).notNull().default(0),
    classification: jsonb('classification'),
    agentId: text('agent_id'),
    backends: jsonb('backends').$type<string[]>().notNull(),
    capabilities: jsonb('capabilities').$type<string[]>().notNull(),
    workspace: jsonb('workspace'),
    // The engine's TaskVerify: judge, testCommand, citations, postconditions, checkTimeoutMs.
    verify: jsonb('verify').$type<TaskVerify>().notNull(),
    webhooks: jsonb('webhooks').$type<Array<{ url: string; secretRef: string; events: string[] }>>().notNull(),
    attachments: jsonb('attachments').$type<Array<{ name: string; mediaType: string; dataBase64: string; url: string }>>().notNull(),
    cancelRequestedBy: text('cancel_requested_by'),
    cancelRequestedAt: timestamp('cancel_requested_at', { withTimezone: true }),
    claimedBy: text('claimed_by'),
    claimExpiresAt: timestamp('claim_expires_at', { withTimezone: true }),
    runs: integer('runs').notNull().default(0),
    lastEventSeq: bigint('last_event_seq', { mode: 'number' }).notNull().default(0),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    startedAt: timestamp('started_at', { withTimezone: true }),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
  },
  (table) => [
    uniqueIndex('tasks_project_request_id').on(table.projectId, table.requestId),
    index('tasks_project_created').on(table.projectId, table.createdAt),
    // Workers claim from this partial index: only claimable rows are in it.
    index('tasks_claimable').on(table.createdAt).where(sql`state in ('queued', 'running', 'verifying')`),
  ],
);

/** One row per backend run of a task; numbers are gapless per task. */
export const attempts = execution.table(
  'attempts',
  {
    id: text('id').primaryKey(),
    taskId: text('task_id')
      .notNull()
      .references(() => tasks.id),
    number: integer('number').notNull(),
    backend: text('backend').notNull(),
    modelFamily: text('model_family').notNull(),
    agentId: text('agent_id'),
    decisionId: text('decision_id').notNull(),
    state: text('state').notNull(),
    output: text('output').notNull().default(''),
    error: text('error'),
    costMicroUsd: bigint('cost_micro_usd', { mode: 'number' }).notNull().default(0),
    inputTokens: bigint('input_tokens', { mode: 'number' }).notNull().default(0),
    outputTokens: bigint('output_tokens', { mode: 'number' }).notNull().default(0),
    latencyMs: bigint('latency_ms', { mode: 'number' }).notNull().default(0),
    verdict: jsonb('verdict'),
    startedAt: timestamp('started_at', { withTimezone: true }).notNull().defaultNow(),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
  },
  (table) => [uniqueIndex('attempts_task_number').on(table.taskId, table.number)],
);

/** Progress events; (task_id, seq) is the SSE id space. */
export const taskEvents = execution.table(
  'task_events',
  {
    taskId: text('task_id')
      .notNull()
      .references(() => tasks.id),
    seq: bigint('seq', { mode: 'number' }).notNull(),
    kind: text('kind').notNull(),
    data: jsonb('data').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (table) => [primaryKey({ columns: [table.taskId, table.seq] })],
);

/** The task's stored explanation, one entry per pipeline decision, in order. */
export const explanationEntries = execution.table(
  'explanation_entries',
  {
    taskId: text('task_id')
      .notNull()
      .references(() => tasks.id),
    position: integer('position').notNull(),
    step: text('step').notNull(),
    attempt: integer('attempt').notNull(),
    message: text('message').notNull(),
    backend: text('backend'),
    decisionId: text('decision_id'),
    detail: jsonb('detail'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (table) => [primaryKey({ columns: [table.taskId, table.position] })],
);

/**
 * The webhook outbox: one row per (task, subscription, state change), written in the transaction that
 * records the state change, sent later by the delivery loop (src/webhooks/). The id is the
 * `webhook-id` header and never changes across retries. `next_attempt_at` is both the schedule and
 * the claim: a sender pushes it past its request timeout before POSTing, so a replica that dies
 * mid-send leaves the row due again (at-least-once delivery).
 */
export const webhookDeliveries = execution.table(
  'webhook_deliveries',
  {
    id: text('id').primaryKey(),
    taskId: text('task_id')
      .notNull()
      .references(() => tasks.id),
    projectId: text('project_id').notNull(),
    webhookIndex: integer('webhook_index').notNull(),
    url: text('url').notNull(),
    secretRef: text('secret_ref').notNull(),
    eventType: text('event_type').notNull(),
    /** The exact JSON body, signed and sent as is on every try. */
    payload: text('payload').notNull(),
    /** `pending` | `delivered` | `failed`. */
    status: text('status').notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true }).notNull().defaultNow(),
    lastAttemptAt: timestamp('last_attempt_at', { withTimezone: true }),
    lastStatusCode: integer('last_status_code'),
    lastError: text('last_error'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
  },
  (table) => [
    index('webhook_deliveries_task').on(table.taskId, table.createdAt),
    // The loop claims from this partial index: only rows still to send are in it.
    index('webhook_deliveries_due').on(table.nextAttemptAt).where(sql`status = 'pending'`),
  ],
);

export const schema = { tasks, attempts, taskEvents, explanationEntries, webhookDeliveries };
