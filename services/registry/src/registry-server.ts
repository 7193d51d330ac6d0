import { fileURLToPath } from 'node:url';
import { openDatabase, startGrpcServer, type Logger } from '@actor/kit';
import { RegistryServiceDefinition } from '@actor/proto/registry';
import type { RegistryConfig } from './config.js';
import { RegistryRepository } from './db/registry-repository.js';
import { schema } from './db/schema.js';
import { SecretBox } from './domain/secret-box.js';
import { bootstrapRegistry, createRegistryService } from './registry-service.js';

export interface StartRegistryOptions {
  config: RegistryConfig;
  secretKey: string;
  logger: Logger;
}

/** Database -> migrations -> bootstrap -> gRPC server. Used by main.ts and by tests (port 0). */
export async function startRegistry({ config, secretKey, logger }: StartRegistryOptions) {
  const database = await openDatabase({
    service: 'registry',
    databaseUrl: config.REGISTRY_DATABASE_URL ?? config.DATABASE_URL,
    dataDir: config.ACTOR_DATA_DIR,
    migrationsFolder: fileURLToPath(new URL('../migrations', import.meta.url)),
    schema,
    logger,
  });
  const repository = new RegistryRepository(database.db);
  await bootstrapRegistry(repository, config.ACTOR_DEV_TOKEN);
  const server = await startGrpcServer({
    name: 'registry',
    address: config.REGISTRY_ADDR,
    logger,
    serviceNames: [RegistryServiceDefinition.fullName],
    register: (grpcServer, shutdownSignal) =>
      grpcServer.add(
        RegistryServiceDefinition,
        createRegistryService({ repository, secretBox: new SecretBox(secretKey), shutdownSignal }),
      ),
  });
  return {
    address: server.address,
    server,
    database,
    async stop() {
      await server.shutdown();
      await database.close();
    },
  };
}
