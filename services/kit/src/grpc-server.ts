import { createServer, type Server } from 'nice-grpc';
import { HealthDefinition, HealthServiceImpl, HealthState } from 'nice-grpc-server-health';
import { ServerReflection, ServerReflectionService } from 'nice-grpc-server-reflection';
import { loadDescriptorSet } from '@actor/proto/descriptor';
import { errorMiddleware } from './errors.js';
import type { Logger } from './logger.js';

export interface GrpcServerOptions {
  /** Service name for logs. */
  name: string;
  /** `host:port` to listen on; port 0 picks a free one. */
  address: string;
  logger: Logger;
  /** Fully-qualified names of the services registered, exposed through reflection and health. */
  serviceNames: string[];
  /**
   * Adds the service implementations; receives the server (error middleware applied) and a signal
   * aborted when shutdown starts, for long server streams to end themselves.
   */
  register: (server: Server, shutdownSignal: AbortSignal) => void;
  /** How long shutdown waits for in-flight calls before cancelling them, in ms; default 5000. */
  drainMs?: number;
}

export interface RunningGrpcServer {
  /** The bound port (useful when asked for port 0). */
  port: number;
  /** `127.0.0.1:<port>` style address clients can dial. */
  address: string;
  health: ReturnType<typeof HealthState>;
  /** Aborted when shutdown starts, so that long server streams can end themselves. */
  shutdownSignal: AbortSignal;
  /** Goes unhealthy, stops accepting calls, drains in-flight calls, then cancels what is left. */
  shutdown(): Promise<void>;
}

/**
 * Every Actor service serves `grpc.health.v1` and server reflection beside its own API, and maps
 * domain errors to gRPC status through one middleware.
 */
export async function startGrpcServer(options: GrpcServerOptions): Promise<RunningGrpcServer> {
  const server = createServer().use(errorMiddleware(options.logger));
  const health = HealthState();
  server.add(HealthDefinition, HealthServiceImpl(health));
  server.add(
    ServerReflectionService,
    // Health is served but not reflected: its descriptor is not in our set, and probes do not need it.
    ServerReflection(loadDescriptorSet(), options.serviceNames),
  );
  const shutdownController = new AbortController();
  options.register(server, shutdownController.signal);
  const port = await server.listen(options.address);
  const host = options.address.slice(0, options.address.lastIndexOf(':'));
  for (const serviceName of options.serviceNames) health.setStatus('healthy', serviceName);
  options.logger.info({ address: `${host}:${port}` }, `${options.name} listening`);
  return {
    port,
    address: `${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`,
    health,
    shutdownSignal: shutdownController.signal,
    async shutdown() {
      health.setStatus('unhealthy');
      for (const serviceName of options.serviceNames) health.setStatus('unhealthy', serviceName);
      shutdownController.abort();
      let timer: NodeJS.Timeout | undefined;
      const drained = await Promise.race([
        server.shutdown().then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), options.drainMs ?? 5_000);
        }),
      ]);
      clearTimeout(timer);
      if (!drained) {
        options.logger.warn('drain timed out; cancelling in-flight calls');
        server.forceShutdown();
      }
    },
  };
}
