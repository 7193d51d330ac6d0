/**
 * Reserve throughput and latency: one billing service (in this process, real gRPC on loopback) on the
 * machine's Postgres, in a fresh database this script creates and drops; the registry in-process.
 * At each concurrency level, N callers issue Reserve back to back for a fixed time after a short
 * warm-up. Every Reserve of a level charges one project's per-day counter and a per-task counter
 * (one task per caller), so the level measures the contended path budgets rely on: the row lock on
 * the (project, day) counter. Budgets are large enough that nothing is refused.
 *
 *   npx tsx bench/billing/reserve-benchmark.ts
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres LEVELS=1,16,64 SECONDS=10 npx tsx bench/billing/reserve-benchmark.ts
 */
import { availableParallelism, loadavg } from 'node:os';
import { createClient, createLogger } from '@actor/kit';
import { testDatabase } from '@actor/kit/testing';
import { BillingServiceDefinition } from '@actor/proto/billing';
import { loadRegistryConfig } from '../../services/registry/src/config.js';
import { startRegistry } from '../../services/registry/src/registry-server.js';
import { loadBillingConfig } from '../../services/billing/src/config.js';
import { startBilling } from '../../services/billing/src/billing-server.js';

// testDatabase() creates a fresh database next to DATABASE_URL's; drop() removes it.
process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/postgres';
const levels = (process.env.LEVELS ?? '1,16,64').split(',').map(Number);
const measureMs = Number(process.env.SECONDS ?? 10) * 1_000;
const warmUpMs = Number(process.env.WARM_UP_SECONDS ?? 2) * 1_000;

function percentile(sorted: number[], fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!;
}

const logger = createLogger('reserve-benchmark', 'warn');
const database = await testDatabase();
const databaseUrl = database.databaseUrl!;
let registry: Awaited<ReturnType<typeof startRegistry>> | undefined;
let billing: Awaited<ReturnType<typeof startBilling>> | undefined;
try {
  registry = await startRegistry({
    config: loadRegistryConfig({ REGISTRY_ADDR: '127.0.0.1:0', DATABASE_URL: databaseUrl }),
    secretKey: 'bench-key',
    logger,
  });
  billing = await startBilling({
    config: loadBillingConfig({ BILLING_ADDR: '127.0.0.1:0', REGISTRY_ADDR: registry.address, DATABASE_URL: databaseUrl }),
    logger,
  });
  const client = createClient(BillingServiceDefinition, billing.address, { deadlineMs: 30_000 });

  let sequence = 0;
  // Callers issue Reserve back to back until `until`; returns each call's latency in ms.
  const drive = async (concurrency: number, projectId: string, until: number) => {
    const latencies: number[] = [];
    let failed = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async (_, caller) => {
        while (performance.now() < until) {
          sequence += 1;
          const started = performance.now();
          try {
            await client.reserve({
              requestId: `bench_${sequence}`,
              projectId,
              taskId: `tsk_${caller}`,
              attemptId: `att_${sequence}`,
              amountMicroUsd: 10_000,
              perTaskLimitMicroUsd: 1_000_000_000_000,
              perDayLimitMicroUsd: 1_000_000_000_000,
            });
            latencies.push(performance.now() - started);
          } catch {
            failed += 1;
          }
        }
      }),
    );
    return { latencies, failed };
  };

  // The machine's state, to read the figures against: other work on a 2-core box moves them a lot.
  const sample = async (statement: string) => {
    const times: number[] = [];
    for (let index = 0; index < 200; index += 1) {
      const started = performance.now();
      await billing!.database.db.execute(statement);
      times.push(performance.now() - started);
    }
    times.sort((left, right) => left - right);
    return `p50 ${percentile(times, 0.5).toFixed(2)} ms, p99 ${percentile(times, 0.99).toFixed(2)} ms`;
  };
  await billing.database.db.execute('create table public.bench_commit_probe (value integer)');
  const roundTrip = await sample('select 1');
  const commit = await sample('insert into public.bench_commit_probe values (1)');

  const rows: string[] = [];
  for (const concurrency of levels) {
    const projectId = `prj_bench_${concurrency}`;
    await drive(concurrency, projectId, performance.now() + warmUpMs);
    const started = performance.now();
    const { latencies, failed } = await drive(concurrency, projectId, started + measureMs);
    const seconds = (performance.now() - started) / 1_000;
    latencies.sort((left, right) => left - right);
    rows.push(
      [
        String(concurrency).padStart(7),
        String(latencies.length).padStart(9),
        String(failed).padStart(6),
        (latencies.length / seconds).toFixed(0).padStart(14),
        percentile(latencies, 0.5).toFixed(2).padStart(8),
        percentile(latencies, 0.99).toFixed(2).padStart(8),
      ].join(' '),
    );
  }
  console.log(`Reserve on Postgres (${new URL(databaseUrl).host}), ${measureMs / 1_000} s per level after ${warmUpMs / 1_000} s warm-up`);
  console.log(`machine: load average ${loadavg()[0]!.toFixed(1)} on ${availableParallelism()} cores; select 1 ${roundTrip}; one-row insert commit ${commit}`);
  console.log(['callers', 'reserves', 'failed', 'reserves per s', 'p50 ms', 'p99 ms'].map((title, index) => title.padStart([7, 9, 6, 14, 8, 8][index]!)).join(' '));
  for (const row of rows) console.log(row);
} finally {
  await billing?.stop();
  await registry?.stop();
  await database.drop();
}
