import { closeChannels, createLogger, exitOnStartFailure, onShutdown } from '@actor/kit';
import { loadGatewayConfig } from './config.js';
import { startGateway } from './gateway-server.js';

const logger = createLogger('gateway');
try {
  const config = loadGatewayConfig();
  logger.level = config.LOG_LEVEL;
  const gateway = await startGateway({ config, logger });
  onShutdown(logger, [() => gateway.stop(), () => closeChannels()]);
} catch (error) {
  exitOnStartFailure(logger, error);
}
