import { accessSync, constants } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';

/** Whether `path` is a file this process may execute. */
export function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The first executable called `name` in the absolute directories of `searchPath` (a `PATH` value), or
 * undefined. Relative entries are skipped: what they name depends on the service's working directory.
 */
export function findOnPath(name: string, searchPath: string): string | undefined {
  for (const directory of searchPath.split(delimiter)) {
    if (!directory || !isAbsolute(directory)) continue;
    const candidate = join(directory, name);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

/**
 * Where a CLI adapter's binary is: the configured path when it is executable (undefined when it is
 * not), else `name` on `searchPath`.
 */
export function locateExecutable(configured: string | undefined, name: string, searchPath: string): string | undefined {
  if (configured) return isExecutable(configured) ? configured : undefined;
  return findOnPath(name, searchPath);
}
