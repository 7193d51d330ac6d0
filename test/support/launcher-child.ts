/**
 * Test fixture: a platform launcher in a process of its own (as `npm start` is), on PGlite under the
 * data dir given as its argument and free ports. Once the platform answers it prints
 * `{"pids": [...]}` (the six processes it started) on one line and idles until it is killed.
 */
import { freePort, launchPlatform, platformProcesses, waitUntilReady } from '../../scripts/platform.js';

const dataDir = process.argv[2]!;
const [registry, pool, placement, execution, billing, gateway] = await Promise.all(Array.from({ length: 6 }, () => freePort()));
const platform = launchPlatform({
  env: {
    ACTOR_DATA_DIR: dataDir,
    DATABASE_URL: '',
    ACTOR_DEV_TOKEN: 'launcher-child-token',
    REGISTRY_ADDR: `127.0.0.1:${registry}`,
    POOL_ADDR: `127.0.0.1:${pool}`,
    PLACEMENT_ADDR: `127.0.0.1:${placement}`,
    EXECUTION_ADDR: `127.0.0.1:${execution}`,
    BILLING_ADDR: `127.0.0.1:${billing}`,
    GATEWAY_PORT: String(gateway),
    LOG_LEVEL: 'warn',
  },
});
await waitUntilReady(`http://127.0.0.1:${gateway}`, 150_000);
process.stdout.write(`${JSON.stringify({ pids: platformProcesses.map((name) => platform.processes.get(name)!.pid) })}\n`);
setInterval(() => undefined, 60_000);
