/**
 * Where an Acquire's database time goes, without gRPC: acquire -> release cycles per second straight
 * through the pool repository on one Postgres connection, then EXPLAIN ANALYZE of the grant statement
 * as the repository prepares it (named), first run against a later run: once Postgres settles on a
 * generic plan, planning time all but disappears. A fresh database is created and dropped afterwards.
 *
 *   npx tsx bench/lease/grant-plan-benchmark.ts
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres CYCLES=3000 npx tsx bench/lease/grant-plan-benchmark.ts
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { openDatabase } from '@actor/kit';
import { PoolRepository } from '../../services/pool/src/db/pool-repository.js';
import { schema } from '../../services/pool/src/db/schema.js';

const baseUrl = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const cycles = Number(process.env.CYCLES ?? 3_000);

interface NamedQuery {
  name?: string;
  text: string;
  values: unknown[];
}

const admin = new pg.Client({ connectionString: baseUrl });
await admin.connect();
const databaseName = `actor_bench_grant_${randomBytes(4).toString('hex')}`;
await admin.query(`create database ${databaseName}`);
const url = new URL(baseUrl);
url.pathname = `/${databaseName}`;

const lines: string[] = [];
try {
  const database = await openDatabase({
    service: 'pool',
    databaseUrl: url.toString(),
    dataDir: '',
    migrationsFolder: fileURLToPath(new URL('../../services/pool/migrations', import.meta.url)),
    schema,
    maxConnections: 1,
  });
  // Keep the last text and values the repository sent under each statement name, to explain them below.
  const sent = new Map<string, NamedQuery>();
  const client = (database.db as unknown as { $client: { query: (...args: unknown[]) => unknown } }).$client;
  const query = client.query.bind(client);
  client.query = (...args: unknown[]) => {
    const first = args[0] as NamedQuery;
    if (first instanceof Object && first.name) sent.set(first.name, first);
    return query(...args);
  };

  const repository = new PoolRepository(database.db);
  await repository.createAgent(
    { name: 'bench', description: '', agentType: 'bench', capabilities: ['*'], configuration: {}, enabled: true, concurrency: 64 },
    '',
  );
  const spec = {
    workType: 'task',
    workId: 'bench',
    projectId: 'prj_bench',
    agentId: '',
    capability: '',
    agentType: 'bench',
    ttlMs: 30_000,
    requestId: '',
    wait: false,
    waitTimeoutMs: 0,
    releaseFirst: null,
  };
  const startedAt = performance.now();
  for (let index = 0; index < cycles; index++) {
    const granted = await repository.tryAcquire(spec, null);
    await repository.releaseLease(granted!.lease.id, granted!.lease.epoch);
  }
  const perSecond = cycles / ((performance.now() - startedAt) / 1000);
  await database.close();

  const grant = sent.get('pool_grant_lease');
  const explainer = new pg.Client({ connectionString: url.toString() });
  await explainer.connect();
  const timings: Array<{ run: number; planningMs: number; executionMs: number }> = [];
  if (grant) {
    await explainer.query('begin');
    await explainer.query(`prepare grant_lease as ${grant.text}`);
    for (let run = 1; run <= 8; run++) {
      // A new lease id each run: the id is the only value that must differ between grants.
      const values = grant.values.map((value) =>
        value === null ? 'null' : `'${String(value).startsWith('lse_') ? `${value}_${run}` : String(value)}'`,
      );
      const plan = (await explainer.query(`explain (analyze) execute grant_lease(${values.join(', ')})`)).rows
        .map((row: Record<string, string>) => row['QUERY PLAN']!)
        .join('\n');
      timings.push({
        run,
        planningMs: Number(/Planning Time: ([\d.]+)/.exec(plan)?.[1]),
        executionMs: Number(/Execution Time: ([\d.]+)/.exec(plan)?.[1]),
      });
    }
    await explainer.query('rollback');
  }
  await explainer.end();

  lines.push(`\nPool repository on Postgres (${url.host}), one connection, no gRPC, 64 slots\n`);
  lines.push(`acquire -> release cycles: ${cycles}, ${perSecond.toFixed(0)} per second\n`);
  lines.push('| grant run (same session) | planning ms | execution ms |', '| ---: | ---: | ---: |');
  for (const timing of timings) lines.push(`| ${timing.run} | ${timing.planningMs.toFixed(3)} | ${timing.executionMs.toFixed(3)} |`);
} finally {
  await admin.query(`drop database if exists ${databaseName} with (force)`);
  await admin.end();
}
console.log(lines.join('\n'));
