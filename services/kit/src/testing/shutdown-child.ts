/**
 * Test fixture for onShutdown and the logger: prints `ready` on stdout, then idles like a service
 * until it is stopped. With `quiet` as its argument it logs at info level and its shutdown step logs
 * a burst of warnings (so that stopping writes log lines to stdout); otherwise its logger is silent
 * and the step prints `stopped` after 300 ms.
 */
import { createLogger } from '../logger.js';
import { onShutdown } from '../shutdown.js';

const quiet = process.argv[2] === 'quiet';
const logger = createLogger('shutdown-child', quiet ? 'info' : 'silent');
onShutdown(logger, [
  () => {
    // A drain that takes a while, as a service's does: an early second stop would cut it short.
    if (!quiet) return new Promise((resolve) => setTimeout(() => resolve(process.stdout.write('stopped\n')), 300));
    // A burst of lines right before exit, as a service logs while its peers go away: the logger still
    // holds some of them when the process exits.
    for (let line = 0; line < 200; line++) logger.warn({ line }, 'peer unavailable while stopping');
  },
]);
process.stdout.write('ready\n');
setInterval(() => undefined, 60_000);
