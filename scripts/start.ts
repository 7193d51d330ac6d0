/**
 * `npm start`: the whole platform on this machine. Every service and the gateway run as their own
 * process on loopback, talking real gRPC, each on its own embedded PGlite under ACTOR_DATA_DIR
 * (default .actor/) unless DATABASE_URL points at a Postgres. Prints the gateway URL, a development
 * token and a curl line to try. Ctrl-C stops everything.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { launchPlatform, waitUntilReady } from './platform.js';

const dataDir = process.env.ACTOR_DATA_DIR || '.actor';
const gatewayPort = process.env.GATEWAY_PORT || '8080';
const gatewayHost = process.env.GATEWAY_HOST || '127.0.0.1';

// The token is kept beside the data so it survives restarts; ACTOR_DEV_TOKEN wins when set.
function developmentToken(): string {
  if (process.env.ACTOR_DEV_TOKEN) return process.env.ACTOR_DEV_TOKEN;
  const path = join(dataDir, 'dev-token');
  if (existsSync(path)) return readFileSync(path, 'utf8').trim();
  mkdirSync(dataDir, { recursive: true });
  const token = `actor_dev_${randomBytes(18).toString('base64url')}`;
  writeFileSync(path, `${token}\n`, { mode: 0o600 });
  return token;
}

const token = developmentToken();
const verbose = process.env.LOG_LEVEL === 'debug' || process.env.LOG_LEVEL === 'trace';
let shuttingDown = false;
const platform = launchPlatform({
  env: { ACTOR_DATA_DIR: dataDir, ACTOR_DEV_TOKEN: token, GATEWAY_PORT: gatewayPort },
  onLine: (name, line) => {
    // Services log JSON; show warnings and errors (or everything at LOG_LEVEL=debug).
    let level = 30;
    try {
      level = (JSON.parse(line) as { level?: number }).level ?? 30;
    } catch {
      level = 40;
    }
    if (verbose || level >= 40) console.error(`[${name}] ${line}`);
  },
  onExit: (name, code, signal) => {
    if (shuttingDown) return;
    console.error(`[${name}] exited (${signal ?? `code ${code}`}); stopping the platform`);
    void shutdown(1);
  },
});

async function shutdown(exitCode: number) {
  if (shuttingDown) return;
  shuttingDown = true;
  console.error('stopping...');
  await platform.stop();
  process.exit(exitCode);
}
process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));
// The terminal closed: its SIGHUP reaches only this launcher (each service has its own process group).
process.on('SIGHUP', () => void shutdown(0));

const url = `http://${gatewayHost === '0.0.0.0' ? '127.0.0.1' : gatewayHost}:${gatewayPort}`;
try {
  await waitUntilReady(url, 180_000);
} catch (error) {
  console.error((error as Error).message);
  await shutdown(1);
}
const database = process.env.DATABASE_URL ? 'Postgres (DATABASE_URL)' : `embedded PGlite under ${dataDir}/`;
console.log(`
Actor is running: five services and the gateway, on ${database}.

  gateway   ${url}
  token     ${token}

Create a task and follow it to the end:

  curl -s -X POST ${url}/v1/tasks -H "Authorization: Bearer ${token}" -H 'Content-Type: application/json' \\
    -d '{"task":"Write a haiku about routing","mode":"balanced","budget":{"per_task_usd":0.10}}' \\
  | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).id))' \\
  | xargs -I{} curl -sN ${url}/v1/tasks/{}/events -H "Authorization: Bearer ${token}"

Then read the result, the cost and the explanation: curl -s ${url}/v1/tasks/<id> -H "Authorization: Bearer ${token}"
Ctrl-C stops everything.
`);
