import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '@actor/kit';
import { createGatewayClients, type GatewayClients } from './clients.js';
import type { GatewayConfig } from './config.js';
import { GatewayMetrics } from './gateway-metrics.js';
import { problemFromError, problems, sendProblem } from './problem.js';
import { Router, type Route } from './router.js';
import { adapterRoutes } from './routes/adapters.js';
import { agentRoutes } from './routes/agents.js';
import { healthRoutes } from './routes/health.js';
import { metaRoutes } from './routes/meta.js';
import { secretRoutes } from './routes/secrets.js';
import { taskEventRoutes } from './routes/task-events.js';
import { taskRoutes } from './routes/tasks.js';
import { usageRoutes } from './routes/usage.js';
import type { SseStream } from './sse.js';
import { TokenAuthenticator } from './token-authenticator.js';

export interface StartGatewayOptions {
  config: GatewayConfig;
  logger: Logger;
}

export interface RunningGateway {
  /** `http://host:port`, the base of every route. */
  url: string;
  port: number;
  /** Ends open event streams, stops accepting connections and closes the open ones. */
  stop(): Promise<void>;
}

/** Clients -> routes -> HTTP server -> listen. Used by main.ts and by tests (GATEWAY_PORT 0). */
export async function startGateway({ config, logger }: StartGatewayOptions): Promise<RunningGateway> {
  const clients = createGatewayClients(config);
  const metrics = new GatewayMetrics();
  const authenticator = new TokenAuthenticator(clients.registry, config.GATEWAY_AUTH_CACHE_MS);
  const openStreams = new Set<SseStream>();
  const routes: Route[] = [
    ...taskRoutes,
    ...taskEventRoutes(metrics, openStreams),
    ...agentRoutes,
    ...adapterRoutes,
    ...usageRoutes,
    ...secretRoutes,
    ...healthRoutes,
    ...metaRoutes(metrics),
  ];
  const router = new Router(routes);
  const handler = requestHandler({ config, logger, clients, metrics, authenticator, router });

  const server = createServer((request, response) => void handler(request, response));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.GATEWAY_PORT, config.GATEWAY_HOST, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${urlHost(config.GATEWAY_HOST)}:${port}`;
  logger.info({ url }, 'gateway listening');

  return {
    url,
    port,
    async stop() {
      for (const stream of openStreams) stream.close();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

interface HandlerDependencies {
  config: GatewayConfig;
  logger: Logger;
  clients: GatewayClients;
  metrics: GatewayMetrics;
  authenticator: TokenAuthenticator;
  router: Router;
}

function requestHandler({ config, logger, clients, metrics, authenticator, router }: HandlerDependencies) {
  return async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const started = performance.now();
    const method = request.method ?? 'GET';
    let routeName = 'unmatched';
    const disconnected = new AbortController();
    response.on('close', () => {
      if (!response.writableFinished) disconnected.abort();
      metrics.recordRequest(method, routeName, response.statusCode, (performance.now() - started) / 1000);
    });
    let pathname = '/';
    try {
      const url = new URL(request.url ?? '/', 'http://gateway.invalid');
      pathname = url.pathname;
      let match;
      try {
        match = router.match(method, pathname);
      } catch {
        throw problems.invalid('the request path is not valid percent-encoding');
      }
      if (match.kind === 'not_found') throw problems.notFound(`no route ${pathname}`);
      if (match.kind === 'method_not_allowed') throw problems.methodNotAllowed(match.allowed);
      const { route, params } = match;
      routeName = route.pattern;
      const identity =
        route.access === 'public'
          ? undefined
          : await authenticator.authenticate(request.headers.authorization, disconnected.signal);
      if (identity && route.access !== 'authenticated' && !identity.scopes.includes(route.access)) {
        throw problems.forbidden(route.access);
      }
      await route.handle({ request, response, url, params, identity, config, clients, logger, signal: disconnected.signal });
    } catch (error) {
      if (disconnected.signal.aborted) return;
      const problem = problemFromError(error);
      if (!problem) logger.error({ err: error, method, path: pathname }, 'unhandled error');
      else if (problem.status >= 500) logger.warn({ status: problem.status, code: problem.code, detail: problem.detail, method, path: pathname }, 'request failed');
      if (response.headersSent) {
        // Too late for a problem document (an event stream was already open): cut the connection.
        response.destroy();
        return;
      }
      sendProblem(response, problem ?? problems.internal(), pathname);
    }
  };
}
