import { sql } from 'drizzle-orm';
import {
  bigint,
  bigserial,
  boolean,
  index,
  integer,
  jsonb,
  pgSchema,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

export const pool = pgSchema('pool');

/** Fencing epochs: one number per lease, from one sequence, so they only grow and are never reused. */
export const leaseEpoch = pool.sequence('lease_epoch', { startWith: 1, increment: 1 });

/** Configured agent slots. */
export const agents = pool.table('agents', {
  id: text('id').primaryKey(),
  name: text('name').notNull().unique(),
  description: text('description').notNull().default(''),
  agentType: text('agent_type').notNull(),
  /** `["*"]` for every capability, or the list served. */
  capabilities: jsonb('capabilities').$type<string[]>().notNull(),
  configuration: jsonb('configuration').$type<Record<string, unknown>>().notNull(),
  enabled: boolean('enabled').notNull().default(true),
  concurrency: integer('concurrency').notNull().default(1),
  /** The CreateAgent request id, so that a retried create returns the agent instead of ALREADY_EXISTS. */
  createRequestId: text('create_request_id'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});

/**
 * One row per unit of concurrency (slot 0..n-1; rows above the current concurrency stay but are never
 * leased). Acquire locks the slot row it takes, and the unique index on active leases below makes a
 * second active lease on the same slot impossible, whatever the number of pool replicas.
 */
export const agentSlots = pool.table(
  'agent_slots',
  {
    agentId: text('agent_id')
      .notNull()
      .references(() => agents.id, { onDelete: 'cascade' }),
    slotNo: integer('slot_no').notNull(),
  },
  (table) => [primaryKey({ columns: [table.agentId, table.slotNo] })],
);

/**
 * Leases. A lease is active while `ended_at` is null and `expires_at` (database clock) is in the future;
 * an expired one is ended by the next Acquire of its slot or by the sweep.
 */
export const agentLeases = pool.table(
  'agent_leases',
  {
    id: text('id').primaryKey(),
    agentId: text('agent_id')
      .notNull()
      .references(() => agents.id, { onDelete: 'cascade' }),
    slotNo: integer('slot_no').notNull(),
    epoch: bigint('epoch', { mode: 'number' })
      .notNull()
      .unique()
      .default(sql`nextval('pool.lease_epoch')`),
    workType: text('work_type').notNull(),
    workId: text('work_id').notNull(),
    projectId: text('project_id').notNull(),
    /** The Acquire request id: a retried Acquire returns this lease. */
    requestId: text('request_id').unique(),
    acquiredAt: timestamp('acquired_at', { withTimezone: true }).notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    endedAt: timestamp('ended_at', { withTimezone: true }),
    /** `released` or `expired`. */
    endReason: text('end_reason'),
  },
  (table) => [
    uniqueIndex('agent_leases_one_active_per_slot').on(table.agentId, table.slotNo).where(sql`ended_at is null`),
    index('agent_leases_open_by_expiry').on(table.expiresAt).where(sql`ended_at is null`),
    index('agent_leases_open_by_project').on(table.projectId).where(sql`ended_at is null`),
  ],
);

/**
 * Live pool processes. Each registers at start and refreshes `alive_until` with every sweep; a row whose
 * `alive_until` has passed belongs to a process that is gone (killed, partitioned), and the next sweep of
 * any pool instance, including the one that runs at every start-up, deletes it and, by cascade, the
 * Acquire calls that were queued through it.
 */
export const poolInstances = pool.table('pool_instances', {
  /** `<host>:<pid>:<random>`, so an operator can tell which process a row was. */
  id: text('id').primaryKey(),
  startedAt: timestamp('started_at', { withTimezone: true }).notNull().defaultNow(),
  aliveUntil: timestamp('alive_until', { withTimezone: true }).notNull(),
});

/**
 * Queued Acquire calls, in arrival order (`seq`). A waiter takes a slot only when no older live waiter
 * could use it. `alive_until` is refreshed while the call waits, so a crashed replica's waiters stop
 * blocking others once it passes.
 */
export const leaseWaiters = pool.table('lease_waiters', {
  seq: bigserial('seq', { mode: 'number' }).primaryKey(),
  agentId: text('agent_id').notNull().default(''),
  capability: text('capability').notNull().default(''),
  agentType: text('agent_type').notNull().default(''),
  projectId: text('project_id').notNull().default(''),
  workId: text('work_id').notNull().default(''),
  /** The pool instance the caller queued through; its waiters go when it does. */
  instanceId: text('instance_id').references(() => poolInstances.id, { onDelete: 'cascade' }),
  aliveUntil: timestamp('alive_until', { withTimezone: true }).notNull(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});

export const schema = { agents, agentSlots, agentLeases, poolInstances, leaseWaiters };
