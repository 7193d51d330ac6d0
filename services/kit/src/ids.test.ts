import { describe, expect, it } from 'vitest';
import { newId } from './ids.js';

describe('newId', () => {
  it('is a prefixed ULID, increasing within a process, unique across many', () => {
    const ids = Array.from({ length: 20_000 }, () => newId('lse'));
    for (const id of ids) expect(id).toMatch(/^lse_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });

  it('draws its random part from fresh bytes (ids made in different milliseconds do not repeat their tail)', async () => {
    const tails = new Set<string>();
    for (let index = 0; index < 20; index++) {
      tails.add(newId('tsk').slice(-16));
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    expect(tails.size).toBe(20);
  });
});
