import { createLogger, exitOnStartFailure, onShutdown } from '@actor/kit';
import { loadExecutionConfig } from './config.js';
import { startExecution } from './execution-server.js';

const logger = createLogger('execution');
try {
  const config = loadExecutionConfig();
  logger.level = config.LOG_LEVEL;
  const execution = await startExecution({ config, logger });
  onShutdown(logger, [() => execution.stop()]);
} catch (error) {
  exitOnStartFailure(logger, error);
}
