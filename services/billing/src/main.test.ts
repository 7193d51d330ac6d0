import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, createLogger, remoteError, sleep } from '@actor/kit';
import { testDatabase } from '@actor/kit/testing';
import { BillingServiceDefinition, type ReserveRequest } from '@actor/proto/billing';
import { loadRegistryConfig } from '../../registry/src/config.js';
import { startRegistry } from '../../registry/src/registry-server.js';
import { freePort } from '../../../scripts/platform.js';

type BillingClient = ReturnType<typeof createClient<typeof BillingServiceDefinition>>;

const logger = createLogger('billing-processes-test', 'silent');
const repositoryRoot = fileURLToPath(new URL('../../../', import.meta.url));
const tsxCli = fileURLToPath(new URL('../../../node_modules/tsx/dist/cli.mjs', import.meta.url));
const billingMain = fileURLToPath(new URL('./main.ts', import.meta.url));

interface BillingProcess {
  address: string;
  child: ChildProcess;
  output: string[];
}

/** Starts services/billing/src/main.ts as its own OS process, as `npm start` does. */
async function spawnBilling(environment: Record<string, string>): Promise<BillingProcess> {
  const address = `127.0.0.1:${await freePort()}`;
  const inherited = { ...process.env };
  // The process must use the test database, not an override from the developer's shell.
  delete inherited.BILLING_DATABASE_URL;
  const child = spawn(process.execPath, [tsxCli, billingMain], {
    cwd: repositoryRoot,
    env: { ...inherited, ...environment, BILLING_ADDR: address },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  for (const stream of [child.stdout, child.stderr]) {
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => output.push(chunk));
  }
  return { address, child, output };
}

/** Waits until the process answers a call, or fails with its output when it exits or never answers. */
async function waitUntilServing(billing: BillingProcess, timeoutMs: number): Promise<void> {
  const client = createClient(BillingServiceDefinition, billing.address, { deadlineMs: 2_000 });
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (billing.child.exitCode !== null) break;
    try {
      await client.getSpend({ projectId: 'prj_probe' }, { retryMaxAttempts: 0 });
      return;
    } catch {
      await sleep(200);
    }
  }
  throw new Error(`billing on ${billing.address} did not start:\n${billing.output.join('')}`);
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

// Three OS processes, one Postgres database: the budget is held by row locks in the database, not by
// anything a process keeps in memory. PGlite is one process's database, so this runs on Postgres only.
describe.runIf(process.env.DATABASE_URL)('billing as three OS processes sharing one Postgres', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let registry: Awaited<ReturnType<typeof startRegistry>>;
  const processes: BillingProcess[] = [];
  let clients: BillingClient[] = [];

  beforeAll(async () => {
    database = await testDatabase();
    registry = await startRegistry({
      config: loadRegistryConfig({ REGISTRY_ADDR: '127.0.0.1:0', DATABASE_URL: database.databaseUrl, ACTOR_DATA_DIR: database.dataDir }),
      secretKey: 'test-key',
      logger,
    });
    const environment = {
      DATABASE_URL: database.databaseUrl!,
      REGISTRY_ADDR: registry.address,
      LOG_LEVEL: 'warn',
      // No reservation here expires; the sweeper stays out of the way.
      BILLING_SWEEP_INTERVAL_MS: '3600000',
    };
    // All three migrate the fresh database at once: kit serialises that with an advisory lock.
    processes.push(...(await Promise.all([0, 1, 2].map(() => spawnBilling(environment)))));
    await Promise.all(processes.map((billing) => waitUntilServing(billing, 90_000)));
    // A thousand calls queue behind one row lock: correctness is asserted here, not latency.
    clients = processes.map((billing) => createClient(BillingServiceDefinition, billing.address, { deadlineMs: 120_000 }));
  }, 150_000);

  afterAll(async () => {
    await Promise.all(processes.map((billing) => stopProcess(billing.child)));
    await registry?.stop();
    await database?.drop();
  }, 60_000);

  // 1,000 Reserves of 1 to 50 cents, dealt round-robin to the three processes, all in flight at once.
  async function reserveConcurrently(request: (index: number) => Partial<ReserveRequest>) {
    const amounts = Array.from({ length: 1_000 }, () => 10_000 * (1 + Math.floor(Math.random() * 50)));
    const results = await Promise.allSettled(
      amounts.map((amountMicroUsd, index) =>
        clients[index % clients.length]!.reserve({ requestId: `req_${index}_${Math.random()}`, attemptId: `att_${index}`, ...request(index), amountMicroUsd }),
      ),
    );
    const admitted: number[] = [];
    const refused: number[] = [];
    const refusalCodes = new Set<string>();
    for (const [index, result] of results.entries()) {
      if (result.status === 'fulfilled') {
        admitted.push(amounts[index]!);
      } else {
        refused.push(amounts[index]!);
        refusalCodes.add(remoteError(result.reason)?.code ?? String(result.reason));
      }
    }
    return { admitted, refused, refusalCodes, total: admitted.reduce((sum, amount) => sum + amount, 0) };
  }

  it('never admits more than a $5.00 per-day limit, and refuses only with actor.budget.exceeded', async () => {
    const limit = 5_000_000;
    const { admitted, refused, refusalCodes, total } = await reserveConcurrently((index) => ({
      projectId: 'prj_race_day',
      taskId: `tsk_${index}`,
      perDayLimitMicroUsd: limit,
    }));
    expect(total).toBeLessThanOrEqual(limit);
    expect(admitted.length).toBeGreaterThan(0);
    expect(refused.length).toBeGreaterThan(0);
    expect([...refusalCodes]).toEqual(['actor.budget.exceeded']);
    // Holds only grow here, so every refusal saw less room than is left now: nothing was refused
    // that would have fit.
    expect(limit - total).toBeLessThan(Math.min(...refused));
    // Every process reads the same counter.
    for (const client of clients) {
      expect(await client.getSpend({ projectId: 'prj_race_day' })).toMatchObject({ spentMicroUsd: 0, reservedMicroUsd: total });
    }
  }, 180_000);

  it("never admits more than a $5.00 per-task limit across one task's attempts", async () => {
    const limit = 5_000_000;
    const { admitted, refused, refusalCodes, total } = await reserveConcurrently(() => ({
      projectId: 'prj_race_task',
      taskId: 'tsk_race',
      perTaskLimitMicroUsd: limit,
    }));
    expect(total).toBeLessThanOrEqual(limit);
    expect(admitted.length).toBeGreaterThan(0);
    expect(refused.length).toBeGreaterThan(0);
    expect([...refusalCodes]).toEqual(['actor.budget.exceeded']);
    expect(limit - total).toBeLessThan(Math.min(...refused));
    for (const client of clients) {
      expect((await client.getSpend({ projectId: 'prj_race_task' })).reservedMicroUsd).toBe(total);
    }
  }, 180_000);
});
