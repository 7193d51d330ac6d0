import type { ServerResponse } from 'node:http';
import { Status } from 'nice-grpc';
import { remoteError } from '@actor/kit';

/** One field-level validation failure, as listed in a 400 problem's `errors` member. */
export interface FieldError {
  /** Where in the request: `budget.per_task_usd`, `webhooks[0].url`, `(body)` for the whole body. */
  path: string;
  message: string;
}

/**
 * An RFC 9457 problem. `type` is `urn:actor:problem:<code>` so that the URI and the stable `code`
 * always agree; `instance` is the request path. Extension members (`errors`) are added as given.
 */
export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  instance?: string;
  errors?: FieldError[];
}

/** A failure a route answers with; thrown anywhere below a handler and rendered by the server. */
export class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly options: { errors?: FieldError[]; headers?: Record<string, string> } = {},
  ) {
    super(detail);
    this.name = 'HttpProblem';
  }
}

const titles: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/**
 * The HTTP status a gRPC status becomes (STYLE.md). FAILED_PRECONDITION is 409: the request was
 * well-formed but conflicts with the resource's current state (deleting an agent that holds a lease);
 * retrying only helps after that state changes. Everything unlisted is 500.
 */
export function httpStatusForGrpc(status: Status): number {
  switch (status) {
    case Status.INVALID_ARGUMENT:
    case Status.OUT_OF_RANGE:
      return 400;
    case Status.UNAUTHENTICATED:
      return 401;
    case Status.PERMISSION_DENIED:
      return 403;
    case Status.NOT_FOUND:
      return 404;
    case Status.ALREADY_EXISTS:
    case Status.ABORTED:
    case Status.FAILED_PRECONDITION:
      return 409;
    case Status.RESOURCE_EXHAUSTED:
      return 429;
    case Status.UNAVAILABLE:
      return 503;
    case Status.DEADLINE_EXCEEDED:
      return 504;
    default:
      return 500;
  }
}

/** The code used when a peer's error carries none, derived from its status. */
function fallbackCode(status: Status): string {
  const name = Status[status];
  return name ? `actor.${name.toLowerCase()}` : 'actor.internal';
}

/**
 * Turns a failure into a problem, or undefined when it is neither an HttpProblem nor a gRPC error
 * (an unexpected exception: the caller logs it and answers a bare 500).
 */
export function problemFromError(error: unknown): HttpProblem | undefined {
  if (error instanceof HttpProblem) return error;
  const remote = remoteError(error);
  if (!remote) return undefined;
  const status = httpStatusForGrpc(remote.status);
  const detail =
    remote.status === Status.UNAVAILABLE && !remote.code
      ? 'a service the gateway depends on is unavailable; retry later'
      : remote.message;
  return new HttpProblem(status, remote.code ?? fallbackCode(remote.status), detail, {
    headers: status === 503 ? { 'Retry-After': '1' } : undefined,
  });
}

/** The problem document of a failure, as sent on the wire. */
export function problemDocument(problem: HttpProblem, instance?: string): ProblemDocument {
  return {
    type: `urn:actor:problem:${problem.code}`,
    title: titles[problem.status] ?? 'Error',
    status: problem.status,
    detail: problem.detail,
    code: problem.code,
    ...(instance ? { instance } : {}),
    ...(problem.options.errors ? { errors: problem.options.errors } : {}),
  };
}

/** Writes a problem as `application/problem+json`. */
export function sendProblem(response: ServerResponse, problem: HttpProblem, instance?: string): void {
  const body = JSON.stringify(problemDocument(problem, instance));
  response.writeHead(problem.status, {
    ...problem.options.headers,
    'Content-Type': 'application/problem+json',
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store',
  });
  response.end(body);
}

/** Shorthands for the problems the gateway raises itself. */
export const problems = {
  invalidJson: (detail: string) => new HttpProblem(400, 'actor.invalid_json', detail),
  invalid: (detail: string, errors?: FieldError[]) => new HttpProblem(400, 'actor.invalid_argument', detail, { errors }),
  unauthenticated: (detail: string, tokenWasSent: boolean) =>
    new HttpProblem(401, 'actor.unauthenticated', detail, {
      headers: { 'WWW-Authenticate': tokenWasSent ? 'Bearer error="invalid_token"' : 'Bearer' },
    }),
  forbidden: (scope: string) =>
    new HttpProblem(403, 'actor.permission_denied', `this token lacks the scope ${scope}`, {
      headers: { 'WWW-Authenticate': `Bearer error="insufficient_scope", scope="${scope}"` },
    }),
  notFound: (detail: string) => new HttpProblem(404, 'actor.not_found', detail),
  methodNotAllowed: (allowed: string[]) =>
    new HttpProblem(405, 'actor.method_not_allowed', `allowed methods: ${allowed.join(', ')}`, {
      headers: { Allow: allowed.join(', ') },
    }),
  tooLarge: (limit: number) =>
    new HttpProblem(413, 'actor.body_too_large', `the request body exceeds ${limit} bytes`, {
      headers: { Connection: 'close' },
    }),
  unsupportedMediaType: (received: string | undefined) =>
    new HttpProblem(
      415,
      'actor.unsupported_media_type',
      `send the body as application/json${received ? ` (received ${received})` : ''}`,
    ),
  internal: () => new HttpProblem(500, 'actor.internal', 'internal error'),
};
