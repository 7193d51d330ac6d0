import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import { drizzle as drizzlePostgres } from 'drizzle-orm/node-postgres';
import { migrate as migratePostgres } from 'drizzle-orm/node-postgres/migrator';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import pg from 'pg';
import type { Logger } from './logger.js';

/** A drizzle database over either driver; services write SQL once for both. */
export type Database<Schema extends Record<string, unknown> = Record<string, never>> = PgDatabase<
  PgQueryResultHKT,
  Schema
>;

export interface DatabaseOptions<Schema extends Record<string, unknown>> {
  /** The owning service; names its PGlite data dir and its migrations table. */
  service: string;
  /** A Postgres URL; unset opens embedded PGlite under `dataDir/<service>`. */
  databaseUrl?: string;
  /** Root of embedded data; ignored with a URL. `memory://` keeps PGlite in memory (tests). */
  dataDir: string;
  /** The service's drizzle-kit output folder. */
  migrationsFolder: string;
  /** The drizzle schema object (tables of the service's own pgSchema). */
  schema: Schema;
  logger?: Logger;
  /** Pool size with Postgres; default 10. */
  maxConnections?: number;
  /**
   * Postgres settings for every connection of this service (sent at connect, as `-c name=value`);
   * ignored on PGlite. E.g. `plan_cache_mode`.
   */
  sessionSettings?: Record<string, string>;
}

export interface OpenDatabase<Schema extends Record<string, unknown>> {
  db: Database<Schema>;
  /** `postgres` or `pglite`, for logs and readiness. */
  driver: 'postgres' | 'pglite';
  /** Cheap liveness query. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

// Every service migrates under the same advisory lock, so replicas (and services creating the
// shared `drizzle` bookkeeping schema) starting together never race on DDL.
const MIGRATION_LOCK_KEY = 7_466_332_001;

/**
 * Opens the service's database and applies its migrations. Migration bookkeeping lives in
 * `drizzle.__<service>_migrations`, one table per service, so services sharing a Postgres database
 * never see each other's migration history.
 */
export async function openDatabase<Schema extends Record<string, unknown>>(
  options: DatabaseOptions<Schema>,
): Promise<OpenDatabase<Schema>> {
  const migrationConfig = {
    migrationsFolder: options.migrationsFolder,
    migrationsSchema: 'drizzle',
    migrationsTable: `__${options.service}_migrations`,
  };
  if (options.databaseUrl) {
    const settings = Object.entries(options.sessionSettings ?? {}).map(([name, value]) => `-c ${name}=${value}`);
    const pool = new pg.Pool({
      connectionString: options.databaseUrl,
      max: options.maxConnections ?? 10,
      ...(settings.length > 0 ? { options: settings.join(' ') } : {}),
    });
    // Only the message and code: a pg error carries its whole client object, which would flood the log.
    pool.on('error', (error: Error & { code?: string }) =>
      options.logger?.warn({ code: error.code, message: error.message }, 'idle postgres client error'),
    );
    const db = drizzlePostgres(pool, { schema: options.schema });
    const client = await pool.connect();
    try {
      await client.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      await migratePostgres(drizzlePostgres(client), migrationConfig);
    } finally {
      await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
      client.release();
    }
    options.logger?.info({ driver: 'postgres' }, 'database ready');
    return {
      db: db as unknown as Database<Schema>,
      driver: 'postgres',
      ping: async () => void (await pool.query('select 1')),
      close: () => pool.end(),
    };
  }
  let dataDir = options.dataDir;
  if (!dataDir.startsWith('memory://')) {
    dataDir = resolve(join(options.dataDir, options.service));
    mkdirSync(dataDir, { recursive: true });
  }
  const client = await PGlite.create(dataDir);
  const db = drizzlePglite(client, { schema: options.schema });
  await migratePglite(db, migrationConfig);
  options.logger?.info({ driver: 'pglite', dataDir }, 'database ready');
  return {
    db: db as unknown as Database<Schema>,
    driver: 'pglite',
    ping: async () => void (await db.execute(sql`select 1`)),
    close: () => client.close(),
  };
}
