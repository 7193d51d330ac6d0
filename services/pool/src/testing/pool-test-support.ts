import { createClient, sleep } from '@actor/kit';
import type { PoolServiceDefinition, AcquireRequest, Agent } from '@actor/proto/pool';
import { loadPoolConfig } from '../config.js';
import type { startPool } from '../pool-server.js';

export type RunningPool = Awaited<ReturnType<typeof startPool>>;
export type PoolClient = ReturnType<typeof createClient<typeof PoolServiceDefinition>>;

/** Pool settings for a test: port 0, the test's database, fast polling, plus any overrides. */
export function poolTestConfig(
  database: { databaseUrl?: string; dataDir: string },
  overrides: Record<string, string> = {},
) {
  return loadPoolConfig({
    POOL_ADDR: '127.0.0.1:0',
    DATABASE_URL: database.databaseUrl,
    ACTOR_DATA_DIR: database.dataDir,
    POOL_WAIT_POLL_MS: '50',
    ...overrides,
  });
}

let nameCounter = 0;
/** An agent with a name and type no other test uses, so tests sharing the database stay independent. */
export function agentFields(overrides: Partial<Agent> = {}): Partial<Agent> {
  nameCounter++;
  const unique = `${process.pid}-${nameCounter}`;
  return {
    name: `agent-${unique}`,
    description: 'test slot',
    agentType: `test-type-${unique}`,
    capabilities: ['*'],
    configurationJson: '{}',
    enabled: true,
    concurrency: 1,
    ...overrides,
  };
}

export function acquireFields(overrides: Partial<AcquireRequest>): Partial<AcquireRequest> {
  return { workType: 'task', workId: `tsk_${Math.random().toString(36).slice(2)}`, projectId: 'prj_default', ...overrides };
}

/** Polls `condition` every 10 ms until it holds; fails after `timeoutMs`. */
export async function until(condition: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}
