import { Status } from 'nice-grpc';
import type { ActorClient } from '@actor/kit';
import type { RegistryServiceDefinition } from '@actor/proto/registry';

/**
 * Reads named project secrets (bring-your-own keys) for the adapters. A resolved value lives only in
 * memory: it is never logged, put in an event or an error, or stored by this service.
 */
export interface SecretResolver {
  /**
   * The plaintext of the project's secret `name`. Rejects with a `SecretResolutionError` whose
   * message names the project and the secret, never a value.
   */
  resolve(projectId: string, name: string, signal?: AbortSignal): Promise<string>;
}

/** Why a secret could not be had. `retryable` is false when the project has no such secret. */
export class SecretResolutionError extends Error {
  override readonly name = 'SecretResolutionError';
  constructor(
    message: string,
    readonly code: 'actor.secret.not_found' | 'actor.secret.unavailable',
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

export interface GrpcSecretResolverOptions {
  /**
   * How long a resolved value is reused before the registry is asked again, in ms; default 30 000.
   * Short, so that a rotated key is picked up soon; 0 asks the registry every time.
   */
  cacheTtlMs?: number;
  /** The clock, in ms since the epoch; tests move it. */
  now?: () => number;
}

/** The one registry call this resolver makes. */
type SecretClient = Pick<ActorClient<typeof RegistryServiceDefinition>, 'resolveSecret'>;

/**
 * Resolves secrets through the registry's internal `ResolveSecret` RPC, caching each value briefly so
 * that a busy slot does not ask the registry once per attempt. Failures are not cached.
 */
export class GrpcSecretResolver implements SecretResolver {
  private readonly cache = new Map<string, { value: string; expiresAt: number }>();
  private readonly inFlight = new Map<string, Promise<string>>();
  private readonly cacheTtlMs: number;
  private readonly now: () => number;

  constructor(
    private readonly registry: SecretClient,
    options: GrpcSecretResolverOptions = {},
  ) {
    this.cacheTtlMs = Math.max(0, options.cacheTtlMs ?? 30_000);
    this.now = options.now ?? Date.now;
  }

  async resolve(projectId: string, name: string, signal?: AbortSignal): Promise<string> {
    const key = `${projectId}\u0000${name}`;
    const cached = this.cache.get(key);
    if (cached && cached.expiresAt > this.now()) return cached.value;
    if (cached) this.cache.delete(key);
    // Attempts that start together share one registry call.
    let pending = this.inFlight.get(key);
    if (!pending) {
      pending = this.fetch(projectId, name, signal).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, pending);
    }
    return pending;
  }

  private async fetch(projectId: string, name: string, signal: AbortSignal | undefined): Promise<string> {
    let value: string;
    try {
      ({ value } = await this.registry.resolveSecret({ projectId, name }, { signal }));
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (code === Status.NOT_FOUND) {
        throw new SecretResolutionError(`project ${projectId} has no secret named "${name}"`, 'actor.secret.not_found', false);
      }
      // The registry's message is about the call (deadline, connection), never the value; the status name suffices.
      const status = typeof code === 'number' ? (Status[code] ?? String(code)) : 'no answer';
      throw new SecretResolutionError(`could not read secret "${name}" of project ${projectId} from the registry (${status})`, 'actor.secret.unavailable', true);
    }
    if (this.cacheTtlMs > 0) this.cache.set(`${projectId}\u0000${name}`, { value, expiresAt: this.now() + this.cacheTtlMs });
    return value;
  }
}
