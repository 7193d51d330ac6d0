/**
 * Test fixture: a platform launcher in a process of its own (as `npm start` is), on PGlite under the
 * data dir given as its argument and free ports. Once the platform answers it prints
 * `{"pids": [...]}` (the six processes it started) on one line and idles until it is killed.
 */
import { launchPlatform, platformProcesses, waitUntilReady } from '../../scripts/platform.js';
import { freePlatformAddresses } from './test-platform.js';

const dataDir = process.argv[2]!;
const addresses = await freePlatformAddresses();
const platform = launchPlatform({
  env: { ACTOR_DATA_DIR: dataDir, DATABASE_URL: '', ACTOR_DEV_TOKEN: 'launcher-child-token', ...addresses, LOG_LEVEL: 'warn' },
});
await waitUntilReady(`http://127.0.0.1:${addresses.GATEWAY_PORT}`, 150_000);
process.stdout.write(`${JSON.stringify({ pids: platformProcesses.map((name) => platform.processes.get(name)!.pid) })}\n`);
setInterval(() => undefined, 60_000);
