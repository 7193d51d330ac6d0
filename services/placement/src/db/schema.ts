import { bigint, doublePrecision, integer, jsonb, pgSchema, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

export const placement = pgSchema('placement');

/** Every placement decision, stored whole (the proto JSON of `Decision`) and retrievable by id. */
export const decisions = placement.table(
  'decisions',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id').notNull(),
    /** The caller's idempotency key; null when the caller sent none. */
    requestId: text('request_id'),
    taskId: text('task_id').notNull(),
    taskClass: text('task_class').notNull(),
    decision: jsonb('decision').$type<unknown>().notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (table) => [uniqueIndex('decisions_project_request_idx').on(table.projectId, table.requestId)],
);

/**
 * What placement has learned about one backend for one task class. Kept in the database (not in
 * memory) so that it survives restarts and every replica places with the same knowledge.
 */
export const signals = placement.table(
  'signals',
  {
    backend: text('backend').notNull(),
    taskClass: text('task_class').notNull(),
    /** Outcomes counted (work and judge calls). */
    samples: bigint('samples', { mode: 'number' }).notNull().default(0),
    /** Calls that answered without error. */
    successes: bigint('successes', { mode: 'number' }).notNull().default(0),
    /** Work answers that passed verification. */
    verifiedSuccesses: bigint('verified_successes', { mode: 'number' }).notNull().default(0),
    /** Work outcomes (not judge calls): the denominator of the verified-success estimate. */
    workSamples: bigint('work_samples', { mode: 'number' }).notNull().default(0),
    /** Verified work answers and work outcomes, exponentially weighted (see SignalState): the estimate's evidence. */
    recentVerified: doublePrecision('recent_verified').notNull().default(0),
    recentWork: doublePrecision('recent_work').notNull().default(0),
    /** The most recent latencies, oldest first, in ms (a rolling window). */
    latenciesMs: jsonb('latencies_ms').$type<number[]>().notNull().default([]),
    /** Outcomes that reported a cost, and their sum in micro-USD: the measured mean cost. */
    costSamples: bigint('cost_samples', { mode: 'number' }).notNull().default(0),
    totalCostMicroUsd: bigint('total_cost_micro_usd', { mode: 'number' }).notNull().default(0),
    recentCostSamples: doublePrecision('recent_cost_samples').notNull().default(0),
    recentCostMicroUsd: doublePrecision('recent_cost_micro_usd').notNull().default(0),
    consecutiveFailures: integer('consecutive_failures').notNull().default(0),
    /** When the circuit opened; null while closed. */
    openedAt: timestamp('opened_at', { withTimezone: true }),
    /** When the half-open probe was handed out; null when none is in flight. */
    probeStartedAt: timestamp('probe_started_at', { withTimezone: true }),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (table) => [primaryKey({ columns: [table.backend, table.taskClass] })],
);

/** Request ids of outcomes already counted: a retried ReportOutcome is counted once. */
export const outcomeReports = placement.table('outcome_reports', {
  requestId: text('request_id').primaryKey(),
  backend: text('backend').notNull(),
  taskClass: text('task_class').notNull(),
  decisionId: text('decision_id').notNull().default(''),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});

/** The backend currently placed for a project x task class x mode x purpose (hysteresis). */
export const incumbents = placement.table(
  'incumbents',
  {
    projectId: text('project_id').notNull(),
    taskClass: text('task_class').notNull(),
    mode: text('mode').notNull(),
    purpose: text('purpose').notNull(),
    backend: text('backend').notNull(),
    /** The challenger that has beaten the incumbent by the margin at every placement since `challenger_since`; null when none. */
    challenger: text('challenger'),
    challengerSince: timestamp('challenger_since', { withTimezone: true }),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (table) => [primaryKey({ columns: [table.projectId, table.taskClass, table.mode, table.purpose] })],
);

export const schema = { decisions, signals, outcomeReports, incumbents };
