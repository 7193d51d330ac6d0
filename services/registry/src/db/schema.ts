import { bigint, boolean, integer, jsonb, pgSchema, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';

export const registry = pgSchema('registry');

/** One row per adapter type: what the backend declares. */
export const adapters = registry.table('adapters', {
  type: text('type').primaryKey(),
  displayName: text('display_name').notNull(),
  modelFamily: text('model_family').notNull(),
  capabilities: jsonb('capabilities').$type<string[]>().notNull(),
  contextTokens: bigint('context_tokens', { mode: 'number' }).notNull().default(0),
  maxOutputTokens: bigint('max_output_tokens', { mode: 'number' }).notNull().default(0),
  concurrency: integer('concurrency').notNull().default(0),
  timeoutMs: bigint('timeout_ms', { mode: 'number' }).notNull().default(0),
  egress: boolean('egress').notNull().default(false),
  trustClass: text('trust_class').notNull(),
  qualityTier: integer('quality_tier').notNull(),
  acceptsByoKey: boolean('accepts_byo_key').notNull().default(false),
  requiresByoKey: boolean('requires_byo_key').notNull().default(false),
  demo: boolean('demo').notNull().default(false),
  ready: boolean('ready').notNull().default(true),
  readyReason: text('ready_reason').notNull().default(''),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});

/** Append-only rate-card revisions; the highest revision of an adapter is current. */
export const rateCards = registry.table(
  'rate_cards',
  {
    adapterType: text('adapter_type').notNull(),
    revision: bigint('revision', { mode: 'number' }).notNull(),
    inputMicroUsdPerMtok: bigint('input_micro_usd_per_mtok', { mode: 'number' }).notNull(),
    outputMicroUsdPerMtok: bigint('output_micro_usd_per_mtok', { mode: 'number' }).notNull(),
    microUsdPerSecond: bigint('micro_usd_per_second', { mode: 'number' }).notNull(),
    microUsdPerTask: bigint('micro_usd_per_task', { mode: 'number' }).notNull(),
    source: text('source').notNull(),
    verifiedAt: timestamp('verified_at', { withTimezone: true }),
    reviewer: text('reviewer').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (table) => [primaryKey({ columns: [table.adapterType, table.revision] })],
);

export const projects = registry.table('projects', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});

/** API tokens, stored as SHA-256 hashes: a database leak does not leak usable tokens. */
export const apiTokens = registry.table('api_tokens', {
  id: text('id').primaryKey(),
  projectId: text('project_id')
    .notNull()
    .references(() => projects.id),
  tokenHash: text('token_hash').notNull().unique(),
  scopes: jsonb('scopes').$type<string[]>().notNull(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  revokedAt: timestamp('revoked_at', { withTimezone: true }),
});

/** Named project secrets, AES-256-GCM encrypted; the plaintext never touches the database. */
export const secrets = registry.table(
  'secrets',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id),
    name: text('name').notNull(),
    version: bigint('version', { mode: 'number' }).notNull(),
    ciphertext: text('ciphertext').notNull(),
    // First write of this name; rows from before this column get the migration's time.
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (table) => [primaryKey({ columns: [table.projectId, table.name] })],
);

export const schema = { adapters, rateCards, projects, apiTokens, secrets };
