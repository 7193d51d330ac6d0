import { sql } from 'drizzle-orm';
import { bigint, index, jsonb, pgSchema, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

export const billing = pgSchema('billing');

/** `held` -> `settled` | `released` | `expired`; only a held reservation counts in `held_micro_usd`. */
export type ReservationStateName = 'held' | 'settled' | 'released' | 'expired';

/** One hold of money for one call (attempt or judge). */
export const reservations = billing.table(
  'reservations',
  {
    id: text('id').primaryKey(),
    // Null when the caller sent no request id (no retry protection asked for).
    requestId: text('request_id'),
    projectId: text('project_id').notNull(),
    taskId: text('task_id').notNull(),
    attemptId: text('attempt_id').notNull(),
    amountMicroUsd: bigint('amount_micro_usd', { mode: 'number' }).notNull(),
    state: text('state').$type<ReservationStateName>().notNull(),
    costMicroUsd: bigint('cost_micro_usd', { mode: 'number' }).notNull().default(0),
    day: text('day').notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
  },
  (table) => [
    uniqueIndex('reservations_request_id_key').on(table.requestId),
    // The sweeper only ever looks at held rows past their deadline.
    index('reservations_held_expiry_idx').on(table.expiresAt).where(sql`${table.state} = 'held'`),
  ],
);

/** One priced usage sample per settled reservation. */
export const usageSamples = billing.table(
  'usage_samples',
  {
    id: text('id').primaryKey(),
    reservationId: text('reservation_id').notNull().unique(),
    projectId: text('project_id').notNull(),
    taskId: text('task_id').notNull(),
    attemptId: text('attempt_id').notNull(),
    backend: text('backend').notNull(),
    rateCardRevision: bigint('rate_card_revision', { mode: 'number' }).notNull(),
    inputTokens: bigint('input_tokens', { mode: 'number' }).notNull(),
    outputTokens: bigint('output_tokens', { mode: 'number' }).notNull(),
    durationMs: bigint('duration_ms', { mode: 'number' }).notNull(),
    calls: bigint('calls', { mode: 'number' }).notNull(),
    costMicroUsd: bigint('cost_micro_usd', { mode: 'number' }).notNull(),
    reportedCostMicroUsd: bigint('reported_cost_micro_usd', { mode: 'number' }).notNull().default(0),
    day: text('day').notNull(),
    flags: jsonb('flags').$type<string[]>().notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (table) => [
    index('usage_samples_project_day_idx').on(table.projectId, table.day),
    index('usage_samples_project_task_idx').on(table.projectId, table.taskId),
  ],
);

/** Money of a project on one UTC day: the row Reserve locks to check `per_day_usd`. */
export const daySpend = billing.table(
  'day_spend',
  {
    projectId: text('project_id').notNull(),
    day: text('day').notNull(),
    heldMicroUsd: bigint('held_micro_usd', { mode: 'number' }).notNull().default(0),
    spentMicroUsd: bigint('spent_micro_usd', { mode: 'number' }).notNull().default(0),
  },
  (table) => [primaryKey({ columns: [table.projectId, table.day] })],
);

/** Money of one task across all its attempts and judges: the row Reserve locks to check `per_task_usd`. */
export const taskSpend = billing.table(
  'task_spend',
  {
    projectId: text('project_id').notNull(),
    taskId: text('task_id').notNull(),
    heldMicroUsd: bigint('held_micro_usd', { mode: 'number' }).notNull().default(0),
    spentMicroUsd: bigint('spent_micro_usd', { mode: 'number' }).notNull().default(0),
  },
  (table) => [primaryKey({ columns: [table.projectId, table.taskId] })],
);

export const schema = { reservations, usageSamples, daySpend, taskSpend };
