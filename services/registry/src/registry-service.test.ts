import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Status } from 'nice-grpc';
import { sql } from 'drizzle-orm';
import { createClient, createLogger } from '@actor/kit';
import { rejection, testDatabase } from '@actor/kit/testing';
import { RegistryServiceDefinition, TrustClass } from '@actor/proto/registry';
import { loadRegistryConfig } from './config.js';
import { RegistryRepository } from './db/registry-repository.js';
import { hashToken } from './domain/secret-box.js';
import { startRegistry } from './registry-server.js';
import { maxSecretValueBytes } from './registry-service.js';

describe('RegistryService over gRPC', () => {
  let registry: Awaited<ReturnType<typeof startRegistry>>;
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let client: ReturnType<typeof createClient<typeof RegistryServiceDefinition>>;

  beforeAll(async () => {
    database = await testDatabase();
    const config = loadRegistryConfig({
      REGISTRY_ADDR: '127.0.0.1:0',
      DATABASE_URL: database.databaseUrl,
      ACTOR_DATA_DIR: database.dataDir,
      ACTOR_DEV_TOKEN: 'dev-token-registry-test',
    });
    registry = await startRegistry({ config, secretKey: 'test-key', logger: createLogger('registry', 'silent') });
    client = createClient(RegistryServiceDefinition, registry.address);
  });
  afterAll(async () => {
    await registry?.stop();
    await database?.drop();
  });

  const adapter = {
    type: 'demo:test-mini',
    displayName: 'Test mini',
    modelFamily: 'demo-alpha',
    capabilities: ['general', 'code'],
    limits: { contextTokens: 8000, maxOutputTokens: 1000, concurrency: 2, timeoutMs: 10_000, egress: false },
    trustClass: TrustClass.TRUST_CLASS_FIRST_PARTY,
    qualityTier: 1,
    demo: true,
    ready: true,
  };

  it('stores an adapter and returns it with its current rate card', async () => {
    await client.putAdapter({ adapter, requestId: 'r1' });
    await client.putRateCard({
      rateCard: { adapterType: adapter.type, inputMicroUsdPerMtok: 100_000, outputMicroUsdPerMtok: 400_000, source: 'test', reviewer: 'alice' },
      reviewerKind: 'human',
    });
    const { adapter: stored } = await client.getAdapter({ type: adapter.type });
    expect(stored?.trustClass).toBe(TrustClass.TRUST_CLASS_FIRST_PARTY);
    expect(stored?.limits?.maxOutputTokens).toBe(1000);
    expect(stored?.rateCard?.revision).toBe(1);
    expect(stored?.rateCard?.outputMicroUsdPerMtok).toBe(400_000);
  });

  it('revisions rate cards, keeps old ones, and refuses AI subjects', async () => {
    const second = await client.putRateCard({
      rateCard: { adapterType: adapter.type, inputMicroUsdPerMtok: 200_000, outputMicroUsdPerMtok: 800_000, source: 'test', reviewer: 'bob' },
      reviewerKind: 'human',
    });
    expect(second.rateCard?.revision).toBe(2);
    const same = await client.putRateCard({
      rateCard: { adapterType: adapter.type, inputMicroUsdPerMtok: 200_000, outputMicroUsdPerMtok: 800_000, source: 'test', reviewer: 'bob' },
      reviewerKind: 'operator',
    });
    expect(same.rateCard?.revision).toBe(2);
    const { rateCards } = await client.listRateCardRevisions({ adapterType: adapter.type });
    expect(rateCards.map((card) => card.revision)).toEqual([2, 1]);
    const refused = await rejection(
      client.putRateCard({ rateCard: { adapterType: adapter.type, source: 'gpt', reviewer: 'agent-7' }, reviewerKind: 'ai' }),
    );
    expect(refused).toMatchObject({ status: Status.PERMISSION_DENIED, code: 'actor.rate_card.ai_subject' });
  });

  it('authenticates the development token and refuses others', async () => {
    const identity = await client.authenticateToken({ token: 'dev-token-registry-test' });
    expect(identity.projectId).toBe('prj_default');
    expect(identity.scopes).toContain('tasks:write');
    const refused = await rejection(client.authenticateToken({ token: 'nope' }));
    expect(refused.status).toBe(Status.UNAUTHENTICATED);
  });

  it('keeps secrets encrypted and resolves them', async () => {
    const put = await client.putSecret({ projectId: 'prj_default', name: 'webhook', value: 'whsec_abc' });
    expect(put.version).toBe(1);
    expect(JSON.stringify(put)).not.toContain('whsec_abc');
    const resolved = await client.resolveSecret({ projectId: 'prj_default', name: 'webhook' });
    expect(resolved.value).toBe('whsec_abc');
    const missing = await rejection(client.resolveSecret({ projectId: 'prj_default', name: 'nope' }));
    expect(missing.code).toBe('actor.secret.not_found');
  });

  it('never returns a secret value through any public answer, error or stored row', async () => {
    const value = 'sk-canary-3f9a1c77e2b04d6e';
    const seen: string[] = [];
    const record = (answer: unknown) => seen.push(JSON.stringify(answer));
    const recordError = async (call: Promise<unknown>) => record(await rejection(call));

    const controller = new AbortController();
    const changes: unknown[] = [];
    const watching = (async () => {
      try {
        for await (const change of client.watchRegistry({}, { signal: controller.signal })) changes.push(change);
      } catch {
        // aborted at the end of the test
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 100));

    record(await client.putSecret({ projectId: 'prj_default', name: 'byo-key', value }));
    record(await client.putSecret({ projectId: 'prj_default', name: 'byo-key', value: `${value}-rotated` }));
    await recordError(client.putSecret({ projectId: 'prj_nope', name: 'byo-key', value }));
    await recordError(client.putSecret({ projectId: 'prj_default', name: `Bad Name ${value}`.slice(0, 10), value }));
    await recordError(client.putSecret({ projectId: 'prj_default', name: '', value }));
    await recordError(client.resolveSecret({ projectId: 'prj_nope', name: 'byo-key' }));
    record(await client.listAdapters({}));
    record(await client.getAdapter({ type: adapter.type }));
    record(await client.checkAdapterHealth({}));
    record(await client.listRateCardRevisions({ adapterType: adapter.type }));
    record(await client.authenticateToken({ token: 'dev-token-registry-test' }));
    await recordError(client.authenticateToken({ token: value }));
    record(await client.listSecrets({ projectId: 'prj_default' }));
    // A change made after the secret writes, so the stream has certainly delivered whatever they sent.
    await client.putAdapter({ adapter: { ...adapter, displayName: 'after secrets' } });
    await new Promise((resolve) => setTimeout(resolve, 100));
    controller.abort();
    await watching;
    record(changes);

    expect(seen).toHaveLength(14);
    for (const answer of seen) expect(answer).not.toContain(value);
    expect(changes.length).toBeGreaterThan(0);

    // At rest the value is sealed; only the internal ResolveSecret opens it.
    const stored = (await registry.database.db.execute(sql`select * from registry.secrets`)) as unknown as { rows: unknown[] };
    expect(stored.rows.length).toBeGreaterThan(0);
    expect(JSON.stringify(stored.rows)).not.toContain(value);
    expect((await client.resolveSecret({ projectId: 'prj_default', name: 'byo-key' })).value).toBe(`${value}-rotated`);
  });

  it('streams registry changes to watchers', async () => {
    const controller = new AbortController();
    const stream = client.watchRegistry({}, { signal: controller.signal });
    const first = (async () => {
      for await (const change of stream) return change;
    })();
    await new Promise((resolve) => setTimeout(resolve, 100));
    await client.putAdapter({ adapter: { ...adapter, displayName: 'renamed' } });
    expect(await first).toMatchObject({ kind: 'adapter', adapterType: adapter.type });
    controller.abort();
  });

  describe('secret management', () => {
    const project = 'prj_secrets_test';
    beforeAll(async () => {
      await new RegistryRepository(registry.database.db).ensureProject(project, 'secrets test');
    });

    it('creates, rotates in place, lists without values and deletes', async () => {
      const first = await client.putSecret({ projectId: project, name: 'hook', value: 'whsec_first_value_123' });
      expect(first).toMatchObject({ name: 'hook', version: 1, created: true });
      expect(first.createTime).toBeInstanceOf(Date);
      await client.putSecret({ projectId: project, name: 'a-key', value: 'sk-a-key-value-456' });

      const rotated = await client.putSecret({ projectId: project, name: 'hook', value: 'whsec_second_value_789' });
      expect(rotated).toMatchObject({ name: 'hook', version: 2, created: false });
      expect(rotated.createTime).toEqual(first.createTime);
      expect(rotated.updateTime!.getTime()).toBeGreaterThanOrEqual(first.updateTime!.getTime());
      expect((await client.resolveSecret({ projectId: project, name: 'hook' })).value).toBe('whsec_second_value_789');

      const listed = await client.listSecrets({ projectId: project });
      expect(listed.secrets.map((secret) => [secret.name, secret.version])).toEqual([
        ['a-key', 1],
        ['hook', 2],
      ]);
      expect(listed.secrets[1]).toMatchObject({ createTime: first.createTime, updateTime: rotated.updateTime });
      const text = JSON.stringify(listed);
      for (const value of ['whsec_first_value_123', 'whsec_second_value_789', 'sk-a-key-value-456']) expect(text).not.toContain(value);
      // Another project's secrets stay out of the list; an unknown project has none.
      expect(listed.secrets.map((secret) => secret.name)).not.toContain('webhook');
      expect((await client.listSecrets({ projectId: 'prj_nope' })).secrets).toEqual([]);

      expect(await client.deleteSecret({ projectId: project, name: 'hook' })).toEqual({ deleted: true });
      expect(await client.deleteSecret({ projectId: project, name: 'hook' })).toEqual({ deleted: false });
      expect((await rejection(client.resolveSecret({ projectId: project, name: 'hook' }))).code).toBe('actor.secret.not_found');
      expect((await client.listSecrets({ projectId: project })).secrets.map((secret) => secret.name)).toEqual(['a-key']);
      // Deleting in one project leaves the same name in another alone.
      expect((await client.resolveSecret({ projectId: 'prj_default', name: 'webhook' })).value).toBe('whsec_abc');

      // Written again after a delete, the secret starts over.
      const again = await client.putSecret({ projectId: project, name: 'hook', value: 'whsec_third' });
      expect(again).toMatchObject({ version: 1, created: true });
    });

    it('refuses bad names, empty values and values over the cap', async () => {
      for (const name of ['', 'Upper', '-dash-first', 'a/b', 'x'.repeat(64)]) {
        expect((await rejection(client.putSecret({ projectId: project, name, value: 'v' }))).status).toBe(Status.INVALID_ARGUMENT);
      }
      expect((await rejection(client.deleteSecret({ projectId: project, name: 'Bad Name' }))).status).toBe(Status.INVALID_ARGUMENT);
      expect((await rejection(client.putSecret({ projectId: project, name: 'empty', value: '' }))).status).toBe(Status.INVALID_ARGUMENT);
      const big = await rejection(client.putSecret({ projectId: project, name: 'big', value: 'é'.repeat(maxSecretValueBytes / 2 + 1) }));
      expect(big.status).toBe(Status.INVALID_ARGUMENT);
      expect(big.message).not.toContain('éé');
      expect((await client.putSecret({ projectId: project, name: 'big', value: 'x'.repeat(maxSecretValueBytes) })).version).toBe(1);
      expect((await client.listSecrets({ projectId: project })).secrets.map((secret) => secret.name)).not.toContain('empty');
    });
  });

});

/** A registry restarted on the data dir (PGlite) or database (Postgres) an older release left behind. */
describe('the development token across a registry restart', () => {
  const devToken = 'dev-token-restart-test';
  let dataDir = '';
  let database: Awaited<ReturnType<typeof testDatabase>> | undefined;
  let registry: Awaited<ReturnType<typeof startRegistry>> | undefined;

  afterAll(async () => {
    await registry?.stop();
    await database?.drop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('gets secrets:admin added to that token only, keeping the scopes it had', { timeout: 120_000 }, async () => {
    database = await testDatabase();
    if (!database.databaseUrl) dataDir = await mkdtemp(join(tmpdir(), 'actor-registry-restart-'));
    const config = loadRegistryConfig({
      REGISTRY_ADDR: '127.0.0.1:0',
      DATABASE_URL: database.databaseUrl,
      ACTOR_DATA_DIR: dataDir || database.dataDir,
      ACTOR_DEV_TOKEN: devToken,
    });
    const start = async () => {
      await registry?.stop();
      registry = await startRegistry({ config, secretKey: 'test-key', logger: createLogger('registry', 'silent') });
      return createClient(RegistryServiceDefinition, registry.address);
    };

    let client = await start();
    expect((await client.authenticateToken({ token: devToken })).scopes).toContain('secrets:admin');
    await client.putSecret({ projectId: 'prj_default', name: 'hook', value: 'whsec_before_restart' });
    // What an older release left: the dev token without secrets:admin, plus a scope an operator added;
    // and another token, which a restart must not touch.
    const oldScopes = ['tasks:read', 'tasks:write', 'agents:admin', 'usage:read', 'custom:extra'];
    await registry!.database.db.execute(
      sql`update registry.api_tokens set scopes = ${JSON.stringify(oldScopes)}::jsonb where token_hash = ${hashToken(devToken)}`,
    );
    await new RegistryRepository(registry!.database.db).ensureToken('tok_other_test', 'prj_default', hashToken('other-token'), ['tasks:read']);
    expect((await client.authenticateToken({ token: devToken })).scopes).not.toContain('secrets:admin');

    // Twice, so a second start adds no duplicate.
    client = await start();
    client = await start();
    expect((await client.authenticateToken({ token: devToken })).scopes).toEqual([...oldScopes, 'secrets:admin']);
    expect((await client.authenticateToken({ token: 'other-token' })).scopes).toEqual(['tasks:read']);
    expect((await client.resolveSecret({ projectId: 'prj_default', name: 'hook' })).value).toBe('whsec_before_restart');
  });
});
