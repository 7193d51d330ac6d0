import { fileURLToPath } from 'node:url';
import { createClient, openDatabase, startGrpcServer, type Logger } from '@actor/kit';
import { BillingServiceDefinition } from '@actor/proto/billing';
import { RegistryServiceDefinition } from '@actor/proto/registry';
import { createBillingService } from './billing-service.js';
import type { BillingConfig } from './config.js';
import { BillingRepository } from './db/billing-repository.js';
import { schema } from './db/schema.js';
import { RateCardSource } from './rate-card-source.js';
import { ReservationSweeper } from './reservation-sweeper.js';

export interface StartBillingOptions {
  config: BillingConfig;
  logger: Logger;
}

/** Database -> migrations -> gRPC server -> reservation sweeper. Used by main.ts and by tests (port 0). */
export async function startBilling({ config, logger }: StartBillingOptions) {
  const database = await openDatabase({
    service: 'billing',
    databaseUrl: config.BILLING_DATABASE_URL ?? config.DATABASE_URL,
    dataDir: config.ACTOR_DATA_DIR,
    migrationsFolder: fileURLToPath(new URL('../migrations', import.meta.url)),
    schema,
    logger,
  });
  const repository = new BillingRepository(database.db);
  const rateCards = new RateCardSource(createClient(RegistryServiceDefinition, config.REGISTRY_ADDR));
  const server = await startGrpcServer({
    name: 'billing',
    address: config.BILLING_ADDR,
    logger,
    serviceNames: [BillingServiceDefinition.fullName],
    register: (grpcServer) => grpcServer.add(BillingServiceDefinition, createBillingService({ repository, rateCards, logger })),
  });
  const sweeper = new ReservationSweeper({ repository, logger, intervalMs: config.BILLING_SWEEP_INTERVAL_MS });
  sweeper.start();
  return {
    address: server.address,
    server,
    database,
    sweeper,
    async stop() {
      await sweeper.stop();
      await server.shutdown();
      await database.close();
    },
  };
}
