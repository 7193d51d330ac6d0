import { fileURLToPath } from 'node:url';
import { createClient, openDatabase, startGrpcServer, type Logger } from '@actor/kit';
import { PlacementServiceDefinition } from '@actor/proto/placement';
import { RegistryServiceDefinition } from '@actor/proto/registry';
import { AdapterCatalog } from './adapter-catalog.js';
import type { PlacementConfig } from './config.js';
import { PlacementRepository } from './db/placement-repository.js';
import { schema } from './db/schema.js';
import { createPlacementService } from './placement-service.js';

export interface StartPlacementOptions {
  config: PlacementConfig;
  logger: Logger;
}

/** Database -> migrations -> registry catalog -> gRPC server. Used by main.ts and by tests (port 0). */
export async function startPlacement({ config, logger }: StartPlacementOptions) {
  const database = await openDatabase({
    service: 'placement',
    databaseUrl: config.PLACEMENT_DATABASE_URL ?? config.DATABASE_URL,
    dataDir: config.ACTOR_DATA_DIR,
    migrationsFolder: fileURLToPath(new URL('../migrations', import.meta.url)),
    schema,
    logger,
  });
  const catalog = new AdapterCatalog(createClient(RegistryServiceDefinition, config.REGISTRY_ADDR), {
    ttlMs: config.PLACEMENT_ADAPTER_CACHE_MS,
    logger,
  });
  catalog.watch();
  let server;
  try {
    server = await startGrpcServer({
      name: 'placement',
      address: config.PLACEMENT_ADDR,
      logger,
      serviceNames: [PlacementServiceDefinition.fullName],
      register: (grpcServer) =>
        grpcServer.add(
          PlacementServiceDefinition,
          createPlacementService({
            repository: new PlacementRepository(database.db),
            catalog,
            circuitCooldownMs: config.PLACEMENT_CIRCUIT_COOLDOWN_MS,
            hysteresisMargin: config.PLACEMENT_HYSTERESIS_MARGIN,
            hysteresisWindowMs: config.PLACEMENT_HYSTERESIS_WINDOW_MS,
            logger,
          }),
        ),
    });
  } catch (error) {
    await catalog.stop();
    await database.close();
    throw error;
  }
  const running = server;
  return {
    address: running.address,
    server: running,
    database,
    async stop() {
      await running.shutdown();
      await catalog.stop();
      await database.close();
    },
  };
}
