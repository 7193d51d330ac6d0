import type { AgentsPort } from '@actor/engine';
import type { Prices } from '@actor/kit';
import { discoverAllAdapters, type NotReadyAdapter } from '@actor/execution/src/agents/adapter-catalog.js';
import type { AdapterDefinition } from '@actor/execution/src/agents/agent.js';
import { AdapterAgentsPort } from '@actor/execution/src/ports/adapter-agents-port.js';

/** What this machine can run, as the execution service's own discovery finds it. */
export interface LocalAdapters {
  /** Adapters whose prerequisites are present (the demo backends always), demo backends first. */
  definitions: AdapterDefinition[];
  /** Adapter types that get a local slot: every found one except those that need per-slot setup (`script`). */
  slotTypes: string[];
  /** Adapters looked for and not usable here, with why. */
  notReady: NotReadyAdapter[];
  /** Rate cards by adapter type, for local billing. */
  rates: Map<string, Prices>;
  /** The engine's AI call over these adapters. */
  agents: AgentsPort;
}

/**
 * Runs the execution service's adapter discovery over `env` (the CLI's environment: the same
 * `ACTOR_OPENAI_*`, `ACTOR_CLAUDE_CODE_*`, `ACTOR_OLLAMA_URL`, ... settings as the service),
 * including the probe of a local Ollama.
 */
export async function discoverLocalAdapters(env: Record<string, string | undefined>): Promise<LocalAdapters> {
  const catalog = await discoverAllAdapters(env);
  const definitions = catalog.definitions.filter((definition) => definition.declaration.ready);
  return {
    definitions,
    slotTypes: definitions.filter((definition) => definition.defaultSlot !== false).map((definition) => definition.declaration.type),
    notReady: catalog.notReady,
    rates: new Map(definitions.map((definition) => [definition.declaration.type, definition.rateCard])),
    agents: new AdapterAgentsPort((type) => catalog.createAgentFor(type)),
  };
}
