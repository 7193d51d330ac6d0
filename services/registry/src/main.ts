import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { createLogger, exitOnStartFailure, onShutdown } from '@actor/kit';
import { loadRegistryConfig } from './config.js';
import { startRegistry } from './registry-server.js';

const logger = createLogger('registry');
try {
  const config = loadRegistryConfig();
  logger.level = config.LOG_LEVEL;
  const secretKey = config.ACTOR_SECRET_KEY ?? loadOrCreateKeyFile(config.ACTOR_DATA_DIR);
  const registry = await startRegistry({ config, secretKey, logger });
  onShutdown(logger, [() => registry.stop()]);
} catch (error) {
  exitOnStartFailure(logger, error);
}

// Without ACTOR_SECRET_KEY, a key is made once and kept beside the embedded data, so secrets stay
// readable across restarts of a laptop install.
function loadOrCreateKeyFile(dataDir: string): string {
  const path = join(dataDir, 'registry-secret.key');
  if (existsSync(path)) return readFileSync(path, 'utf8').trim();
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32).toString('base64url');
  writeFileSync(path, `${key}\n`, { mode: 0o600 });
  logger.warn({ path }, 'ACTOR_SECRET_KEY is unset: created a local key file (set ACTOR_SECRET_KEY in production)');
  return key;
}
