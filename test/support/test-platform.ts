import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testDatabase } from '@actor/kit/testing';
import { freePort, launchPlatform, waitUntilReady, type RunningPlatform } from '../../scripts/platform.js';

export interface TestPlatform {
  url: string;
  token: string;
  platform: RunningPlatform;
  /** `host:port` of each service's gRPC server, for tests that check a service's own state. */
  addresses: { registry: string; pool: string; placement: string; execution: string; billing: string };
  /** Output lines of every process, for failure diagnostics. */
  logs: string[];
  stop(): Promise<void>;
}

/** Free loopback ports for the five services and the gateway, as the settings `launchPlatform` reads. */
export async function freePlatformAddresses() {
  const [registry, pool, placement, execution, billing, gateway] = await Promise.all(
    Array.from({ length: 6 }, () => freePort()),
  );
  return {
    REGISTRY_ADDR: `127.0.0.1:${registry}`,
    POOL_ADDR: `127.0.0.1:${pool}`,
    PLACEMENT_ADDR: `127.0.0.1:${placement}`,
    EXECUTION_ADDR: `127.0.0.1:${execution}`,
    BILLING_ADDR: `127.0.0.1:${billing}`,
    GATEWAY_PORT: String(gateway),
  };
}

/**
 * The whole platform as separate OS processes on free loopback ports: on fresh PGlite data dirs, or
 * on a fresh Postgres database when DATABASE_URL is set.
 */
export async function startTestPlatform(extraEnv: Record<string, string> = {}): Promise<TestPlatform> {
  const database = await testDatabase();
  const dataDir = mkdtempSync(join(tmpdir(), 'actor-e2e-'));
  const addresses = await freePlatformAddresses();
  const token = `e2e-token-${Date.now()}`;
  const logs: string[] = [];
  const env = {
    ACTOR_DATA_DIR: dataDir,
    DATABASE_URL: database.databaseUrl ?? '',
    ACTOR_DEV_TOKEN: token,
    ...addresses,
    EXECUTION_POLL_INTERVAL_MS: '100',
    LOG_LEVEL: 'warn',
    ...extraEnv,
  };
  const platform = launchPlatform({
    env,
    onLine: (name, line) => logs.push(`[${name}] ${line}`),
    onExit: (name, code, signal) => logs.push(`[${name}] exited ${code ?? signal}`),
  });
  const url = `http://127.0.0.1:${env.GATEWAY_PORT}`;
  try {
    await waitUntilReady(url, 150_000);
  } catch (error) {
    await platform.stop();
    throw new Error(`${(error as Error).message}\n${logs.slice(-40).join('\n')}`);
  }
  return {
    url,
    token,
    platform,
    addresses: {
      registry: env.REGISTRY_ADDR,
      pool: env.POOL_ADDR,
      placement: env.PLACEMENT_ADDR,
      execution: env.EXECUTION_ADDR,
      billing: env.BILLING_ADDR,
    },
    logs,
    async stop() {
      await platform.stop();
      await database.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
