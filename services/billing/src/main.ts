import { closeChannels, createLogger, exitOnStartFailure, onShutdown } from '@actor/kit';
import { startBilling } from './billing-server.js';
import { loadBillingConfig } from './config.js';

const logger = createLogger('billing');
try {
  const config = loadBillingConfig();
  logger.level = config.LOG_LEVEL;
  const billing = await startBilling({ config, logger });
  onShutdown(logger, [() => billing.stop(), () => closeChannels()]);
} catch (error) {
  exitOnStartFailure(logger, error);
}
