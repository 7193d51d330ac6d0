/**
 * Where an Acquire's database time goes, without gRPC: acquire -> release cycles per second straight
 * through the pool repository on one Postgres connection, as two statements (grant, release) and as one
 * (each grant handing the previous lease back, release_first), with the Postgres backend's CPU time per
 * cycle (from /proc: Postgres must run on this machine); then EXPLAIN ANALYZE of the grant statement
 * as the repository prepares it (named), first run against a later run: once Postgres settles on a
 * generic plan, planning time all but disappears. References beside the hand-back: its two writes
 * alone as one bare statement, a one-row insert (committed synchronously, then asynchronously: what the
 * WAL flush costs), and the same hand-back on a sketch of another table design (slot-row-sketch.ts).
 * A fresh database is created and dropped afterwards.
 *
 *   npx tsx bench/lease/grant-plan-benchmark.ts
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres CYCLES=3000 SLOTS=64 npx tsx bench/lease/grant-plan-benchmark.ts
 */
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { openDatabase } from '@actor/kit';
import { PoolRepository } from '../../services/pool/src/db/pool-repository.js';
import { schema } from '../../services/pool/src/db/schema.js';
import { createSlotRowSketch } from './slot-row-sketch.js';

const baseUrl = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const cycles = Number(process.env.CYCLES ?? 3_000);
const slots = Number(process.env.SLOTS ?? 64);

/** CPU time (user + system) of a process in µs, from /proc; NaN where there is none. */
function processCpuMicros(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10_000; // clock ticks of 10 ms
  } catch {
    return Number.NaN;
  }
}

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
    { name: 'bench', description: '', agentType: 'bench', capabilities: ['*'], configuration: {}, enabled: true, concurrency: slots },
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
  const pool = client as unknown as pg.Pool;
  const { rows } = await pool.query<{ pid: number }>('select pg_backend_pid() as pid');
  const backendPid = rows[0]!.pid;
  /** Runs `cycle` `cycles` times: cycles per second and the backend's CPU µs per cycle. */
  const measure = async (cycle: () => Promise<void>) => {
    const cpuBefore = processCpuMicros(backendPid);
    const startedAt = performance.now();
    for (let index = 0; index < cycles; index++) await cycle();
    return {
      perSecond: cycles / ((performance.now() - startedAt) / 1000),
      backendMicros: (processCpuMicros(backendPid) - cpuBefore) / cycles,
    };
  };
  const twoStatements = await measure(async () => {
    const granted = await repository.tryAcquire(spec, null);
    await repository.releaseLease(granted!.lease.id, granted!.lease.epoch);
  });
  // The hand-back cycles start from tables as autovacuum would keep them (it is off on this project's
  // Postgres), not on the dead rows the cycles above left behind.
  await pool.query('vacuum (analyze)');
  let held = (await repository.tryAcquireFirst(spec)).granted!;
  const handedBack = await measure(async () => {
    const next = await repository.tryAcquireFirst({ ...spec, releaseFirst: { leaseId: held.lease.id, epoch: held.lease.epoch } });
    held = next.granted!;
  });
  // References for the hand-back statement's cost, on the same connection and tables: the two writes
  // it cannot do without (end the lease, insert the next on the same slot) as one bare statement with
  // no slot search, queue check or row lock, and a one-row insert into a table with only a primary key
  // (what the floor in lease-benchmark.ts pays per Acquire). Both commit synchronously, as the grant does.
  await pool.query('vacuum (analyze)');
  let current = { id: held.lease.id, epoch: held.lease.epoch };
  let serial = 0;
  const bareWrites = await measure(async () => {
    const { rows } = await pool.query<{ id: string; epoch: string }>({
      name: 'bench_bare_hand_back',
      text: `with ended as (
               update pool.agent_leases set ended_at = statement_timestamp(), end_reason = 'released'
               where id = $1 and epoch = $2 and ended_at is null
               returning agent_id, slot_no)
             insert into pool.agent_leases (id, agent_id, slot_no, work_type, work_id, project_id, acquired_at, expires_at)
             select $3, agent_id, slot_no, 'task', 'bench', 'prj_bench', statement_timestamp(), statement_timestamp() + interval '30 seconds'
             from ended
             returning id, epoch`,
      values: [current.id, current.epoch, `lse_bare_${serial++}`],
    });
    current = { id: rows[0]!.id, epoch: Number(rows[0]!.epoch) };
  });
  await repository.releaseLease(current.id, current.epoch);
  await pool.query('create table bench_inserts (id bigserial primary key, at timestamptz not null)');
  const insertOne = () => pool.query({ name: 'bench_one_insert', text: 'insert into bench_inserts (at) values (statement_timestamp())' });
  const oneInsert = await measure(async () => void (await insertOne()));
  // What the commit's WAL flush costs a statement: the same insert, not waiting for it.
  await pool.query('set synchronous_commit = off');
  const oneInsertAsync = await measure(async () => void (await insertOne()));
  await pool.query('set synchronous_commit = on');
  // The same hand-back on another table design (see slot-row-sketch.ts). Its tables get statistics
  // from a first batch of cycles before it is measured, as the pool's have from the cycles above;
  // on empty tables' statistics the lease log is read by a sequential scan.
  const sketchHandBack = await createSlotRowSketch(pool, slots);
  for (let index = 0; index < Math.min(cycles, 1_000); index++) await sketchHandBack();
  await pool.query('vacuum (analyze)');
  const slotRowSketch = await measure(sketchHandBack);
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

  lines.push(`\nPool repository on Postgres (${url.host}), one connection, no gRPC, one agent of ${slots} slots, ${cycles} cycles each\n`);
  lines.push('| acquire -> release cycle | per second | Postgres backend CPU µs per cycle |', '| --- | ---: | ---: |');
  lines.push(`| grant, then release (2 statements) | ${twoStatements.perSecond.toFixed(0)} | ${twoStatements.backendMicros.toFixed(0)} |`);
  lines.push(`| grant handing the last lease back (1 statement) | ${handedBack.perSecond.toFixed(0)} | ${handedBack.backendMicros.toFixed(0)} |`);
  lines.push(`| reference: its two writes alone (end the lease, insert the next on its slot; no search, no checks) | ${bareWrites.perSecond.toFixed(0)} | ${bareWrites.backendMicros.toFixed(0)} |`);
  lines.push(`| reference: one-row insert, primary key only | ${oneInsert.perSecond.toFixed(0)} | ${oneInsert.backendMicros.toFixed(0)} |`);
  lines.push(`| reference: the same insert, committed asynchronously (no wait for the WAL flush) | ${oneInsertAsync.perSecond.toFixed(0)} | ${oneInsertAsync.backendMicros.toFixed(0)} |`);
  lines.push(`| sketch: the hand-back on a table keeping the active lease on its slot row (slot-row-sketch.ts) | ${slotRowSketch.perSecond.toFixed(0)} | ${slotRowSketch.backendMicros.toFixed(0)} |\n`);
  lines.push('| grant run (same session) | planning ms | execution ms |', '| ---: | ---: | ---: |');
  for (const timing of timings) lines.push(`| ${timing.run} | ${timing.planningMs.toFixed(3)} | ${timing.executionMs.toFixed(3)} |`);
} finally {
  await admin.query(`drop database if exists ${databaseName} with (force)`);
  await admin.end();
}
console.log(lines.join('\n'));
