/**
 * An unbounded queue read by one consumer as an async iterable: `push` from anywhere, `end` once.
 * It feeds a bidirectional gRPC stream from code that produces messages at its own pace (answers
 * finishing in any order, requests made by many callers), which a generator cannot do alone.
 */
export class AsyncQueue<Item> implements AsyncIterable<Item> {
  private readonly items: Item[] = [];
  private reader: ((result: IteratorResult<Item>) => void) | undefined;
  private ended = false;

  /** Adds an item; ignored once the queue has ended. */
  push(item: Item): void {
    if (this.ended) return;
    const reader = this.reader;
    if (reader) {
      this.reader = undefined;
      reader({ value: item, done: false });
    } else {
      this.items.push(item);
    }
  }

  /** No more items: the reader gets those already queued, then the end. */
  end(): void {
    this.ended = true;
    if (this.items.length === 0 && this.reader) {
      const reader = this.reader;
      this.reader = undefined;
      reader({ value: undefined, done: true });
    }
  }

  get isEnded(): boolean {
    return this.ended;
  }

  [Symbol.asyncIterator](): AsyncIterator<Item> {
    return {
      next: () => {
        if (this.items.length > 0) return Promise.resolve({ value: this.items.shift()!, done: false });
        if (this.ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => (this.reader = resolve));
      },
      // The reader stopped early (break, or the stream it feeds ended): nothing more will be read.
      return: () => {
        this.ended = true;
        this.items.length = 0;
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
