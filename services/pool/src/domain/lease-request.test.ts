import { describe, expect, it } from 'vitest';
import type { AcquireRequest } from '@actor/proto/pool';
import { defaultWaitTimeoutMs, leaseProblemError, parseAcquireRequest, parseReleaseRequest, parseRenewRequest } from './lease-request.js';

const request: AcquireRequest = {
  requestId: '',
  workType: 'task',
  workId: 'tsk_1',
  projectId: 'prj_default',
  capability: '',
  agentId: '',
  agentType: 'demo:alpha-mini',
  ttlMs: 0,
  wait: false,
  waitTimeoutMs: 0,
  releaseFirst: undefined,
};

describe('lease requests', () => {
  it('fills the pool default ttl and the default wait timeout', () => {
    expect(parseAcquireRequest(request, { ttlMs: 30_000 })).toMatchObject({ ttlMs: 30_000, waitTimeoutMs: defaultWaitTimeoutMs });
    expect(parseAcquireRequest({ ...request, ttlMs: 500, waitTimeoutMs: 100 }, { ttlMs: 30_000 })).toMatchObject({
      ttlMs: 500,
      waitTimeoutMs: 100,
    });
  });

  it('requires a work type and work id, and refuses negative durations', () => {
    expect(() => parseAcquireRequest({ ...request, workType: '', workId: '' }, { ttlMs: 1 })).toThrow(
      /work_type is required.*; work_id is required/,
    );
    expect(() => parseAcquireRequest({ ...request, ttlMs: -5 }, { ttlMs: 1 })).toThrow('ttl_ms must not be negative');
    expect(() => parseAcquireRequest({ ...request, workType: 'Task!' }, { ttlMs: 1 })).toThrow('work_type must be lowercase');
  });

  it('reads a lease to end first, which needs its id and epoch', () => {
    expect(parseAcquireRequest(request, { ttlMs: 1 }).releaseFirst).toBeNull();
    expect(parseAcquireRequest({ ...request, releaseFirst: { leaseId: 'lse_1', epoch: 2 } }, { ttlMs: 1 }).releaseFirst).toEqual({
      leaseId: 'lse_1',
      epoch: 2,
    });
    expect(() => parseAcquireRequest({ ...request, releaseFirst: { leaseId: 'lse_1', epoch: 0 } }, { ttlMs: 1 })).toThrow(
      'release_first.epoch is required',
    );
  });

  it('requires the lease id and the epoch to renew or release', () => {
    expect(() => parseRenewRequest({ leaseId: '', epoch: 0, ttlMs: 0 }, { ttlMs: 1 })).toThrow('lease_id is required');
    expect(() => parseReleaseRequest({ leaseId: 'lse_1', epoch: 0 })).toThrow('epoch is required');
    expect(parseRenewRequest({ leaseId: 'lse_1', epoch: 3, ttlMs: 0 }, { ttlMs: 9 })).toEqual({ leaseId: 'lse_1', epoch: 3, ttlMs: 9 });
  });

  it('gives each lost-lease case its own stable code', () => {
    expect(leaseProblemError('stale', 'lse_1', 4)).toMatchObject({ kind: 'aborted', code: 'actor.lease.stale' });
    expect(leaseProblemError('unknown', 'lse_1', 4)).toMatchObject({ kind: 'aborted', code: 'actor.lease.stale' });
    expect(leaseProblemError('expired', 'lse_1', 4)).toMatchObject({ kind: 'aborted', code: 'actor.lease.expired' });
    expect(leaseProblemError('released', 'lse_1', 4)).toMatchObject({ kind: 'aborted', code: 'actor.lease.released' });
  });
});
