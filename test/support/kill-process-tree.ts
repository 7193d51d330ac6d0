import { execFileSync } from 'node:child_process';
import type { PlatformProcess, RunningPlatform } from '../../scripts/platform.js';

/** The ids of a process's direct children (Linux `ps --ppid`); empty when it has none. */
function childrenOf(pid: number): number[] {
  try {
    return execFileSync('ps', ['--ppid', String(pid), '-o', 'pid='], { encoding: 'utf8' })
      .split('\n')
      .map((line) => Number(line.trim()))
      .filter((child) => Number.isInteger(child) && child > 0);
  } catch {
    // ps exits 1 when nothing matched.
    return [];
  }
}

/**
 * SIGKILLs one platform process together with its descendants. The platform runs each service
 * through the tsx launcher, which starts the service as a child process: killing only the launcher
 * would leave the service itself running, orphaned.
 */
export async function killProcessTree(platform: RunningPlatform, name: PlatformProcess): Promise<void> {
  const launcher = platform.processes.get(name);
  if (!launcher?.pid) return;
  const pending = [launcher.pid];
  const tree: number[] = [];
  while (pending.length > 0) {
    const pid = pending.pop()!;
    tree.push(pid);
    pending.push(...childrenOf(pid));
  }
  for (const pid of tree.reverse()) {
    if (pid === launcher.pid) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  await platform.kill(name, 'SIGKILL');
}
