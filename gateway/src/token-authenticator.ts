import { createHash } from 'node:crypto';
import { Status } from 'nice-grpc';
import { remoteError } from '@actor/kit';
import type { GatewayClients } from './clients.js';
import { problemFromError, problems } from './problem.js';

/** Who is calling: resolved from a bearer token by the registry. */
export interface Identity {
  projectId: string;
  /** The token's id (never the token), recorded as `cancel_requested_by` and in logs. */
  tokenId: string;
  scopes: string[];
}

/** Most tokens remembered at once; beyond it the oldest entry is forgotten. */
const maxCachedTokens = 10_000;

/**
 * Resolves `Authorization: Bearer <token>` through registry.AuthenticateToken. Accepted tokens are
 * remembered for `cacheMs` (keyed by a SHA-256 of the token, so raw tokens are not kept in memory);
 * refusals are never cached, so a token created a moment ago works at once.
 */
export class TokenAuthenticator {
  private readonly cache = new Map<string, { identity: Identity; expiresAt: number }>();

  constructor(
    private readonly registry: GatewayClients['registry'],
    private readonly cacheMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The caller's identity; throws a 401 problem for a missing or refused token. */
  async authenticate(authorization: string | undefined, signal?: AbortSignal): Promise<Identity> {
    const token = bearerToken(authorization);
    if (token === undefined) {
      throw problems.unauthenticated('send an API token as `Authorization: Bearer <token>`', false);
    }
    const key = createHash('sha256').update(token).digest('base64url');
    const cached = this.cache.get(key);
    if (cached && cached.expiresAt > this.now()) return cached.identity;
    this.cache.delete(key);
    try {
      const answer = await this.registry.authenticateToken({ token }, { signal });
      const identity = { projectId: answer.projectId, tokenId: answer.tokenId, scopes: answer.scopes };
      if (this.cacheMs > 0) {
        if (this.cache.size >= maxCachedTokens) this.cache.delete(this.cache.keys().next().value!);
        this.cache.set(key, { identity, expiresAt: this.now() + this.cacheMs });
      }
      return identity;
    } catch (error) {
      if (remoteError(error)?.status === Status.UNAUTHENTICATED) {
        throw problems.unauthenticated('the API token is unknown or revoked', true);
      }
      throw problemFromError(error) ?? error;
    }
  }
}

/** The token of a `Bearer` authorization header (scheme case-insensitive), or undefined. */
export function bearerToken(authorization: string | undefined): string | undefined {
  if (!authorization) return undefined;
  const match = /^Bearer[ ]+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(authorization);
  return match ? match[1] : undefined;
}
