/**
 * End-to-end task throughput: the platform as six OS processes (as `npm start` runs it), demo
 * backends made instant, N tasks created over HTTP at a given concurrency, each polled to its end.
 * Prints tasks per second and create-to-finish latency percentiles per concurrency level.
 *
 *   npx tsx bench/task-throughput.ts                 # PGlite
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/task-throughput.ts
 *   TASKS=200 LEVELS=1,8,32 npx tsx bench/task-throughput.ts
 */
import { startTestPlatform } from '../test/support/test-platform.js';

const totalTasks = Number(process.env.TASKS ?? 60);
const levels = (process.env.LEVELS ?? '1,4,16').split(',').map(Number);

function percentile(sorted: number[], fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!;
}

const platform = await startTestPlatform({ EXECUTION_WORKERS: '16' });
const headers = { Authorization: `Bearer ${platform.token}`, 'Content-Type': 'application/json' };
try {
  // Instant demo backends: the benchmark measures the platform, not the simulated model latency.
  const agents = ((await (await fetch(`${platform.url}/api/v1/agents`, { headers })).json()) as { data: any[] }).data;
  for (const agent of agents) {
    await fetch(`${platform.url}/api/v1/agents/${agent.id}`, {
      method: 'PUT',
      headers,
      body: JSON.stringify({ ...agent, configuration: { latency_ms: 0, quality: 1 }, concurrency: 64 }),
    });
  }

  const runOne = async (index: number) => {
    const started = performance.now();
    const created = await fetch(`${platform.url}/v1/tasks`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ task: `Benchmark task ${index}: say hello`, mode: 'cheapest' }),
    });
    const { id } = (await created.json()) as { id: string };
    for (;;) {
      const task = (await (await fetch(`${platform.url}/v1/tasks/${id}`, { headers })).json()) as { state: string };
      if (['succeeded', 'failed', 'cancelled'].includes(task.state)) {
        return { ms: performance.now() - started, state: task.state };
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };

  const rows: string[] = [];
  for (const concurrency of levels) {
    const latencies: number[] = [];
    let failed = 0;
    let next = 0;
    const wallStart = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < totalTasks) {
          const index = next++;
          const result = await runOne(index);
          latencies.push(result.ms);
          if (result.state !== 'succeeded') failed += 1;
        }
      }),
    );
    const wallSeconds = (performance.now() - wallStart) / 1000;
    latencies.sort((a, b) => a - b);
    rows.push(
      [
        String(concurrency).padStart(11),
        String(totalTasks).padStart(6),
        String(failed).padStart(7),
        (totalTasks / wallSeconds).toFixed(1).padStart(8),
        percentile(latencies, 0.5).toFixed(0).padStart(8),
        percentile(latencies, 0.95).toFixed(0).padStart(8),
        percentile(latencies, 0.99).toFixed(0).padStart(8),
      ].join(' '),
    );
  }
  const database = process.env.DATABASE_URL ? 'postgres' : 'pglite';
  console.log(`\ntask throughput, end to end over HTTP (${database}, instant demo backends, worker + judge per task)`);
  console.log('concurrency  tasks  failed  tasks/s  p50 ms   p95 ms   p99 ms');
  for (const row of rows) console.log(row);
} finally {
  await platform.stop();
}
