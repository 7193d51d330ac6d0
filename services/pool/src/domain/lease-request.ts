import { z } from 'zod';
import { fail } from '@actor/kit';
import type { AcquireRequest, RenewRequest, ReleaseRequest } from '@actor/proto/pool';
import { invalidArgument } from './agent-spec.js';

/** What an Acquire asks for, after defaults. */
export interface LeaseWant {
  /** Explicitly assigned agent; empty for none. */
  agentId: string;
  /** Capability the slot must serve; empty for none. */
  capability: string;
  /** Adapter type wanted; empty for any. */
  agentType: string;
}

export interface AcquireSpec extends LeaseWant {
  requestId: string;
  workType: string;
  workId: string;
  projectId: string;
  ttlMs: number;
  wait: boolean;
  waitTimeoutMs: number;
  /** A lease of the caller's to end in the grant's statement (AcquireRequest.release_first); null for none. */
  releaseFirst: LeaseIdentity | null;
}

/** A lease as its holder names it: id and the epoch it was granted with. */
export interface LeaseIdentity {
  leaseId: string;
  epoch: number;
}

export interface LeaseDefaults {
  /** Lease time to live when the caller sends 0. */
  ttlMs: number;
}

/** Longest lease a caller may ask for: one day. A holder renews; it does not park a slot forever. */
export const maxTtlMs = 24 * 60 * 60 * 1000;
/** Longest queueing a caller may ask for: one hour. */
export const maxWaitTimeoutMs = 60 * 60 * 1000;
/** Queueing time when the caller sends 0. */
export const defaultWaitTimeoutMs = 60_000;

const durationSchema = (max: number) =>
  z.number().int('must be an integer').min(0, 'must not be negative').max(max, `must be at most ${max}`);

const identifierSchema = z.string().max(200, 'must be at most 200 characters');

const acquireSchema = z.object({
  requestId: identifierSchema,
  workType: z
    .string()
    .min(1, 'is required (task, judge, report, scheduled-job, ...)')
    .regex(/^[a-z][a-z0-9-]{0,63}$/, 'must be lowercase letters, digits and "-" (task, judge, report, scheduled-job)'),
  workId: identifierSchema.min(1, 'is required'),
  projectId: identifierSchema,
  capability: identifierSchema,
  agentId: identifierSchema,
  agentType: identifierSchema,
  ttlMs: durationSchema(maxTtlMs),
  wait: z.boolean(),
  waitTimeoutMs: durationSchema(maxWaitTimeoutMs),
});

const leaseIdentitySchema = z.object({
  leaseId: z.string().min(1, 'is required').max(200, 'must be at most 200 characters'),
  epoch: z.number().int('must be an integer').min(1, 'is required (the epoch the lease was granted with)'),
});

// Built once: constructing a zod schema costs far more than a parse, and this runs on every Acquire.
const acquireWithReleaseSchema = acquireSchema.extend({ releaseFirst: leaseIdentitySchema.optional() });
const renewSchema = leaseIdentitySchema.extend({ ttlMs: durationSchema(maxTtlMs) });

export function parseAcquireRequest(request: AcquireRequest, defaults: LeaseDefaults): AcquireSpec {
  const result = acquireWithReleaseSchema.safeParse(request);
  if (!result.success) throw invalidArgument('', result.error);
  const { releaseFirst, ...spec } = result.data;
  return {
    ...spec,
    ttlMs: spec.ttlMs || defaults.ttlMs,
    waitTimeoutMs: spec.waitTimeoutMs || defaultWaitTimeoutMs,
    releaseFirst: releaseFirst ? { leaseId: releaseFirst.leaseId, epoch: releaseFirst.epoch } : null,
  };
}

export function parseRenewRequest(request: RenewRequest, defaults: LeaseDefaults) {
  const result = renewSchema.safeParse(request);
  if (!result.success) throw invalidArgument('', result.error);
  return { ...result.data, ttlMs: result.data.ttlMs || defaults.ttlMs };
}

export function parseReleaseRequest(request: ReleaseRequest) {
  const result = leaseIdentitySchema.safeParse(request);
  if (!result.success) throw invalidArgument('', result.error);
  return result.data;
}

/** Why a lease could not be renewed or released; each is ABORTED with its own stable code. */
export type LeaseProblem = 'unknown' | 'stale' | 'expired' | 'released';

/** The error a holder gets for a lease it no longer holds: the larger sequence must start over. */
export function leaseProblemError(problem: LeaseProblem, leaseId: string, epoch: number) {
  switch (problem) {
    case 'unknown':
      return fail.aborted(`lease ${leaseId} does not exist`, 'actor.lease.stale');
    case 'stale':
      return fail.aborted(
        `epoch ${epoch} is stale for lease ${leaseId}: the lease was granted with another epoch`,
        'actor.lease.stale',
      );
    case 'expired':
      return fail.aborted(`lease ${leaseId} expired before it was renewed; acquire a new one`, 'actor.lease.expired');
    case 'released':
      return fail.aborted(`lease ${leaseId} was already released; acquire a new one`, 'actor.lease.released');
  }
}
