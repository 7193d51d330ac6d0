/**
 * Where one acquire -> release cycle spends its time, layer by layer, one worker at a time (no
 * contention, so each line is a latency, not a throughput): the Postgres round trip and commit that
 * bound any design, the pool's two hot statements straight through the repository, a gRPC call that
 * touches no database (health check) with and without kit's client middleware, and the full cycle
 * over gRPC to a pool in this process. `node cpu µs` is this process's CPU time per operation (client
 * and server together where both run here): on a shared, noisy machine it is steadier than time.
 *
 *   npx tsx bench/lease/lease-profile.ts
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres OPERATIONS=1000 npx tsx bench/lease/lease-profile.ts
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createChannel, createClient as createBareClient } from 'nice-grpc';
import { HealthDefinition } from 'nice-grpc-server-health';
import { createClient, createLogger } from '@actor/kit';
import { PoolServiceDefinition } from '@actor/proto/pool';
import { loadPoolConfig } from '../../services/pool/src/config.js';
import { startPool } from '../../services/pool/src/pool-server.js';

const baseUrl = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const operations = Number(process.env.OPERATIONS ?? 1_000);

interface Line {
  what: string;
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
  cpuMicros: number;
}

/** Runs `operation` `operations` times one after another, after a short warm-up. */
async function measure(what: string, operation: (index: number) => Promise<unknown>): Promise<Line> {
  for (let index = 0; index < 50; index++) await operation(-1 - index);
  const latencies: number[] = [];
  const cpuBefore = process.cpuUsage();
  const startedAt = performance.now();
  for (let index = 0; index < operations; index++) {
    const before = performance.now();
    await operation(index);
    latencies.push(performance.now() - before);
  }
  const elapsed = performance.now() - startedAt;
  const cpu = process.cpuUsage(cpuBefore);
  latencies.sort((left, right) => left - right);
  return {
    what,
    meanMs: elapsed / operations,
    p50Ms: latencies[Math.floor(operations / 2)]!,
    p99Ms: latencies[Math.min(operations - 1, Math.floor(operations * 0.99))]!,
    cpuMicros: (cpu.user + cpu.system) / operations,
  };
}

const admin = new pg.Client({ connectionString: baseUrl });
await admin.connect();
const databaseName = `actor_bench_profile_${randomBytes(4).toString('hex')}`;
await admin.query(`create database ${databaseName}`);
const url = new URL(baseUrl);
url.pathname = `/${databaseName}`;
const databaseUrl = url.toString();

const lines: Line[] = [];
try {
  // The floors: what any design pays per statement on this Postgres.
  const raw = new pg.Client({ connectionString: databaseUrl });
  await raw.connect();
  await raw.query('create table probe (id bigserial primary key, at timestamptz not null default now())');
  lines.push(await measure('postgres: select 1 (prepared)', () => raw.query({ name: 'ping', text: 'select 1' })));
  lines.push(
    await measure('postgres: insert + commit (synchronous_commit on)', () =>
      raw.query({ name: 'insert', text: 'insert into probe default values' }),
    ),
  );
  await raw.query('set synchronous_commit = off');
  lines.push(
    await measure('postgres: insert + commit (synchronous_commit off)', () =>
      raw.query({ name: 'insert', text: 'insert into probe default values' }),
    ),
  );
  await raw.end();

  const pool = await startPool({
    config: loadPoolConfig({ POOL_ADDR: '127.0.0.1:0', DATABASE_URL: databaseUrl }),
    logger: createLogger('pool', 'silent'),
  });
  try {
    const client = createClient(PoolServiceDefinition, pool.address);
    const { agent } = await client.createAgent({
      agent: { name: 'profile', agentType: 'profile', capabilities: ['*'], configurationJson: '{}', enabled: true, concurrency: 64 },
    });
    const spec = {
      workType: 'task',
      workId: 'profile',
      projectId: 'prj_bench',
      agentId: '',
      capability: '',
      agentType: 'profile',
      ttlMs: 30_000,
      requestId: '',
      wait: true,
      waitTimeoutMs: 60_000,
      releaseFirst: null,
    };

    const repository = pool.repository;
    lines.push(
      await measure('repository: grant + release (2 statements, no gRPC)', async () => {
        const granted = await repository.tryAcquire(spec, null);
        await repository.releaseLease(granted!.lease.id, granted!.lease.epoch);
      }),
    );

    const healthBare = createBareClient(HealthDefinition, createChannel(pool.address));
    lines.push(await measure('gRPC: health check, bare nice-grpc client', () => healthBare.check({ service: '' })));
    const healthKit = createClient(HealthDefinition, pool.address);
    lines.push(await measure('gRPC: health check, kit client (deadline + retry)', () => healthKit.check({ service: '' })));
    lines.push(await measure('gRPC: GetAgent (one indexed read)', () => client.getAgent({ id: agent!.id })));

    lines.push(
      await measure('gRPC: Acquire + Release (full cycle, pool in this process)', async (index) => {
        const { lease } = await client.acquire({ ...spec, releaseFirst: undefined, workId: `profile-${index}` });
        await client.release({ leaseId: lease!.id, epoch: lease!.epoch });
      }),
    );
  } finally {
    await pool.stop();
  }
} finally {
  await admin.query(`drop database if exists ${databaseName} with (force)`);
  await admin.end();
}

console.log(`\nOne acquire -> release cycle, layer by layer, one worker, ${operations} operations each (${url.host})\n`);
console.log('| what | mean ms | p50 ms | p99 ms | node cpu µs |');
console.log('| --- | ---: | ---: | ---: | ---: |');
for (const line of lines) {
  console.log(
    `| ${line.what} | ${line.meanMs.toFixed(3)} | ${line.p50Ms.toFixed(3)} | ${line.p99Ms.toFixed(3)} | ${line.cpuMicros.toFixed(0)} |`,
  );
}
process.exit(0);
