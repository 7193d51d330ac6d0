import { EventEmitter, on } from 'node:events';
import type { CallContext } from 'nice-grpc';
import { fail, newId } from '@actor/kit';
import {
  TrustClass,
  type Adapter,
  type AdapterCheckResult,
  type RateCard,
  type RegistryServiceImplementation,
  type WatchRegistryResponse,
} from '@actor/proto/registry';
import type { AdapterRow, RateCardRow, RegistryRepository } from './db/registry-repository.js';
import { assertRateCardWritable, knownCapabilities } from './domain/rate-card-policy.js';
import { hashToken, type SecretBox } from './domain/secret-box.js';

const trustClassNames: Record<TrustClass, string> = {
  [TrustClass.TRUST_CLASS_UNSPECIFIED]: 'external',
  [TrustClass.TRUST_CLASS_FIRST_PARTY]: 'first-party',
  [TrustClass.TRUST_CLASS_USER_OWNED]: 'user-owned',
  [TrustClass.TRUST_CLASS_PARTNER]: 'partner',
  [TrustClass.TRUST_CLASS_COMMUNITY]: 'community',
  [TrustClass.TRUST_CLASS_EXTERNAL]: 'external',
  [TrustClass.UNRECOGNIZED]: 'external',
};

function trustClassFromName(name: string): TrustClass {
  const entry = Object.entries(trustClassNames).find(([, value]) => value === name);
  return entry ? (Number(entry[0]) as TrustClass) : TrustClass.TRUST_CLASS_EXTERNAL;
}

function encodeRateCard(row: RateCardRow): RateCard {
  return {
    adapterType: row.adapterType,
    revision: row.revision,
    inputMicroUsdPerMtok: row.inputMicroUsdPerMtok,
    outputMicroUsdPerMtok: row.outputMicroUsdPerMtok,
    microUsdPerSecond: row.microUsdPerSecond,
    microUsdPerTask: row.microUsdPerTask,
    source: row.source,
    verifiedAt: row.verifiedAt ?? undefined,
    reviewer: row.reviewer,
    createTime: row.createdAt,
  };
}

function encodeAdapter(row: AdapterRow, rateCard: RateCardRow | undefined): Adapter {
  return {
    type: row.type,
    displayName: row.displayName,
    modelFamily: row.modelFamily,
    capabilities: row.capabilities,
    limits: {
      contextTokens: row.contextTokens,
      maxOutputTokens: row.maxOutputTokens,
      concurrency: row.concurrency,
      timeoutMs: row.timeoutMs,
      egress: row.egress,
    },
    trustClass: trustClassFromName(row.trustClass),
    qualityTier: row.qualityTier,
    acceptsByoKey: row.acceptsByoKey,
    requiresByoKey: row.requiresByoKey,
    demo: row.demo,
    ready: row.ready,
    readyReason: row.readyReason,
    rateCard: rateCard ? encodeRateCard(rateCard) : undefined,
    updateTime: row.updatedAt,
  };
}

/** Largest secret value accepted, in UTF-8 bytes: API keys and webhook secrets are far smaller. */
export const maxSecretValueBytes = 16 * 1024;

function assertSecretName(name: string): void {
  if (!/^[a-z0-9][a-z0-9._-]{0,62}$/.test(name)) {
    throw fail.invalid('secret name must be 1-63 characters of a-z, 0-9, ".", "_" or "-", starting with a letter or digit');
  }
}

export interface RegistryServiceDependencies {
  repository: RegistryRepository;
  secretBox: SecretBox;
  /** Ends open WatchRegistry streams when the server shuts down. */
  shutdownSignal: AbortSignal;
}

/** The RegistryService: decode, apply the registry's rules, encode. SQL lives in the repository. */
export function createRegistryService({
  repository,
  secretBox,
  shutdownSignal,
}: RegistryServiceDependencies): RegistryServiceImplementation {
  // Change notifications for WatchRegistry. In-process: a write on one replica reaches watchers of that
  // replica; cross-replica fan-out (LISTEN/NOTIFY) comes with the registry issue.
  const changes = new EventEmitter();
  changes.setMaxListeners(0);
  const publish = (change: WatchRegistryResponse) => changes.emit('change', change);

  return {
    async listAdapters(request) {
      const [rows, cards] = await Promise.all([repository.listAdapters(), repository.currentRateCards()]);
      return {
        adapters: rows
          .filter((row) => !request.readyOnly || row.ready)
          .map((row) => encodeAdapter(row, cards.get(row.type))),
      };
    },

    async getAdapter(request) {
      const row = await repository.getAdapter(request.type);
      if (!row) throw fail.notFound(`no adapter of type "${request.type}"`);
      const [card] = await repository.rateCardRevisions(row.type);
      return { adapter: encodeAdapter(row, card) };
    },

    async putAdapter(request) {
      const adapter = request.adapter;
      if (!adapter?.type) throw fail.invalid('adapter.type is required');
      if (!adapter.modelFamily) throw fail.invalid('adapter.model_family is required');
      const unknown = adapter.capabilities.filter((capability) => !knownCapabilities.has(capability));
      if (unknown.length > 0) throw fail.invalid(`unknown capabilities: ${unknown.join(', ')}`);
      if (adapter.qualityTier < 1 || adapter.qualityTier > 5) throw fail.invalid('adapter.quality_tier must be 1..5');
      const row = await repository.putAdapter({
        type: adapter.type,
        displayName: adapter.displayName || adapter.type,
        modelFamily: adapter.modelFamily,
        capabilities: adapter.capabilities,
        contextTokens: adapter.limits?.contextTokens ?? 0,
        maxOutputTokens: adapter.limits?.maxOutputTokens ?? 0,
        concurrency: adapter.limits?.concurrency ?? 0,
        timeoutMs: adapter.limits?.timeoutMs ?? 0,
        egress: adapter.limits?.egress ?? false,
        trustClass: trustClassNames[adapter.trustClass],
        qualityTier: adapter.qualityTier,
        acceptsByoKey: adapter.acceptsByoKey,
        requiresByoKey: adapter.requiresByoKey,
        demo: adapter.demo,
        ready: adapter.ready,
        readyReason: adapter.readyReason,
      });
      publish({ kind: 'adapter', adapterType: row.type, revision: 0 });
      const [card] = await repository.rateCardRevisions(row.type);
      return { adapter: encodeAdapter(row, card) };
    },

    async putRateCard(request) {
      const card = request.rateCard;
      if (!card?.adapterType) throw fail.invalid('rate_card.adapter_type is required');
      assertRateCardWritable(
        request.reviewerKind,
        card.reviewer,
        [card.inputMicroUsdPerMtok, card.outputMicroUsdPerMtok, card.microUsdPerSecond, card.microUsdPerTask],
        card.source,
      );
      if (!(await repository.getAdapter(card.adapterType))) {
        throw fail.notFound(`no adapter of type "${card.adapterType}"`);
      }
      const { row, created } = await repository.appendRateCard({
        adapterType: card.adapterType,
        inputMicroUsdPerMtok: card.inputMicroUsdPerMtok,
        outputMicroUsdPerMtok: card.outputMicroUsdPerMtok,
        microUsdPerSecond: card.microUsdPerSecond,
        microUsdPerTask: card.microUsdPerTask,
        source: card.source,
        verifiedAt: card.verifiedAt ?? null,
        reviewer: card.reviewer,
      });
      if (created) publish({ kind: 'rate_card', adapterType: row.adapterType, revision: row.revision });
      return { rateCard: encodeRateCard(row) };
    },

    async listRateCardRevisions(request) {
      const rows = await repository.rateCardRevisions(request.adapterType, request.revision || undefined);
      if (request.revision && rows.length === 0) {
        throw fail.notFound(`no rate-card revision ${request.revision} for "${request.adapterType}"`);
      }
      return { rateCards: rows.map(encodeRateCard) };
    },

    async checkAdapterHealth(request) {
      const rows = request.adapterType
        ? [await repository.getAdapter(request.adapterType)].filter((row) => row !== undefined)
        : await repository.listAdapters();
      if (request.adapterType && rows.length === 0) throw fail.notFound(`no adapter of type "${request.adapterType}"`);
      const cards = await repository.currentRateCards();
      const results: AdapterCheckResult[] = [];
      for (const row of rows) {
        results.push({
          adapterType: row.type,
          name: 'prerequisites',
          status: row.ready ? 'ok' : 'fail',
          message: row.readyReason || (row.ready ? 'ready' : 'not ready'),
        });
        const card = cards.get(row.type);
        results.push({
          adapterType: row.type,
          name: 'rate-card',
          status: card ? 'ok' : 'fail',
          message: card ? `revision ${card.revision} from ${card.source}` : 'no rate card: the adapter cannot be billed or placed',
        });
      }
      return { results };
    },

    async authenticateToken(request) {
      if (!request.token) throw fail.unauthenticated('missing token');
      const row = await repository.findToken(hashToken(request.token));
      if (!row) throw fail.unauthenticated('unknown or revoked token');
      return { projectId: row.projectId, tokenId: row.id, scopes: row.scopes };
    },

    async putSecret(request) {
      assertSecretName(request.name);
      if (request.value === '') throw fail.invalid('secret value must not be empty');
      if (Buffer.byteLength(request.value, 'utf8') > maxSecretValueBytes) {
        throw fail.invalid(`secret value must be at most ${maxSecretValueBytes} bytes`);
      }
      if (!(await repository.projectExists(request.projectId))) {
        throw fail.notFound(`no project "${request.projectId}"`);
      }
      const row = await repository.putSecret(request.projectId, request.name, secretBox.seal(request.value));
      return {
        name: row.name,
        version: row.version,
        created: row.version === 1,
        createTime: row.createdAt,
        updateTime: row.updatedAt,
      };
    },

    async listSecrets(request) {
      const rows = await repository.listSecrets(request.projectId);
      return {
        secrets: rows.map((row) => ({ name: row.name, version: row.version, createTime: row.createdAt, updateTime: row.updatedAt })),
      };
    },

    async deleteSecret(request) {
      assertSecretName(request.name);
      return { deleted: await repository.deleteSecret(request.projectId, request.name) };
    },

    async resolveSecret(request) {
      const row = await repository.getSecret(request.projectId, request.name);
      if (!row) throw fail.notFound(`project has no secret named "${request.name}"`, 'actor.secret.not_found');
      return { value: secretBox.open(row.ciphertext), version: row.version };
    },

    async *watchRegistry(_request, context: CallContext) {
      const stop = AbortSignal.any([context.signal, shutdownSignal]);
      try {
        for await (const [change] of on(changes, 'change', { signal: stop })) {
          yield change as WatchRegistryResponse;
        }
      } catch (error) {
        if (!stop.aborted) throw error;
      }
    },
  };
}

/** The scopes of the development token; a restart adds any missing from an existing one. */
export const devTokenScopes = ['tasks:read', 'tasks:write', 'agents:admin', 'usage:read', 'secrets:admin'];

/** Makes sure the default project and, when configured, the development token exist. */
export async function bootstrapRegistry(repository: RegistryRepository, devToken: string | undefined): Promise<void> {
  await repository.ensureProject('prj_default', 'default');
  if (devToken) {
    await repository.ensureToken(newId('tok'), 'prj_default', hashToken(devToken), devTokenScopes);
  }
}
