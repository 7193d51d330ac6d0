import { ClientError, Status } from 'nice-grpc';
import { AsyncQueue, sleep, type ActorClient } from '@actor/kit';
import type {
  AcquireRequest,
  AcquireResponse,
  DeepPartial,
  LeaseSessionRequest,
  LeaseSessionResponse,
  PoolServiceDefinition,
  ReleaseRequest,
  ReleaseResponse,
  RenewRequest,
  RenewResponse,
} from '@actor/proto/pool';

export interface LeaseCallOptions {
  /** Ends the operation (a queued Acquire leaves the queue); the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** How long to wait for the answer, in ms; the client's default otherwise. DEADLINE_EXCEEDED after it. */
  deadlineMs?: number;
}

export interface LeaseSessionClientOptions {
  /** Deadline of an operation that sets none, in ms; default 10 000 (as a unary call's). */
  deadlineMs?: number;
  /** Tries of an operation that meets an unavailable pool (stream broken, replica shutting down); default 3. */
  maxAttempts?: number;
}

/** The unary method an operation stands for, so that errors read as that call's would. */
const methodPaths = {
  acquire: '/actor.pool.v1.PoolService/Acquire',
  renew: '/actor.pool.v1.PoolService/Renew',
  release: '/actor.pool.v1.PoolService/Release',
} as const;
type Operation = keyof typeof methodPaths;

/** A failure of the stream itself, as opposed to an answer: the operation may be tried again. */
class SessionLost extends Error {
  constructor(override readonly cause: ClientError) {
    super(cause.message);
  }
}

interface Pending {
  resolve(response: LeaseSessionResponse): void;
  reject(error: SessionLost): void;
}

/** One open LeaseSession stream and the operations waiting for an answer on it. */
class OpenSession {
  readonly requests = new AsyncQueue<DeepPartial<LeaseSessionRequest>>();
  readonly pending = new Map<number, Pending>();
  lost: SessionLost | undefined;
  private readonly controller = new AbortController();

  constructor(pool: ActorClient<typeof PoolServiceDefinition>) {
    void this.read(pool.leaseSession(this.requests, { signal: this.controller.signal }));
  }

  private async read(answers: AsyncIterable<LeaseSessionResponse>): Promise<void> {
    let cause: ClientError;
    try {
      for await (const answer of answers) {
        const pending = this.pending.get(answer.callId);
        if (!pending) continue; // answered after its caller gave up (deadline, abort)
        this.pending.delete(answer.callId);
        pending.resolve(answer);
      }
      cause = new ClientError('/actor.pool.v1.PoolService/LeaseSession', Status.UNAVAILABLE, 'the pool ended the lease session');
    } catch (error) {
      cause =
        error instanceof ClientError
          ? error
          : new ClientError('/actor.pool.v1.PoolService/LeaseSession', Status.UNAVAILABLE, `lease session failed: ${String(error)}`);
    }
    this.lost = new SessionLost(cause);
    this.requests.end();
    for (const pending of this.pending.values()) pending.reject(this.lost);
    this.pending.clear();
  }

  close(): void {
    // Half-close: the server answers what is in flight, then ends the stream.
    this.requests.end();
    if (this.pending.size === 0) this.controller.abort();
  }
}

/**
 * Acquire, Renew and Release over one LeaseSession stream (see the proto): what a process holding
 * many leases uses instead of the unary methods, whose per-call cost dominated the pool's CPU. The
 * stream opens on first use and again after it breaks. The contract is the unary calls': the same
 * answers, the same errors (a ClientError with the unary method's path, status and
 * `<actor code>: <message>` details, so `remoteError` reads it), a default deadline, and retries only
 * when the pool was unavailable (the operations are idempotent: a retried Acquire with a request id
 * gets the lease the first try got).
 */
export class LeaseSessionClient {
  private session: OpenSession | undefined;
  private nextCallId = 1;
  private readonly deadlineMs: number;
  private readonly maxAttempts: number;

  constructor(
    private readonly pool: ActorClient<typeof PoolServiceDefinition>,
    options: LeaseSessionClientOptions = {},
  ) {
    this.deadlineMs = options.deadlineMs ?? 10_000;
    this.maxAttempts = options.maxAttempts ?? 3;
  }

  async acquire(request: DeepPartial<AcquireRequest>, options: LeaseCallOptions = {}): Promise<AcquireResponse> {
    return (await this.call('acquire', { acquire: request }, options)).acquire!;
  }

  async renew(request: DeepPartial<RenewRequest>, options: LeaseCallOptions = {}): Promise<RenewResponse> {
    return (await this.call('renew', { renew: request }, options)).renew!;
  }

  async release(request: DeepPartial<ReleaseRequest>, options: LeaseCallOptions = {}): Promise<ReleaseResponse> {
    return (await this.call('release', { release: request }, options)).release!;
  }

  /** Ends the stream once what is in flight is answered; a later call opens a new one. */
  close(): void {
    this.session?.close();
    this.session = undefined;
  }

  private async call(
    operation: Operation,
    body: DeepPartial<LeaseSessionRequest>,
    options: LeaseCallOptions,
  ): Promise<LeaseSessionResponse> {
    const deadlineAt = Date.now() + (options.deadlineMs ?? this.deadlineMs);
    for (let attempt = 1; ; attempt++) {
      let answer: LeaseSessionResponse;
      try {
        answer = await this.send(operation, body, deadlineAt, options.signal);
      } catch (error) {
        if (!(error instanceof SessionLost)) throw error;
        if (attempt >= this.maxAttempts || error.cause.code !== Status.UNAVAILABLE) throw error.cause;
        await sleep(100 * 2 ** attempt, options.signal);
        continue;
      }
      if (!answer.error) return answer;
      const failed = new ClientError(methodPaths[operation], answer.error.status, answer.error.details);
      // A replica shutting down answers UNAVAILABLE: another (or the restarted one) may take it.
      if (answer.error.status !== Status.UNAVAILABLE || attempt >= this.maxAttempts) throw failed;
      await sleep(100 * 2 ** attempt, options.signal);
    }
  }

  private send(
    operation: Operation,
    body: DeepPartial<LeaseSessionRequest>,
    deadlineAt: number,
    signal: AbortSignal | undefined,
  ): Promise<LeaseSessionResponse> {
    signal?.throwIfAborted();
    if (!this.session || this.session.lost) this.session = new OpenSession(this.pool);
    const session = this.session;
    const callId = this.nextCallId++;
    return new Promise<LeaseSessionResponse>((resolve, reject) => {
      const settle = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        session.pending.delete(callId);
      };
      // Giving up on an operation tells the pool to stop it (a queued Acquire leaves the queue).
      const giveUp = (error: unknown) => {
        settle();
        session.requests.push({ callId, cancel: {} });
        reject(error);
      };
      const onAbort = () => giveUp(signal!.reason);
      const timer = setTimeout(
        () => giveUp(new ClientError(methodPaths[operation], Status.DEADLINE_EXCEEDED, 'Deadline exceeded')),
        Math.max(0, deadlineAt - Date.now()),
      );
      signal?.addEventListener('abort', onAbort, { once: true });
      session.pending.set(callId, {
        resolve: (answer) => {
          settle();
          resolve(answer);
        },
        reject: (error) => {
          settle();
          reject(error);
        },
      });
      session.requests.push({ callId, ...body });
    });
  }
}
