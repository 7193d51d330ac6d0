import { describe, expect, it } from 'vitest';
import { ClientError, Status } from 'nice-grpc';
import { httpStatusForGrpc, HttpProblem, problemDocument, problemFromError } from './problem.js';

describe('gRPC status -> HTTP problem', () => {
  it('maps every status the way STYLE.md lists', () => {
    const expected: Array<[Status, number]> = [
      [Status.INVALID_ARGUMENT, 400],
      [Status.UNAUTHENTICATED, 401],
      [Status.PERMISSION_DENIED, 403],
      [Status.NOT_FOUND, 404],
      [Status.ALREADY_EXISTS, 409],
      [Status.ABORTED, 409],
      [Status.FAILED_PRECONDITION, 409],
      [Status.RESOURCE_EXHAUSTED, 429],
      [Status.UNAVAILABLE, 503],
      [Status.DEADLINE_EXCEEDED, 504],
      [Status.INTERNAL, 500],
      [Status.UNKNOWN, 500],
      [Status.DATA_LOSS, 500],
    ];
    for (const [status, http] of expected) expect([Status[status], httpStatusForGrpc(status)]).toEqual([Status[status], http]);
  });

  it("keeps the service's stable code and message", () => {
    const error = new ClientError('/actor.execution.v1.ExecutionService/CreateTask', Status.RESOURCE_EXHAUSTED, 'actor.budget.exceeded: needs $0.40, $0.10 left today');
    const problem = problemFromError(error)!;
    expect(problemDocument(problem, '/v1/tasks')).toEqual({
      type: 'urn:actor:problem:actor.budget.exceeded',
      title: 'Too Many Requests',
      status: 429,
      detail: 'needs $0.40, $0.10 left today',
      code: 'actor.budget.exceeded',
      instance: '/v1/tasks',
    });
  });

  it('derives a code when the peer sent none, and asks for a retry when a peer is down', () => {
    const unavailable = problemFromError(new ClientError('/x/Y', Status.UNAVAILABLE, 'No connection established'))!;
    expect(unavailable.status).toBe(503);
    expect(unavailable.code).toBe('actor.unavailable');
    expect(unavailable.options.headers).toEqual({ 'Retry-After': '1' });
    expect(unavailable.detail).not.toContain('No connection');
    const notFound = problemFromError(new ClientError('/x/Y', Status.NOT_FOUND, 'no task tsk_1'))!;
    expect([notFound.status, notFound.code, notFound.detail]).toEqual([404, 'actor.not_found', 'no task tsk_1']);
  });

  it('passes HttpProblems through and leaves unexpected errors to the caller (a bare 500)', () => {
    const own = new HttpProblem(415, 'actor.unsupported_media_type', 'send JSON');
    expect(problemFromError(own)).toBe(own);
    expect(problemFromError(new TypeError('boom'))).toBeUndefined();
  });

  it('lists field errors as an extension member', () => {
    const problem = new HttpProblem(400, 'actor.invalid_argument', 'the task is invalid', {
      errors: [{ path: 'mode', message: 'bad' }],
    });
    expect(problemDocument(problem).errors).toEqual([{ path: 'mode', message: 'bad' }]);
  });
});
