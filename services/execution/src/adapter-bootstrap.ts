import { sleep, type ActorClient, type Logger } from '@actor/kit';
import type { PoolServiceDefinition } from '@actor/proto/pool';
import type { RegistryServiceDefinition } from '@actor/proto/registry';
import type { AdapterDefinition } from './agents/agent.js';

export interface AdapterBootstrapOptions {
  registry: ActorClient<typeof RegistryServiceDefinition>;
  pool: ActorClient<typeof PoolServiceDefinition>;
  definitions: AdapterDefinition[];
  notReady: Array<{ type: string; reason: string }>;
  slotConcurrency: number;
  logger: Logger;
  /** Gives up after this long if the registry or the pool never answers; default 60 s. */
  timeoutMs?: number;
}

/**
 * Declares this process's adapters to the registry (with their rate cards, written as the operator
 * `actor-bootstrap`) and makes sure each has at least one agent slot in the pool. Idempotent: a
 * restart changes nothing that is already right. Waits for the peers, which may start after us.
 */
export async function bootstrapAdapters(options: AdapterBootstrapOptions): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  for (let attempt = 1; ; attempt += 1) {
    try {
      await declareAll(options);
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      options.logger.info({ attempt, err: (error as Error).message }, 'waiting for registry and pool');
      await sleep(Math.min(2_000, 200 * attempt));
    }
  }
}

async function declareAll({ registry, pool, definitions, notReady, slotConcurrency, logger }: AdapterBootstrapOptions) {
  const { agents } = await pool.listAgents({});
  for (const definition of definitions) {
    const type = definition.declaration.type;
    await registry.putAdapter({ adapter: { ...definition.declaration, ready: true }, requestId: `bootstrap:${type}` });
    await registry.putRateCard({
      rateCard: { ...definition.rateCard, adapterType: type },
      reviewerKind: 'operator',
      requestId: `bootstrap:${type}:rate-card`,
    });
    // Adapters that need per-slot setup (a script's command) get no default slot: an admin makes one.
    if (definition.defaultSlot !== false && !agents.some((agent) => agent.agentType === type)) {
      await pool.createAgent({
        agent: {
          name: `${type}-default`,
          description: `Default slot for ${definition.declaration.displayName}, made at start-up`,
          agentType: type,
          capabilities: ['*'],
          configurationJson: '{}',
          enabled: true,
          concurrency: slotConcurrency,
        },
        requestId: `bootstrap:${type}:slot`,
      });
    }
  }
  const declaredReady = new Set(definitions.map((definition) => definition.declaration.type));
  for (const { type, reason } of notReady) {
    // A family pattern (`ai-sdk:ollama/*`) covers every adapter declared under it before, such as the
    // models of an Ollama that answered at an earlier start and does not now.
    const existing = type.endsWith('/*')
      ? (await registry.listAdapters({})).adapters.filter(
          (adapter) => adapter.type.startsWith(type.slice(0, -1)) && !declaredReady.has(adapter.type),
        )
      : [(await registry.getAdapter({ type }).catch(() => undefined))?.adapter].filter((adapter) => adapter !== undefined);
    for (const adapter of existing) {
      if (adapter.ready || adapter.readyReason !== reason) {
        await registry.putAdapter({ adapter: { ...adapter, ready: false, readyReason: reason } });
      }
    }
  }
  logger.info(
    { ready: definitions.map((definition) => definition.declaration.type), notReady },
    'adapters declared',
  );
}
