/**
 * Lease throughput: acquire -> release cycles per second and acquire latency (p50/p99) against the pool
 * service (gRPC, on Postgres) with 1, 16 and 64 concurrent workers, the pool server running in its own
 * process (`node --import tsx services/pool/src/main.ts`, as the platform runs it, so client and server
 * do not share an event loop) and, for comparison, in this process; and in the same run
 * the job rate of graphile-worker doing the same claim-and-complete work (a task that completes at once)
 * with the same concurrency on the same Postgres. A fresh database is created for the run and dropped
 * afterwards.
 *
 *   npx tsx bench/lease/lease-benchmark.ts
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres SECONDS_PER_LEVEL=5 LEVELS=1,16,64 npx tsx bench/lease/lease-benchmark.ts
 *   POOL_PLACEMENT=process (or in-process; default both) npx tsx bench/lease/lease-benchmark.ts
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Logger, makeWorkerUtils, run, type Runner } from 'graphile-worker';
import { createClient, createLogger } from '@actor/kit';
import { PoolServiceDefinition } from '@actor/proto/pool';
import { loadPoolConfig } from '../../services/pool/src/config.js';
import { startPool } from '../../services/pool/src/pool-server.js';
import { freePort } from '../../scripts/platform.js';

const baseUrl = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const levels = (process.env.LEVELS ?? '1,16,64').split(',').map(Number);
const secondsPerLevel = Number(process.env.SECONDS_PER_LEVEL ?? 6);
const placements = (process.env.POOL_PLACEMENT ?? 'process,in-process').split(',') as Placement[];
type Placement = 'process' | 'in-process';

function percentile(sorted: number[], fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!;
}

async function adminQuery(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: baseUrl });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

interface Row {
  system: string;
  workers: number;
  completed: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
}

/** N workers, each acquiring a slot, releasing it at once, for the time given. */
async function benchPool(address: string, agentType: string, workers: number, system: string): Promise<Row> {
  const client = createClient(PoolServiceDefinition, address, { deadlineMs: 30_000 });
  const latencies: number[] = [];
  const stopAt = performance.now() + secondsPerLevel * 1000;
  let cycles = 0;
  const startedAt = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      for (let index = 0; performance.now() < stopAt; index++) {
        const before = performance.now();
        const { lease } = await client.acquire({
          workType: 'task',
          workId: `bench-${worker}-${index}`,
          projectId: 'prj_bench',
          agentType,
          ttlMs: 30_000,
          wait: true,
          waitTimeoutMs: 60_000,
        });
        latencies.push(performance.now() - before);
        await client.release({ leaseId: lease!.id, epoch: lease!.epoch });
        cycles++;
      }
    }),
  );
  const elapsedSeconds = (performance.now() - startedAt) / 1000;
  latencies.sort((left, right) => left - right);
  return {
    system,
    workers,
    completed: cycles,
    perSecond: cycles / elapsedSeconds,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
  };
}

/**
 * graphile-worker with `workers` concurrency working through a queue filled beforehand with jobs of a
 * task that completes at once, for the same time; the rate counts completed jobs.
 */
async function benchGraphileWorker(connectionString: string, workers: number): Promise<Row> {
  const taskName = `bench_noop_${workers}`;
  const utils = await makeWorkerUtils({ connectionString });
  // More jobs than can be done in the time given, enqueued in one statement through the SQL API.
  const jobs = Math.max(5_000, workers * 400);
  await utils.withPgClient((client) =>
    client.query(`select graphile_worker.add_job($1, '{}'::json) from generate_series(1, $2)`, [taskName, jobs]),
  );
  let completed = 0;
  let done: () => void = () => undefined;
  const allDone = new Promise<void>((resolve) => (done = resolve));
  // The workers start claiming as soon as run() starts them, so the clock starts before it.
  const startedAt = performance.now();
  const runner: Runner = await run({
    connectionString,
    concurrency: workers,
    maxPoolSize: 10,
    noHandleSignals: true,
    pollInterval: 1000,
    logger: new Logger(() => () => undefined),
    taskList: {
      [taskName]: async () => {
        completed++;
        if (completed === jobs) done();
      },
    },
  });
  await Promise.race([allDone, new Promise((resolve) => setTimeout(resolve, secondsPerLevel * 1000))]);
  const counted = completed;
  const elapsedSeconds = (performance.now() - startedAt) / 1000;
  await runner.stop();
  await utils.withPgClient((client) => client.query(`delete from graphile_worker._private_jobs`));
  await utils.release();
  return {
    system: 'graphile-worker 0.16.6',
    workers,
    completed: counted,
    perSecond: counted / elapsedSeconds,
    p50Ms: Number.NaN,
    p99Ms: Number.NaN,
  };
}

interface RunningPool {
  address: string;
  stop(): Promise<void>;
}

async function startInProcess(databaseUrl: string): Promise<RunningPool> {
  const pool = await startPool({
    config: loadPoolConfig({ POOL_ADDR: '127.0.0.1:0', DATABASE_URL: databaseUrl }),
    logger: createLogger('pool', 'silent'),
  });
  return { address: pool.address, stop: () => pool.stop() };
}

/** The pool's own main.ts in a child process; ready once it answers a call. */
async function spawnPool(databaseUrl: string): Promise<RunningPool> {
  const address = `127.0.0.1:${await freePort()}`;
  const entryPoint = fileURLToPath(new URL('../../services/pool/src/main.ts', import.meta.url));
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', entryPoint], {
    env: { ...process.env, POOL_ADDR: address, DATABASE_URL: databaseUrl, POOL_DATABASE_URL: '', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const client = createClient(PoolServiceDefinition, address, { deadlineMs: 1_000 });
  for (let attempt = 0; ; attempt++) {
    try {
      await client.listAgents({ agentType: '' });
      break;
    } catch (error) {
      if (attempt > 150 || child.exitCode !== null) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  return {
    address,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

function printTable(): void {
  const format = (value: number, digits = 2) => (Number.isNaN(value) ? 'n/a' : value.toFixed(digits));
  console.log(`\nLease claim-and-complete on Postgres (${new URL(baseUrl).host}), ${secondsPerLevel} s per level\n`);
  console.log('| system | workers | completed | per second | acquire p50 ms | acquire p99 ms |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const row of rows) {
    console.log(
      `| ${row.system} | ${row.workers} | ${row.completed} | ${format(row.perSecond, 0)} | ${format(row.p50Ms)} | ${format(row.p99Ms)} |`,
    );
  }
  console.log(
    '\nactor pool: one cycle = Acquire (wait, fencing epoch, database-clock deadline) + Release over gRPC to the pool' +
      '\nservice, in its own process or in this one. graphile-worker: one job = claim + run a task that completes at once + complete,' +
      '\nas a library talking to Postgres directly (no network hop, no fencing, reclaim after its 4 h lock timeout).',
  );
}

const databaseName = `actor_bench_lease_${randomBytes(4).toString('hex')}`;
await adminQuery(`create database ${databaseName}`);
const url = new URL(baseUrl);
url.pathname = `/${databaseName}`;
const databaseUrl = url.toString();

const rows: Row[] = [];
try {
  for (const placement of placements) {
    const pool = placement === 'process' ? await spawnPool(databaseUrl) : await startInProcess(databaseUrl);
    try {
      const agentType = `bench-agent-${placement}`;
      const admin = createClient(PoolServiceDefinition, pool.address);
      // One slot per worker at the highest level: every acquire finds a free slot, as every claim
      // finds a queued job.
      const { agent } = await admin.createAgent({
        agent: {
          name: `bench-${placement}`,
          agentType,
          capabilities: ['*'],
          configurationJson: '{}',
          enabled: true,
          concurrency: Math.max(...levels),
        },
      });
      const system = `actor pool (gRPC, ${placement === 'process' ? 'own process' : 'in this process'})`;
      await benchPool(pool.address, agentType, 4, system).catch(() => undefined); // warm-up
      for (const workers of levels) rows.push(await benchPool(pool.address, agentType, workers, system));
      // The next placement works with an agent of its own.
      await admin.deleteAgent({ id: agent!.id });
    } finally {
      await pool.stop();
    }
  }

  const migrateUtils = await makeWorkerUtils({ connectionString: databaseUrl });
  await migrateUtils.migrate();
  await migrateUtils.release();
  for (const workers of levels) rows.push(await benchGraphileWorker(databaseUrl, workers));
  printTable();
} finally {
  // Dropping the database ends any connection a library left idle; that is expected here.
  process.on('uncaughtException', (error: Error & { code?: string }) => {
    if (error.code !== '57P01') throw error;
  });
  await adminQuery(`drop database if exists ${databaseName} with (force)`);
}

process.exit(0);
