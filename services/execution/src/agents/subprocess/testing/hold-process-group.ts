/**
 * Test fixture for the group reaper: starts a process group through spawnProcessGroup (a shell with
 * two background sleeps, so the group has more than its leader), prints
 * `{"pgid": <pid>, "watchdog": <pid>}` on one line, and then waits to be killed. With `exit` as its
 * argument it instead waits for the group to end on its own (a short sleep) and exits normally.
 */
import { spawnProcessGroup, subprocessEnvironment } from '../process-group.js';
import { watchdogPid } from '../group-reaper.js';

const mode = process.argv[2] ?? 'hold';
const script = mode === 'exit' ? 'sleep 0.2' : 'sleep 300 & sleep 300 & wait';
const group = spawnProcessGroup('sh', ['-c', script], { environment: subprocessEnvironment() });
process.stdout.write(`${JSON.stringify({ pgid: group.child.pid, watchdog: watchdogPid() })}\n`);
if (mode === 'exit') {
  await group.closed;
} else {
  setInterval(() => undefined, 60_000);
}
