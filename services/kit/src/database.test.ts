import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { integer, pgSchema, text } from 'drizzle-orm/pg-core';
import { openDatabase, type OpenDatabase } from './database.js';
import { testDatabase } from './testing.js';

const kitTest = pgSchema('kit_test');
const counters = kitTest.table('counters', { name: text('name').primaryKey(), value: integer('value').notNull() });
const schema = { counters };

/**
 * The database factory on both drivers. On PGlite there is one connection per process: two
 * transactions started at once must not interleave on it (a read-modify-write would lose updates).
 */
describe('openDatabase', () => {
  let migrations: string;
  let database: OpenDatabase<typeof schema>;
  let dropDatabase: () => Promise<void>;

  beforeAll(async () => {
    migrations = mkdtempSync(join(tmpdir(), 'kit-migrations-'));
    mkdirSync(join(migrations, 'meta'));
    writeFileSync(
      join(migrations, '0000_init.sql'),
      'CREATE SCHEMA "kit_test";\n--> statement-breakpoint\nCREATE TABLE "kit_test"."counters" ("name" text PRIMARY KEY NOT NULL, "value" integer NOT NULL);\n',
    );
    writeFileSync(
      join(migrations, 'meta', '_journal.json'),
      JSON.stringify({ version: '7', dialect: 'postgresql', entries: [{ idx: 0, version: '7', when: 1, tag: '0000_init', breakpoints: true }] }),
    );
    const target = await testDatabase();
    dropDatabase = target.drop;
    database = await openDatabase({ service: 'kit', databaseUrl: target.databaseUrl, dataDir: target.dataDir, migrationsFolder: migrations, schema });
  });
  afterAll(async () => {
    await database?.close();
    await dropDatabase?.();
    rmSync(migrations, { recursive: true, force: true });
  });

  it('applies migrations and answers a ping', async () => {
    await database.ping();
    await database.db.insert(counters).values({ name: 'hits', value: 0 });
    const [row] = await database.db.select().from(counters);
    expect(row).toEqual({ name: 'hits', value: 0 });
  });

  it('never interleaves concurrent transactions: no lost update', async () => {
    const increments = 40;
    await Promise.all(
      Array.from({ length: increments }, () =>
        database.db.transaction(async (tx) => {
          const [row] = await tx.select().from(counters).where(sql`${counters.name} = 'hits'`).for('update');
          // Yield between read and write: on a shared connection another transaction would slip in here.
          await new Promise((resolve) => setTimeout(resolve, 1));
          await tx.update(counters).set({ value: row!.value + 1 }).where(sql`${counters.name} = 'hits'`);
        }),
      ),
    );
    const [row] = await database.db.select().from(counters);
    expect(row!.value).toBe(increments);
  });
});
