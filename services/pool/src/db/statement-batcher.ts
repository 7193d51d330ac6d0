/**
 * Runs many small requests of one kind as few statements, as a database's group commit does: a
 * request goes out at once while fewer than `maxInFlight` statements of its kind are running, and
 * otherwise waits and goes out with every request that arrived meanwhile, in one statement. Idle, it
 * adds no latency; busy, it turns N round trips and N commits into one, which is what bounds the
 * pool's rate (its connections sat waiting on round trips, not on Postgres).
 */
export class StatementBatcher<Request, Result> {
  private readonly queue: Array<{ request: Request; resolve(result: Result): void; reject(error: unknown): void }> = [];
  private inFlight = 0;

  constructor(
    /** Runs one batch; answers with one result per request, in order. */
    private readonly runBatch: (requests: Request[]) => Promise<Result[]>,
    private readonly maxInFlight: number,
    private readonly maxBatch: number,
    /** Called when the last statement finishes with nothing queued (the owner may drop this batcher). */
    private readonly onIdle?: () => void,
  ) {}

  submit(request: Request): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      this.queue.push({ request, resolve, reject });
      this.flush();
    });
  }

  private flush(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight++;
      this.runBatch(batch.map((item) => item.request))
        .then(
          (results) => batch.forEach((item, index) => item.resolve(results[index]!)),
          (error: unknown) => batch.forEach((item) => item.reject(error)),
        )
        .finally(() => {
          this.inFlight--;
          this.flush();
          if (this.inFlight === 0) this.onIdle?.();
        });
    }
  }
}
