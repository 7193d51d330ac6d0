import { describe, expect, it } from 'vitest';
import { AsyncQueue } from './async-queue.js';

async function readAll<Item>(queue: AsyncQueue<Item>): Promise<Item[]> {
  const items: Item[] = [];
  for await (const item of queue) items.push(item);
  return items;
}

describe('AsyncQueue', () => {
  it('gives items pushed before and while reading, in order, then ends', async () => {
    const queue = new AsyncQueue<number>();
    queue.push(1);
    const reading = readAll(queue);
    queue.push(2);
    await Promise.resolve();
    queue.push(3);
    queue.end();
    queue.push(4);
    expect(await reading).toEqual([1, 2, 3]);
  });

  it('ends a reader that is waiting', async () => {
    const queue = new AsyncQueue<string>();
    const reading = readAll(queue);
    await new Promise((resolve) => setTimeout(resolve, 5));
    queue.end();
    expect(await reading).toEqual([]);
    expect(queue.isEnded).toBe(true);
  });

  it('drops what is queued when the reader stops early', async () => {
    const queue = new AsyncQueue<number>();
    queue.push(1);
    queue.push(2);
    for await (const item of queue) {
      expect(item).toBe(1);
      break;
    }
    expect(queue.isEnded).toBe(true);
    queue.push(3);
    expect(await readAll(queue)).toEqual([]);
  });
});
