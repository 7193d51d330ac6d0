/**
 * Lease throughput: acquire -> release cycles per second and acquire latency (p50/p99) against the pool
 * service (gRPC, on Postgres) with 1, 16 and 64 concurrent workers: over one LeaseSession stream, as
 * execution calls it, the same with each lease handed back by the worker's next Acquire
 * (release_first: one operation per cycle), and over unary calls, the pool server running in its own
 * process (`node --import tsx services/pool/src/main.ts`, as the platform runs it, so client and server
 * do not share an event loop), once as configured by default and once with
 * POOL_RELEASE_SYNCHRONOUS_COMMIT=true (a disk sync per release too, as graphile-worker does per
 * completion), and in this process; and in the same run the job rate of graphile-worker doing the
 * same claim-and-complete work (a task that completes at once) with the same concurrency and the
 * same number of Postgres connections on the same Postgres. Levels are interleaved (every system at
 * 1 worker, then every system at 16, ...) so that a shared machine's load drifting over the run
 * skews no system against another. A fresh database is created for the run and dropped afterwards.
 *
 *   npx tsx bench/lease/lease-benchmark.ts
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres SECONDS_PER_LEVEL=5 LEVELS=1,16,64 npx tsx bench/lease/lease-benchmark.ts
 *   POOL_PLACEMENT=floor,floor-grant,session,session-handback,process,process-sync-release,in-process (the default; any subset; session = lease stream to a pool in its own process, session-handback = the same with each release riding on the next Acquire) npx tsx bench/lease/lease-benchmark.ts
 *   floor: the design's floor (see session-transport.ts): the same client, stream and session server code
 *     in another process, each Acquire answered after one synchronously committed insert and no lease
 *     logic; at 1 worker no pool of this shape (a service over gRPC in front of Postgres) can beat it
 *   floor-grant: the floor's server running the pool's own grant (its repository's hand-back statement, batched
 *     as the pool batches it) and nothing else of the pool: what lies between floor and pool is split into
 *     the statement's share (floor-grant less floor) and the pool service code's (the pool less floor-grant)
 *   POOL_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/pool-prof': extra node flags for the pool's own process (and the floor's server)
 *   ROUNDS=5 LEVELS=1: runs every level that many times over (interleaved as above) and adds a summary:
 *     per system and level the median rate, its range, and the median of each round's ratio to graphile-worker
 *   PG_CONNECTIONS=10 (the default): Postgres connections of the pool (POOL_DATABASE_MAX_CONNECTIONS) and of graphile-worker (maxPoolSize)
 */
import { execSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Logger, makeWorkerUtils, run, type Runner } from 'graphile-worker';
import { STOP_WITH_LAUNCHER_VARIABLE, createClient, createLogger } from '@actor/kit';
import { PoolServiceDefinition, type Lease } from '@actor/proto/pool';
import { loadPoolConfig } from '../../services/pool/src/config.js';
import { LeaseSessionClient } from '../../services/pool/src/client/lease-session-client.js';
import { startPool } from '../../services/pool/src/pool-server.js';
import { freePort } from '../../scripts/platform.js';

const baseUrl = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const levels = (process.env.LEVELS ?? '1,16,64').split(',').map(Number);
const secondsPerLevel = Number(process.env.SECONDS_PER_LEVEL ?? 6);
const placements = (process.env.POOL_PLACEMENT ?? 'floor,floor-grant,session,session-handback,process,process-sync-release,in-process').split(',') as Placement[];
type Placement = 'session' | 'session-handback' | 'process' | 'process-sync-release' | 'in-process' | 'floor' | 'floor-grant';
const pgConnections = Number(process.env.PG_CONNECTIONS ?? 10);
const rounds = Number(process.env.ROUNDS ?? 1);

const systemNames: Record<Placement, string> = {
  session: 'actor pool (lease session stream, own process)',
  'session-handback': 'actor pool (lease session, each release handed to the next Acquire)',
  process: 'actor pool (gRPC, own process)',
  'process-sync-release': 'actor pool (gRPC, own process, synchronous release)',
  'in-process': 'actor pool (gRPC, in this process)',
  floor: 'floor: lease session to a server that makes one durable insert per Acquire, no lease logic',
  'floor-grant': "floor's server running the pool's grant statement (hand-back) and nothing else of the pool",
};

function percentile(sorted: number[], fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!;
}

/** Runs one statement on its own connection: to the server's default database unless told another. */
async function adminQuery(text: string, connectionString = baseUrl): Promise<void> {
  const client = new pg.Client({ connectionString });
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
  /** Which run over the levels it came from (ROUNDS), from 1. */
  round?: number;
  completed: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  cpu: CpuSpent;
}

/**
 * CPU time (ms) spent during a measurement: by this process (the workers; for the in-process pool
 * and graphile-worker also the server or library), by the pool's own process when it has one, and
 * by the Postgres processes working for it (see postgresProcessCpu). On a shared machine the rate
 * follows whatever else runs; the CPU spent per cycle does not, and on 2 cores it bounds the rate.
 */
interface CpuSpent {
  benchMs: number;
  poolProcessMs: number;
  postgresMs: number;
}

const clockTicksPerSecond = (() => {
  try {
    return Number(execSync('getconf CLK_TCK').toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** utime + stime of a process in ms, from /proc (0 where there is no such process or no /proc). */
function processCpuMs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicksPerSecond;
  } catch {
    return 0;
  }
}

/**
 * CPU time of the Postgres processes that work for the benchmark, by pid: the backends connected to
 * its database and the server's own processes (WAL writer, checkpointer, background writer...), which
 * do part of the work a commit asks for (with asynchronous commit the WAL writer flushes what a
 * backend would have). Backends of other databases (a test run beside it) do not count. Postgres must
 * run on this machine; on another one this counts nothing.
 */
let statsClient: pg.Client | undefined;
async function postgresProcessCpu(): Promise<Map<number, number>> {
  const { rows } = await statsClient!.query<{ pid: number }>(
    `select pid from pg_stat_activity where datname = $1 or backend_type <> 'client backend'`,
    [databaseName],
  );
  return new Map(rows.map((row) => [row.pid, processCpuMs(row.pid)]));
}

/**
 * VACUUM (ANALYZE) of the benchmark database, before every measurement: each system starts from tables
 * as autovacuum would keep them. Without it, on a server with autovacuum off (this project's machines),
 * the dead rows every earlier measurement left behind slow the later ones: graphile-worker's jobs
 * (deleted as they complete) fell from 414 to 229 jobs/s over five rounds of 1 worker, its Postgres CPU per
 * job rising from 0.78 to 2.57 ms.
 */
async function vacuum(databaseUrl: string): Promise<void> {
  await adminQuery('vacuum (analyze)', databaseUrl);
}

/** Starts counting CPU time; the returned function stops and tells what was spent. */
async function startCpuMeter(poolPid?: number): Promise<() => Promise<CpuSpent>> {
  const bench = process.cpuUsage();
  const pool = poolPid ? processCpuMs(poolPid) : 0;
  const postgres = await postgresProcessCpu();
  return async () => {
    const benchSpent = process.cpuUsage(bench);
    let postgresMs = 0;
    // A backend that connected during the measurement counts from zero.
    for (const [pid, cpuMs] of await postgresProcessCpu()) postgresMs += cpuMs - (postgres.get(pid) ?? 0);
    return {
      benchMs: (benchSpent.user + benchSpent.system) / 1000,
      poolProcessMs: poolPid ? processCpuMs(poolPid) - pool : 0,
      postgresMs,
    };
  };
}

/**
 * N workers, each acquiring a slot, releasing it at once, for the time given: through the unary
 * Acquire and Release calls, or as operations on one LeaseSession stream (how execution calls them),
 * or on that stream with each lease handed back by the worker's next Acquire (release_first: one
 * operation and one statement per cycle, as a worker that goes from one item straight to the next
 * would call it). Every cycle still grants one lease and ends one.
 */
async function benchPool(pool: RunningPool, agentType: string, workers: number, system: string, transport: Transport): Promise<Row> {
  const unary = createClient(PoolServiceDefinition, pool.address, { deadlineMs: 30_000 });
  const client = transport === 'unary' ? unary : new LeaseSessionClient(unary, { deadlineMs: 30_000 });
  const stopMeter = await startCpuMeter(pool.pid);
  const latencies: number[] = [];
  const stopAt = performance.now() + secondsPerLevel * 1000;
  let cycles = 0;
  const startedAt = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      let held: Lease | undefined;
      for (let index = 0; performance.now() < stopAt; index++) {
        const before = performance.now();
        const { lease, released } = await client.acquire({
          workType: 'task',
          workId: `bench-${worker}-${index}`,
          projectId: 'prj_bench',
          agentType,
          ttlMs: 30_000,
          wait: true,
          waitTimeoutMs: 60_000,
          releaseFirst: held && { leaseId: held.id, epoch: held.epoch },
        });
        latencies.push(performance.now() - before);
        if (held) {
          if (!released) throw new Error(`lease ${held.id} was not handed back`);
          cycles++;
        }
        if (transport === 'session-handback') {
          held = lease;
        } else {
          await client.release({ leaseId: lease!.id, epoch: lease!.epoch });
          cycles++;
        }
      }
      if (held) {
        await client.release({ leaseId: held.id, epoch: held.epoch });
        cycles++;
      }
    }),
  );
  const elapsedSeconds = (performance.now() - startedAt) / 1000;
  const cpu = await stopMeter();
  if (client instanceof LeaseSessionClient) client.close();
  latencies.sort((left, right) => left - right);
  return {
    system,
    workers,
    completed: cycles,
    perSecond: cycles / elapsedSeconds,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    cpu,
  };
}

/**
 * graphile-worker with `workers` concurrency working through a queue filled beforehand with jobs of a
 * task that completes at once, for the same time; the rate counts completed jobs.
 */
async function benchGraphileWorker(connectionString: string, workers: number): Promise<Row> {
  const taskName = `bench_noop_${workers}`;
  const utils = await makeWorkerUtils({ connectionString });
  // More jobs than can be done in the time given (it has done ~3,500 a second here), enqueued in one
  // statement through the SQL API; running dry early would understate its rate. add_jobs takes them
  // all in one call (36,000 in 0.36 s here); add_job once per job took 5.5 s for as many, and a run with
  // 20 s levels (120,000 jobs) was still enqueueing after 13 minutes. Both make the same jobs (default
  // queue, priority and attempts).
  const jobs = Math.max(5_000, workers * 400, secondsPerLevel * 6_000);
  await utils.withPgClient((client) =>
    client.query(
      `select count(*) from graphile_worker.add_jobs((
         select array_agg(row($1::text, '{}'::json, null, null, null, null, null, null)::graphile_worker.job_spec)
         from generate_series(1, $2)))`,
      [taskName, jobs],
    ),
  );
  let completed = 0;
  let done: () => void = () => undefined;
  const allDone = new Promise<void>((resolve) => (done = resolve));
  // The workers start claiming as soon as run() starts them, so the clock starts before it.
  const stopMeter = await startCpuMeter();
  const startedAt = performance.now();
  const runner: Runner = await run({
    connectionString,
    concurrency: workers,
    maxPoolSize: pgConnections,
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
  const cpu = await stopMeter();
  await runner.stop();
  await utils.withPgClient((client) => client.query(`delete from graphile_worker._private_jobs`));
  await utils.release();
  return {
    system: graphileSystem,
    workers,
    completed: counted,
    perSecond: counted / elapsedSeconds,
    p50Ms: Number.NaN,
    p99Ms: Number.NaN,
    cpu,
  };
}

const graphileSystem = 'graphile-worker 0.16.6';

type Transport = 'unary' | 'session' | 'session-handback';
const transportOf = (placement: Placement): Transport =>
  placement === 'floor' || placement === 'floor-grant' ? 'session-handback' : placement === 'session' || placement === 'session-handback' ? placement : 'unary';

interface RunningPool {
  address: string;
  /** The pool's own process, when it runs in one. */
  pid?: number;
  stop(): Promise<void>;
}

async function startInProcess(databaseUrl: string): Promise<RunningPool> {
  const pool = await startPool({
    config: loadPoolConfig({
      POOL_ADDR: '127.0.0.1:0',
      DATABASE_URL: databaseUrl,
      POOL_DATABASE_MAX_CONNECTIONS: String(pgConnections),
    }),
    logger: createLogger('pool', 'silent'),
  });
  return { address: pool.address, stop: () => pool.stop() };
}

/** A pool (or the floor's server) in a child process: stopped by SIGTERM, done once it has exited. */
function childPool(address: string, child: ChildProcess, exited: Promise<void>): RunningPool {
  return {
    address,
    pid: child.pid,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * session-transport.ts's server with the benchmark's database (see POOL_PLACEMENT=floor); with `grant`,
 * running the pool's grant statement for an agent of `agentType` (POOL_PLACEMENT=floor-grant). Ready once
 * it says so.
 */
async function spawnFloor(databaseUrl: string, grant?: { agentType: string }): Promise<RunningPool> {
  const address = `127.0.0.1:${await freePort()}`;
  const entryPoint = fileURLToPath(new URL('./session-transport.ts', import.meta.url));
  const nodeArgs = (process.env.POOL_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const mode = grant ? ['grant'] : [];
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', entryPoint, 'server', address, databaseUrl, ...mode], {
    env: {
      ...process.env,
      PG_CONNECTIONS: String(pgConnections),
      FLOOR_AGENT_TYPE: grant?.agentType ?? '',
      FLOOR_SLOTS: String(Math.max(...levels)),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`the floor server exited with ${code}`)));
  });
  return childPool(address, child, exited);
}

/** The pool's own main.ts in a child process; ready once it answers a call. */
async function spawnPool(databaseUrl: string, settings: Record<string, string> = {}): Promise<RunningPool> {
  const address = `127.0.0.1:${await freePort()}`;
  const entryPoint = fileURLToPath(new URL('../../services/pool/src/main.ts', import.meta.url));
  // POOL_NODE_ARGS: extra node flags for the pool process, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`.
  const nodeArgs = (process.env.POOL_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', entryPoint], {
    env: {
      ...process.env,
      POOL_ADDR: address,
      DATABASE_URL: databaseUrl,
      POOL_DATABASE_URL: '',
      POOL_DATABASE_MAX_CONNECTIONS: String(pgConnections),
      LOG_LEVEL: 'warn',
      // Stops when this process's end closes its stdin, even if this process is killed (a timeout).
      [STOP_WITH_LAUNCHER_VARIABLE]: '1',
      ...settings,
    },
    stdio: ['pipe', 'inherit', 'inherit'],
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
  return childPool(address, child, exited);
}

function printTable(): void {
  const format = (value: number, digits = 2) => (Number.isNaN(value) ? 'n/a' : value.toFixed(digits));
  console.log(
    `\nLease claim-and-complete on Postgres (${new URL(baseUrl).host}), ${secondsPerLevel} s per level, ` +
      `${pgConnections} Postgres connections per system\n`,
  );
  console.log(
    '| system | workers | completed | per second | acquire p50 ms | acquire p99 ms | cpu ms/cycle: bench process | pool process | postgres | total |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const row of rows) {
    const perCycle = (ms: number) => format(row.completed > 0 ? ms / row.completed : Number.NaN);
    const { benchMs, poolProcessMs, postgresMs } = row.cpu;
    console.log(
      `| ${row.system}${rounds > 1 ? ` (round ${row.round})` : ''} | ${row.workers} | ${row.completed} | ${format(row.perSecond, 0)} | ${format(row.p50Ms)} | ${format(row.p99Ms)} ` +
        `| ${perCycle(benchMs)} | ${perCycle(poolProcessMs)} | ${perCycle(postgresMs)} | ${perCycle(benchMs + poolProcessMs + postgresMs)} |`,
    );
  }
  console.log(
    '\nactor pool: one cycle = Acquire (wait, fencing epoch, database-clock deadline) + Release to the pool service,' +
      '\nas two operations on one LeaseSession stream (how execution calls it) or as two unary gRPC calls, or, for a' +
      '\nworker going from one item to the next, as one: each Acquire hands the last lease back (release_first), so a' +
      '\ncycle is one operation and one statement that ends a lease and grants one; the pool' +
      '\nin its own process or in this one; a grant and a release statement: the grant commits synchronously (waits' +
      '\nfor the WAL flush), the release by default does not (POOL_RELEASE_SYNCHRONOUS_COMMIT); grants (of one want)' +
      '\nand releases that arrive while POOL_BATCH_AFTER_IN_FLIGHT statements of their kind run go out together.' +
      '\ngraphile-worker: one job = claim + run a task that completes at once + complete, as a library talking to' +
      '\nPostgres directly (no network hop, no fencing, reclaim after its 4 h lock timeout); two statements, both' +
      '\ncommitting synchronously (the server default it keeps).' +
      '\nfloor: what the shape itself costs (a pool service over gRPC in front of Postgres): the same client, stream' +
      '\nand session server code in another process (the pool process column), each Acquire answered after one' +
      '\ninsert committed synchronously, no lease logic; at 1 worker no pool of this shape can beat it.' +
      "\nfloor's server running the pool's grant: the same, each Acquire running the pool's hand-back statement through" +
      '\nits repository instead of the insert, and nothing else of the pool (no validation, queue, or mapping).' +
      '\npostgres cpu: the backends of the benchmark database and the server processes (WAL writer, checkpointer...).',
  );
}

/**
 * ROUNDS > 1: per system and level, the median rate over the rounds, the slowest and fastest round, and
 * the median of the per-round ratios to graphile-worker at that level (each ratio taken within one
 * round, so a machine that drifts between rounds skews no system against another).
 */
function printRoundsSummary(order: string[]): void {
  const median = (values: number[]) => {
    const sorted = [...values].sort((left, right) => left - right);
    const middle = Math.floor(sorted.length / 2);
    return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
  };
  console.log(`\nOver ${rounds} rounds\n`);
  console.log('| system | workers | median per second | slowest round | fastest round | median ratio to graphile-worker |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const system of order) {
    for (const workers of levels) {
      const own = rows.filter((row) => row.system === system && row.workers === workers);
      if (own.length === 0) continue;
      const ratios = own.map((row) => {
        const peer = rows.find((other) => other.system === graphileSystem && other.workers === workers && other.round === row.round);
        return peer && peer.perSecond > 0 ? row.perSecond / peer.perSecond : Number.NaN;
      });
      const rates = own.map((row) => row.perSecond);
      console.log(
        `| ${system} | ${workers} | ${median(rates).toFixed(0)} | ${Math.min(...rates).toFixed(0)} | ${Math.max(...rates).toFixed(0)} ` +
          `| ${median(ratios).toFixed(2)} |`,
      );
    }
  }
}

const databaseName = `actor_bench_lease_${randomBytes(4).toString('hex')}`;
await adminQuery(`create database ${databaseName}`);
const url = new URL(baseUrl);
url.pathname = `/${databaseName}`;
const databaseUrl = url.toString();

statsClient = new pg.Client({ connectionString: baseUrl });
await statsClient.connect();
const rows: Row[] = [];
const running: Array<{ placement: Placement; pool: RunningPool; agentType: string }> = [];
try {
  for (const placement of placements) {
    const pool =
      placement === 'in-process'
        ? await startInProcess(databaseUrl)
        : placement === 'floor' || placement === 'floor-grant'
          ? await spawnFloor(databaseUrl, placement === 'floor-grant' ? { agentType: `bench-agent-${placement}` } : undefined)
          : await spawnPool(databaseUrl, placement === 'process-sync-release' ? { POOL_RELEASE_SYNCHRONOUS_COMMIT: 'true' } : {});
    running.push({ placement, pool, agentType: `bench-agent-${placement}` });
    if (placement === 'floor' || placement === 'floor-grant') {
      await benchPool(pool, `bench-agent-${placement}`, 4, systemNames[placement], transportOf(placement)); // warm-up
      continue;
    }
    // An agent per system, with one slot per worker at the highest level: every acquire finds a free
    // slot, as every claim finds a queued job.
    await createClient(PoolServiceDefinition, pool.address).createAgent({
      agent: {
        name: `bench-${placement}`,
        agentType: `bench-agent-${placement}`,
        capabilities: ['*'],
        configurationJson: '{}',
        enabled: true,
        concurrency: Math.max(...levels),
      },
    });
    await benchPool(pool, `bench-agent-${placement}`, 4, systemNames[placement], transportOf(placement)).catch(() => undefined); // warm-up
  }
  const migrateUtils = await makeWorkerUtils({ connectionString: databaseUrl });
  await migrateUtils.migrate();
  await migrateUtils.release();

  for (let round = 1; round <= rounds; round++) {
    for (const workers of levels) {
      for (const { placement, pool, agentType } of running) {
        await vacuum(databaseUrl);
        rows.push({ ...(await benchPool(pool, agentType, workers, systemNames[placement], transportOf(placement))), round });
      }
      await vacuum(databaseUrl);
      rows.push({ ...(await benchGraphileWorker(databaseUrl, workers)), round });
    }
  }
  const order = [...placements.map((placement) => systemNames[placement]), graphileSystem];
  rows.sort(
    (left, right) =>
      order.indexOf(left.system) - order.indexOf(right.system) || left.workers - right.workers || left.round! - right.round!,
  );
  printTable();
  if (rounds > 1) printRoundsSummary(order);
} finally {
  for (const { pool } of running) await pool.stop();
  await statsClient.end();
  // Dropping the database ends any connection a library left idle; that is expected here.
  process.on('uncaughtException', (error: Error & { code?: string }) => {
    if (error.code !== '57P01') throw error;
  });
  await adminQuery(`drop database if exists ${databaseName} with (force)`);
}

process.exit(0);
