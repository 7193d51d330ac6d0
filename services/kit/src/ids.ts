import { randomFillSync } from 'node:crypto';
import { monotonicFactory } from 'ulid';

/**
 * Crypto-strength random bytes drawn from a refilled buffer. ulid's default generator asks the OS
 * for one byte per character (16 calls per id); on the lease hot path that was ~3% of the pool
 * process's CPU. Same source (the OS CSPRNG), one call per 4 KiB.
 */
const randomPool = new Uint8Array(4_096);
let randomPoolIndex = randomPool.length;
function pooledRandomFraction(): number {
  if (randomPoolIndex === randomPool.length) {
    randomFillSync(randomPool);
    randomPoolIndex = 0;
  }
  return randomPool[randomPoolIndex++]! / 256;
}

const nextUlid = monotonicFactory(pooledRandomFraction);

/** Id prefixes in use: tasks, attempts, agents, leases, reservations, decisions, usage, projects, tokens. */
export type IdPrefix = 'tsk' | 'att' | 'agt' | 'lse' | 'res' | 'dec' | 'use' | 'prj' | 'tok' | 'whk' | 'sec';

/** A prefixed ULID such as `tsk_01J...`: sortable by creation time, unique across replicas. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${nextUlid()}`;
}
