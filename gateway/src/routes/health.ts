import type { ServiceName } from '@actor/kit';
import { healthServiceNames, type GatewayClients } from '../clients.js';
import type { Route } from '../router.js';
import { sendJson } from '../send-json.js';

/** grpc.health.v1 HealthCheckResponse.ServingStatus.SERVING (the package exports the enum only from a deep path). */
const servingStatus = 1;

/** `serving`, `not_serving` (answered, but not healthy) or `unreachable` (no answer within 1 s). */
export type ServiceReadiness = 'serving' | 'not_serving' | 'unreachable';

/** Asks every service's grpc.health.v1 about its own API, all at once. */
export async function checkServices(clients: GatewayClients): Promise<Record<ServiceName, ServiceReadiness>> {
  const names = Object.keys(healthServiceNames) as ServiceName[];
  const results = await Promise.all(
    names.map(async (name): Promise<[ServiceName, ServiceReadiness]> => {
      try {
        const answer = await clients.health[name].check({ service: healthServiceNames[name] });
        return [name, answer.status === servingStatus ? 'serving' : 'not_serving'];
      } catch {
        return [name, 'unreachable'];
      }
    }),
  );
  return Object.fromEntries(results) as Record<ServiceName, ServiceReadiness>;
}

export const healthRoutes: Route[] = [
  {
    method: 'GET',
    pattern: '/healthz',
    access: 'public',
    handle(context) {
      sendJson(context.response, 200, { status: 'ok' });
    },
  },
  {
    method: 'GET',
    pattern: '/readyz',
    access: 'public',
    /** 200 when all five services serve; else 503 naming the others in `not_ready`. */
    async handle(context) {
      const services = await checkServices(context.clients);
      const notReady = Object.entries(services)
        .filter(([, readiness]) => readiness !== 'serving')
        .map(([name]) => name);
      if (notReady.length === 0) {
        sendJson(context.response, 200, { status: 'ready', services });
      } else {
        sendJson(context.response, 503, { status: 'not_ready', services, not_ready: notReady }, { 'Retry-After': '1' });
      }
    },
  },
];
