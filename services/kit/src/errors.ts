import { ClientError, ServerError, Status, type CallContext, type ServerMiddlewareCall } from 'nice-grpc';
import type { Logger } from './logger.js';

/**
 * The closed set of domain failures. Each kind fixes the gRPC status it travels as, following
 * STYLE.md: UNAVAILABLE = retry the call; ABORTED = retry the larger sequence; FAILED_PRECONDITION =
 * do not retry until state changes; RESOURCE_EXHAUSTED = budget or capacity.
 */
export const errorKinds = {
  invalid_argument: Status.INVALID_ARGUMENT,
  not_found: Status.NOT_FOUND,
  already_exists: Status.ALREADY_EXISTS,
  permission_denied: Status.PERMISSION_DENIED,
  unauthenticated: Status.UNAUTHENTICATED,
  failed_precondition: Status.FAILED_PRECONDITION,
  aborted: Status.ABORTED,
  resource_exhausted: Status.RESOURCE_EXHAUSTED,
  unavailable: Status.UNAVAILABLE,
  deadline_exceeded: Status.DEADLINE_EXCEEDED,
} as const;

export type ErrorKind = keyof typeof errorKinds;

/**
 * A failure domain code may throw. `code` is the stable public string (`actor.budget.exceeded`);
 * it travels to clients as the prefix of the gRPC status details: `<code>: <message>`.
 */
export class DomainError extends Error {
  constructor(
    readonly kind: ErrorKind,
    readonly code: string,
    message: string,
    readonly retryable = kind === 'unavailable' || kind === 'aborted',
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

/** Shorthands for the common cases, with the code Actor uses for each. */
export const fail = {
  invalid: (message: string, code = 'actor.invalid_argument') => new DomainError('invalid_argument', code, message),
  notFound: (message: string, code = 'actor.not_found') => new DomainError('not_found', code, message),
  exists: (message: string, code = 'actor.already_exists') => new DomainError('already_exists', code, message),
  denied: (message: string, code = 'actor.permission_denied') => new DomainError('permission_denied', code, message),
  unauthenticated: (message: string) => new DomainError('unauthenticated', 'actor.unauthenticated', message),
  precondition: (message: string, code = 'actor.failed_precondition') =>
    new DomainError('failed_precondition', code, message),
  aborted: (message: string, code = 'actor.aborted') => new DomainError('aborted', code, message),
  exhausted: (message: string, code = 'actor.resource_exhausted') => new DomainError('resource_exhausted', code, message),
  budgetExceeded: (message: string) => new DomainError('resource_exhausted', 'actor.budget.exceeded', message),
  unavailable: (message: string, code = 'actor.unavailable') => new DomainError('unavailable', code, message),
};

const detailsPattern = /^(actor\.[a-z0-9_.]+): ([\s\S]*)$/;

/** Splits gRPC status details into Actor's stable code and the message. */
export function parseErrorDetails(details: string): { code?: string; message: string } {
  const match = detailsPattern.exec(details);
  return match ? { code: match[1], message: match[2]! } : { message: details };
}

/** The stable code and message of an error that came back from another service, or undefined. */
export function remoteError(error: unknown): { status: Status; code?: string; message: string } | undefined {
  if (!(error instanceof ClientError)) return undefined;
  return { status: error.code, ...parseErrorDetails(error.details) };
}

/**
 * The status and details a failure travels to a client as: a domain error its status and
 * `<code>: <message>`; a ClientError from a downstream call keeps its status and details (so
 * `actor.budget.exceeded` survives two hops); a failure of a call its caller cancelled is CANCELLED;
 * anything else a generic INTERNAL, logged with its stack, which never reaches the client.
 */
export function toServerError(error: unknown, call: { method: string; signal: AbortSignal; logger: Logger }): ServerError {
  if (error instanceof ServerError) return error;
  if (error instanceof DomainError) return new ServerError(errorKinds[error.kind], `${error.code}: ${error.message}`);
  // A deadline passed or a peer is down: the caller may retry. Anything else keeps its meaning.
  if (error instanceof ClientError) return new ServerError(error.code, error.details);
  if (call.signal.aborted) return new ServerError(Status.CANCELLED, 'actor.cancelled: call cancelled');
  call.logger.error({ err: error, method: call.method }, 'unhandled error');
  return new ServerError(Status.INTERNAL, 'actor.internal: internal error');
}

/** Server middleware: every failure leaves a call as `toServerError` maps it. */
export function errorMiddleware(logger: Logger) {
  return async function* errorMapper<Request, Response>(
    call: ServerMiddlewareCall<Request, Response>,
    context: CallContext,
  ) {
    try {
      return yield* call.next(call.request, context);
    } catch (error) {
      throw toServerError(error, { method: call.method.path, signal: context.signal, logger });
    }
  };
}
