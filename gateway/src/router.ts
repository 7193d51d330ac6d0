import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '@actor/kit';
import type { GatewayClients } from './clients.js';
import type { GatewayConfig } from './config.js';
import type { Identity } from './token-authenticator.js';

/** Everything a route handler gets for one request. */
export interface RouteContext {
  request: IncomingMessage;
  response: ServerResponse;
  url: URL;
  /** Path parameters by name (`{id}` in the pattern), percent-decoded. */
  params: Record<string, string>;
  /** The caller, resolved from the bearer token; absent only on routes with `access: 'public'`. */
  identity: Identity | undefined;
  config: GatewayConfig;
  clients: GatewayClients;
  logger: Logger;
  /** Aborted when the client goes away before the answer is complete. */
  signal: AbortSignal;
}

/**
 * One route. `access`: `public` (no token), `authenticated` (any valid token) or a scope the token
 * must carry (`tasks:write`, `agents:admin`). `name` labels metrics; it is the pattern itself.
 */
export interface Route {
  method: string;
  pattern: string;
  access: 'public' | 'authenticated' | string;
  handle(context: RouteContext): Promise<void> | void;
}

export type RouteMatch =
  | { kind: 'found'; route: Route; params: Record<string, string> }
  | { kind: 'method_not_allowed'; allowed: string[] }
  | { kind: 'not_found' };

interface CompiledRoute {
  route: Route;
  segments: string[];
}

/** Matches `/v1/tasks/{id}` style patterns segment by segment; literal segments win over parameters. */
export class Router {
  private readonly routes: CompiledRoute[];

  constructor(routes: Route[]) {
    this.routes = routes.map((route) => ({ route, segments: route.pattern.split('/').slice(1) }));
  }

  /** Throws URIError for a malformed percent-encoding in a path parameter. */
  match(method: string, pathname: string): RouteMatch {
    const segments = pathname.split('/').slice(1);
    const allowed: string[] = [];
    let best: { route: Route; params: Record<string, string>; literals: number } | undefined;
    for (const candidate of this.routes) {
      const params = matchSegments(candidate.segments, segments);
      if (!params) continue;
      if (candidate.route.method !== method) {
        allowed.push(candidate.route.method);
        continue;
      }
      const literals = candidate.segments.filter((segment) => !segment.startsWith('{')).length;
      if (!best || literals > best.literals) best = { route: candidate.route, params, literals };
    }
    if (best) return { kind: 'found', route: best.route, params: best.params };
    if (allowed.length > 0) return { kind: 'method_not_allowed', allowed: [...new Set(allowed)] };
    return { kind: 'not_found' };
  }
}

function matchSegments(pattern: string[], path: string[]): Record<string, string> | undefined {
  if (pattern.length !== path.length) return undefined;
  const params: Record<string, string> = {};
  for (let index = 0; index < pattern.length; index++) {
    const expected = pattern[index]!;
    const actual = path[index]!;
    if (expected.startsWith('{') && expected.endsWith('}')) {
      if (actual === '') return undefined;
      params[expected.slice(1, -1)] = decodeURIComponent(actual);
    } else if (expected !== actual) {
      return undefined;
    }
  }
  return params;
}
