import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, createLogger } from '@actor/kit';
import { testDatabase } from '@actor/kit/testing';
import { RegistryServiceDefinition } from '@actor/proto/registry';
import { loadRegistryConfig } from '../../../registry/src/config.js';
import { startRegistry } from '../../../registry/src/registry-server.js';
import { GrpcSecretResolver, SecretResolutionError } from './secret-resolver.js';

/** The resolver against a real registry server and database (PGlite, or Postgres with DATABASE_URL). */
describe('GrpcSecretResolver', () => {
  let registry: Awaited<ReturnType<typeof startRegistry>>;
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let client: ReturnType<typeof createClient<typeof RegistryServiceDefinition>>;

  beforeAll(async () => {
    database = await testDatabase();
    registry = await startRegistry({
      config: loadRegistryConfig({ REGISTRY_ADDR: '127.0.0.1:0', DATABASE_URL: database.databaseUrl, ACTOR_DATA_DIR: database.dataDir }),
      secretKey: 'secret-resolver-test',
      logger: createLogger('test', 'silent'),
    });
    client = createClient(RegistryServiceDefinition, registry.address);
  });
  afterAll(async () => {
    await registry?.stop();
    await database?.drop();
  });

  it('returns the decrypted value and reuses it for the cache time only, so a rotated key is picked up', async () => {
    await client.putSecret({ projectId: 'prj_default', name: 'openai-key', value: 'sk-byo-first-0123456789' });
    let now = 1_000_000;
    const resolver = new GrpcSecretResolver(client, { cacheTtlMs: 30_000, now: () => now });
    expect(await resolver.resolve('prj_default', 'openai-key')).toBe('sk-byo-first-0123456789');
    await client.putSecret({ projectId: 'prj_default', name: 'openai-key', value: 'sk-byo-second-0123456789' });
    now += 29_999;
    expect(await resolver.resolve('prj_default', 'openai-key')).toBe('sk-byo-first-0123456789');
    now += 2;
    expect(await resolver.resolve('prj_default', 'openai-key')).toBe('sk-byo-second-0123456789');
    // With no cache every call reads the registry.
    const uncached = new GrpcSecretResolver(client, { cacheTtlMs: 0 });
    await client.putSecret({ projectId: 'prj_default', name: 'openai-key', value: 'sk-byo-third-0123456789' });
    expect(await uncached.resolve('prj_default', 'openai-key')).toBe('sk-byo-third-0123456789');
  });

  it('says which secret of which project is missing, and does not cache the miss', async () => {
    const resolver = new GrpcSecretResolver(client);
    const error = await resolver.resolve('prj_default', 'anthropic-key').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(SecretResolutionError);
    expect(error).toMatchObject({ code: 'actor.secret.not_found', retryable: false, message: 'project prj_default has no secret named "anthropic-key"' });
    await client.putSecret({ projectId: 'prj_default', name: 'anthropic-key', value: 'sk-ant-byo-0123456789' });
    expect(await resolver.resolve('prj_default', 'anthropic-key')).toBe('sk-ant-byo-0123456789');
    // Another project's secret of the same name is not this project's.
    await expect(resolver.resolve('prj_other', 'anthropic-key')).rejects.toMatchObject({ code: 'actor.secret.not_found' });
  });

  it('reports a registry that does not answer as unavailable', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as { port: number };
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const resolver = new GrpcSecretResolver(createClient(RegistryServiceDefinition, `127.0.0.1:${port}`, { deadlineMs: 2_000 }));
    await expect(resolver.resolve('prj_default', 'openai-key')).rejects.toMatchObject({
      code: 'actor.secret.unavailable',
      retryable: true,
      message: expect.stringMatching(/^could not read secret "openai-key" of project prj_default from the registry \((UNAVAILABLE|DEADLINE_EXCEEDED)\)$/),
    });
  });
});
