import { createClient, type ServiceName } from '@actor/kit';
import { BillingServiceDefinition } from '@actor/proto/billing';
import { ExecutionServiceDefinition } from '@actor/proto/execution';
import { PlacementServiceDefinition } from '@actor/proto/placement';
import { PoolServiceDefinition } from '@actor/proto/pool';
import { RegistryServiceDefinition } from '@actor/proto/registry';
import { HealthDefinition } from 'nice-grpc-server-health';
import type { GatewayConfig } from './config.js';

/** How long /readyz waits for each service's health answer. */
const healthDeadlineMs = 1_000;

/** The gRPC clients the gateway talks through, one per peer, plus a health client per service. */
export function createGatewayClients(config: GatewayConfig) {
  const addresses: Record<ServiceName, string> = {
    registry: config.REGISTRY_ADDR,
    pool: config.POOL_ADDR,
    placement: config.PLACEMENT_ADDR,
    execution: config.EXECUTION_ADDR,
    billing: config.BILLING_ADDR,
  };
  const health = Object.fromEntries(
    Object.entries(addresses).map(([name, address]) => [
      name,
      createClient(HealthDefinition, address, { deadlineMs: healthDeadlineMs }),
    ]),
  ) as Record<ServiceName, ReturnType<typeof createClient<typeof HealthDefinition>>>;
  return {
    registry: createClient(RegistryServiceDefinition, addresses.registry),
    execution: createClient(ExecutionServiceDefinition, addresses.execution),
    pool: createClient(PoolServiceDefinition, addresses.pool),
    billing: createClient(BillingServiceDefinition, addresses.billing),
    health,
  };
}

export type GatewayClients = ReturnType<typeof createGatewayClients>;

/** The gRPC service each health probe asks about (`grpc.health.v1` per-service status). */
export const healthServiceNames: Record<ServiceName, string> = {
  registry: RegistryServiceDefinition.fullName,
  pool: PoolServiceDefinition.fullName,
  placement: PlacementServiceDefinition.fullName,
  execution: ExecutionServiceDefinition.fullName,
  billing: BillingServiceDefinition.fullName,
};
