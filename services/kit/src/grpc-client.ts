import {
  Status,
  createChannel,
  createClientFactory,
  type Channel,
  type Client,
  type CompatServiceDefinition,
} from 'nice-grpc';
import { deadlineMiddleware, type DeadlineOptions } from 'nice-grpc-client-middleware-deadline';
import { retryMiddleware, type RetryOptions } from 'nice-grpc-client-middleware-retry';

/** A client whose calls accept `deadline` and the retry options. */
export type ActorClient<Service extends CompatServiceDefinition> = Client<Service, DeadlineOptions & RetryOptions>;

export interface ClientOptions {
  /** Deadline of every unary call, in ms, unless the call sets its own; default 10 000. */
  deadlineMs?: number;
}

const channels = new Map<string, Channel>();

/** One channel per address per process: HTTP/2 multiplexes every call over it. */
export function channelFor(address: string): Channel {
  let channel = channels.get(address);
  if (!channel) {
    channel = createChannel(address);
    channels.set(address, channel);
  }
  return channel;
}

/**
 * A typed client with a default deadline on every call and retries (with backoff) only on methods
 * the proto marks idempotent or side-effect free; the retry middleware reads that mark itself.
 * Server-streaming calls get no default deadline: a watch lives as long as its caller wants.
 */
export function createClient<Service extends CompatServiceDefinition>(
  definition: Service,
  address: string,
  options: ClientOptions = {},
): ActorClient<Service> {
  const deadlineMs = options.deadlineMs ?? 10_000;
  const defaultCallOptions: Record<string, { deadline?: number; retryMaxAttempts?: number; retryableStatuses?: Status[] }> = {};
  const methods = (definition as unknown as { methods?: Record<string, { responseStream: boolean }> }).methods ?? {};
  for (const [methodName, method] of Object.entries(methods)) {
    defaultCallOptions[methodName] = method.responseStream ? {} : {
          deadline: deadlineMs,
          retryMaxAttempts: 3,
          // Only a peer that is down or restarting is retried; budget refusals and lost leases are
          // answers, not glitches.
          retryableStatuses: [Status.UNAVAILABLE],
        };
  }
  return createClientFactory()
    .use(retryMiddleware)
    .use(deadlineMiddleware)
    .create(definition, channelFor(address), defaultCallOptions as never);
}

/** Closes every channel this process opened (at shutdown). */
export function closeChannels(): void {
  for (const channel of channels.values()) channel.close();
  channels.clear();
}
