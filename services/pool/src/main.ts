import { createLogger, exitOnStartFailure, onShutdown } from '@actor/kit';
import { loadPoolConfig } from './config.js';
import { startPool } from './pool-server.js';

const logger = createLogger('pool');
try {
  const config = loadPoolConfig();
  logger.level = config.LOG_LEVEL;
  const pool = await startPool({ config, logger });
  onShutdown(logger, [() => pool.stop()]);
} catch (error) {
  exitOnStartFailure(logger, error);
}
