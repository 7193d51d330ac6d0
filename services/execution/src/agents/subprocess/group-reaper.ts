import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Subprocess groups must not outlive the process that started them. A coding-agent CLI left running
 * after execution died keeps calling its model: money spent that no lease, reservation or settlement
 * will ever account for, and a task that another replica resumes runs twice. Node cannot ask the
 * kernel for a parent-death signal, so one watchdog process per process (group-reaper-watchdog.mjs)
 * holds the list of live groups and, when its stdin pipe from us closes (exit, crash, SIGKILL: the
 * kernel closes it in every case), stops every group still on it.
 */

const watchdogPath = fileURLToPath(new URL('./group-reaper-watchdog.mjs', import.meta.url));

/** The watchdog process, and whether it still runs. */
interface Watchdog {
  process: ChildProcess;
  alive: boolean;
}

let watchdog: Watchdog | undefined;
/** Groups alive now, to hand to a new watchdog if the previous one died. */
const live = new Set<number>();

function startWatchdog(): Watchdog {
  const child = spawn(process.execPath, [watchdogPath, '250'], {
    // Its own process group: a Ctrl-C or a group kill aimed at us must not take the watchdog along.
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
    // Plain node, and none of this service's variables (keys, database URL): the script needs none.
    env: {},
  });
  const started: Watchdog = { process: child, alive: true };
  const dead = () => {
    started.alive = false;
    if (watchdog === started) watchdog = undefined;
  };
  child.once('error', dead);
  child.once('exit', dead);
  child.stdin!.on('error', dead);
  // Neither the watchdog nor its pipe may keep this process running.
  child.unref();
  (child.stdin as unknown as { unref?: () => void }).unref?.();
  for (const pgid of live) child.stdin!.write(`+${pgid}\n`);
  return started;
}

/** Puts a started group (its leader's pid) under the watchdog. */
export function watchGroup(pgid: number): void {
  live.add(pgid);
  // A new watchdog is handed every live group as it starts, this one included.
  if (!watchdog?.alive) watchdog = startWatchdog();
  else watchdog.process.stdin!.write(`+${pgid}\n`);
}

/** Takes an ended group off the watchdog's list. */
export function forgetGroup(pgid: number): void {
  if (!live.delete(pgid)) return;
  if (watchdog?.alive) watchdog.process.stdin!.write(`-${pgid}\n`);
}

/** The watchdog's pid, when one runs (tests). */
export function watchdogPid(): number | undefined {
  return watchdog?.alive ? watchdog.process.pid : undefined;
}
