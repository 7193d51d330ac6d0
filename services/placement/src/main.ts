import { closeChannels, createLogger, exitOnStartFailure, onShutdown } from '@actor/kit';
import { loadPlacementConfig } from './config.js';
import { startPlacement } from './placement-server.js';

const logger = createLogger('placement');
try {
  const config = loadPlacementConfig();
  logger.level = config.LOG_LEVEL;
  const placement = await startPlacement({ config, logger });
  onShutdown(logger, [() => placement.stop(), () => closeChannels()]);
} catch (error) {
  exitOnStartFailure(logger, error);
}
