import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

/** Where the CLI keeps its files: `$ACTOR_HOME`, else `~/.actor`. */
export function actorHome(env: Record<string, string | undefined>): string {
  const configured = env.ACTOR_HOME?.trim();
  return configured ? resolve(configured) : join(homedir(), '.actor');
}
