import { monotonicFactory } from 'ulid';

const nextUlid = monotonicFactory();

/** Id prefixes in use: tasks, attempts, agents, leases, reservations, decisions, usage, projects, tokens. */
export type IdPrefix = 'tsk' | 'att' | 'agt' | 'lse' | 'res' | 'dec' | 'use' | 'prj' | 'tok' | 'whk' | 'sec';

/** A prefixed ULID such as `tsk_01J...`: sortable by creation time, unique across replicas. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${nextUlid()}`;
}
