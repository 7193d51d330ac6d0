import { Status } from 'nice-grpc';
import { AsyncQueue, toServerError, type Logger } from '@actor/kit';
import type {
  AcquireRequest,
  AcquireResponse,
  LeaseSessionRequest,
  LeaseSessionResponse,
  ReleaseRequest,
  ReleaseResponse,
  RenewRequest,
  RenewResponse,
} from '@actor/proto/pool';

/** The lease operations, as the unary methods run them. */
export interface LeaseOperations {
  acquire(request: AcquireRequest, signal: AbortSignal): Promise<AcquireResponse>;
  renew(request: RenewRequest): Promise<RenewResponse>;
  release(request: ReleaseRequest): Promise<ReleaseResponse>;
}

export interface LeaseSessionOptions {
  operations: LeaseOperations;
  logger: Logger;
  /** Aborted when the server starts shutting down: the session takes no new operation and ends once those in flight are answered. */
  shutdownSignal: AbortSignal;
}

const method = '/actor.pool.v1.PoolService/LeaseSession';

function failure(callId: number, status: Status, details: string): LeaseSessionResponse {
  return { callId, error: { status, details } };
}

/**
 * The LeaseSession method (see the proto): reads operations off the stream as they come and runs
 * each at once, so a queued Acquire never holds up a Release behind it; answers go out in the order
 * operations finish. Errors are mapped exactly as the unary methods' (`toServerError`).
 */
export function createLeaseSession({ operations, logger, shutdownSignal }: LeaseSessionOptions) {
  return async function* leaseSession(
    requests: AsyncIterable<LeaseSessionRequest>,
    context: { signal: AbortSignal },
  ): AsyncGenerator<LeaseSessionResponse> {
    const answers = new AsyncQueue<LeaseSessionResponse>();
    // Operations in flight by call id; each has its own controller so that one can be cancelled alone.
    const inFlight = new Map<number, AbortController>();
    let readingDone = false;
    const endWhenIdle = () => {
      if ((readingDone || shutdownSignal.aborted) && inFlight.size === 0) answers.end();
    };
    // One listener for the stream, not one per operation: the caller cancelled the stream (or it
    // broke), so every operation in flight stops.
    const cancelAll = () => {
      for (const controller of inFlight.values()) controller.abort();
      answers.end();
    };
    // The server is going down: no new operation; those in flight end on their own (a queued Acquire
    // answers UNAVAILABLE, so its caller retries on another replica), then the stream ends.
    const drain = () => endWhenIdle();
    context.signal.addEventListener('abort', cancelAll, { once: true });
    shutdownSignal.addEventListener('abort', drain, { once: true });

    const start = (request: LeaseSessionRequest, signal: AbortSignal) => {
      if (request.acquire) return operations.acquire(request.acquire, signal).then((acquire) => ({ acquire }));
      if (request.renew) return operations.renew(request.renew).then((renew) => ({ renew }));
      if (request.release) return operations.release(request.release).then((release) => ({ release }));
      return undefined;
    };

    const run = (request: LeaseSessionRequest): void => {
      const { callId } = request;
      if (request.cancel) {
        inFlight.get(callId)?.abort();
        return;
      }
      if (shutdownSignal.aborted) {
        answers.push(failure(callId, Status.UNAVAILABLE, 'actor.unavailable: the pool is shutting down; retry on another replica'));
        return;
      }
      if (inFlight.has(callId)) {
        answers.push(failure(callId, Status.INVALID_ARGUMENT, `actor.invalid_argument: call_id ${callId} is already in flight on this session`));
        return;
      }
      const controller = new AbortController();
      const started = start(request, controller.signal);
      if (!started) {
        answers.push(failure(callId, Status.INVALID_ARGUMENT, 'actor.invalid_argument: a lease session request needs one of acquire, renew, release or cancel'));
        return;
      }
      inFlight.set(callId, controller);
      started
        .then(
          (outcome) => answers.push({ callId, ...outcome }),
          (error: unknown) => {
            if (controller.signal.aborted) {
              answers.push(failure(callId, Status.CANCELLED, 'actor.cancelled: the caller cancelled the operation'));
              return;
            }
            const mapped = toServerError(error, { method, signal: controller.signal, logger });
            answers.push(failure(callId, mapped.code, mapped.details));
          },
        )
        .finally(() => {
          inFlight.delete(callId);
          endWhenIdle();
        });
    };

    void (async () => {
      try {
        for await (const request of requests) run(request);
      } catch {
        // The stream was cancelled or broke: the abort listener has stopped what was in flight.
      } finally {
        readingDone = true;
        endWhenIdle();
      }
    })();

    try {
      yield* answers;
    } finally {
      context.signal.removeEventListener('abort', cancelAll);
      shutdownSignal.removeEventListener('abort', drain);
      for (const controller of inFlight.values()) controller.abort();
    }
  };
}
