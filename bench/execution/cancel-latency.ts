/**
 * Cancel latency across execution replicas: the five services in this process on Postgres, two
 * execution replicas on one database. Each task runs on the first replica (a slow demo agent); its
 * CancelTask goes to the second; the time from that call to the task's `end` event is measured.
 * Prints percentiles per cancel poll interval (EXECUTION_CANCEL_POLL_MS).
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/execution/cancel-latency.ts
 *   TASKS=20 POLLS=100,250,1000 DATABASE_URL=... npx tsx bench/execution/cancel-latency.ts
 */
import { createLogger } from '@actor/kit';
import { startInProcessPlatform, type InProcessPlatform } from '../../test/support/in-process-platform.js';

if (!process.env.DATABASE_URL) {
  console.error('two replicas share one database: set DATABASE_URL to a Postgres server');
  process.exit(1);
}
const tasks = Number(process.env.TASKS ?? 8);
const polls = (process.env.POLLS ?? '250,1000').split(',').map(Number);
const projectId = 'prj_bench_cancel';

function percentile(sorted: number[], fraction: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!;
}

async function untilEvent(platform: InProcessPlatform, taskId: string, kind: string): Promise<void> {
  const controller = new AbortController();
  try {
    for await (const { event } of platform.execution.watchTask({ taskId, projectId }, { signal: controller.signal })) {
      if (event!.kind === kind || event!.kind === 'end') return;
    }
  } finally {
    controller.abort();
  }
}

const rows: string[][] = [];
for (const pollMs of polls) {
  const platform = await startInProcessPlatform(createLogger('bench', 'silent'), {
    EXECUTION_CLAIM_TTL_MS: '60000',
    EXECUTION_CANCEL_POLL_MS: String(pollMs),
    EXECUTION_WORKERS: String(tasks),
  });
  try {
    await platform.configureAgents({ latency_ms: 600_000, stream_chunks: 600, quality: 1 }, 64);
    const created = [];
    for (let index = 0; index < tasks; index++) {
      const { task } = await platform.execution.createTask({ projectId, input: `Long essay ${index}` });
      created.push(task!.id);
    }
    await Promise.all(created.map((taskId) => untilEvent(platform, taskId, 'output')));
    // Started after every task is claimed: the second replica never runs them.
    const other = await platform.startExecutionReplica();
    const latencies = await Promise.all(
      created.map(async (taskId) => {
        const ended = untilEvent(platform, taskId, 'end');
        const started = performance.now();
        await other.cancelTask({ projectId, taskId, requestedBy: 'bench' });
        await ended;
        return performance.now() - started;
      }),
    );
    latencies.sort((left, right) => left - right);
    rows.push([
      String(pollMs),
      String(tasks),
      percentile(latencies, 0.5).toFixed(0),
      percentile(latencies, 0.95).toFixed(0),
      latencies[latencies.length - 1]!.toFixed(0),
    ]);
  } finally {
    await platform.stop();
  }
}

const header = ['cancel poll ms', 'tasks', 'p50 ms', 'p95 ms', 'max ms'];
const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
const line = (cells: string[]) => cells.map((cell, column) => cell.padStart(widths[column]!)).join('  ');
console.log(line(header));
for (const row of rows) console.log(line(row));
