import { EventEmitter, once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallContext } from 'nice-grpc';
import { createClient, createLogger, fail, newId, startGrpcServer, type RunningGrpcServer } from '@actor/kit';
import { testDatabase } from '@actor/kit/testing';
import {
  ExecutionServiceDefinition,
  TaskState,
  type CreateTaskRequest,
  type ExecutionServiceImplementation,
  type Task,
  type TaskEvent,
  type WatchTaskRequest,
} from '@actor/proto/execution';
import { RegistryServiceDefinition, TrustClass } from '@actor/proto/registry';
import { RegistryRepository } from '../../services/registry/src/db/registry-repository.js';
import { hashToken } from '../../services/registry/src/domain/secret-box.js';
import { loadRegistryConfig } from '../../services/registry/src/config.js';
import { startRegistry } from '../../services/registry/src/registry-server.js';
import { loadPoolConfig } from '../../services/pool/src/config.js';
import { startPool } from '../../services/pool/src/pool-server.js';
import { loadGatewayConfig } from './config.js';
import { startGateway, type RunningGateway } from './gateway-server.js';

const devToken = 'dev-token-gateway-test';
const readOnlyToken = 'read-only-token-gateway-test';
/** A token of another project, allowed to manage that project's secrets. */
const otherProjectToken = 'other-project-token-gateway-test';
/** Nothing listens on port 1: these services are "down". */
const downAddress = '127.0.0.1:1';
const maxBodyBytes = 16 * 1024;

/**
 * A stand-in ExecutionService on a real gRPC server: it keeps tasks and events in memory and records
 * what the gateway asked, so the HTTP and SSE contract can be checked without the pipeline (the e2e
 * suite runs the real one). It answers NOT_FOUND for unknown tasks and actor.budget.exceeded for the
 * input "over budget", like the real service would for those cases.
 */
class StandInExecution {
  readonly tasks = new Map<string, Task>();
  readonly events = new Map<string, TaskEvent[]>();
  readonly created: CreateTaskRequest[] = [];
  readonly changes = new EventEmitter();
  openWatches = 0;
  server!: RunningGrpcServer;

  async start(): Promise<string> {
    this.server = await startGrpcServer({
      name: 'execution-stand-in',
      address: '127.0.0.1:0',
      logger: createLogger('execution-stand-in', 'silent'),
      serviceNames: [ExecutionServiceDefinition.fullName],
      register: (server) => server.add(ExecutionServiceDefinition, this.implementation()),
    });
    return this.server.address;
  }

  emit(taskId: string, kind: string, data: object): void {
    const list = this.events.get(taskId)!;
    list.push({ taskId, seq: list.length + 1, kind, dataJson: JSON.stringify(data), createTime: new Date() });
    this.changes.emit(taskId);
  }

  private find(taskId: string, projectId: string): Task {
    const task = this.tasks.get(taskId);
    if (!task || task.projectId !== projectId) throw fail.notFound(`no task ${taskId}`, 'actor.task.not_found');
    return task;
  }

  private async *watch(request: WatchTaskRequest, context: CallContext) {
    this.find(request.taskId, request.projectId);
    this.openWatches += 1;
    try {
      let sent = request.afterSeq;
      for (;;) {
        for (const event of this.events.get(request.taskId)!.filter((candidate) => candidate.seq > sent)) {
          yield { event };
          sent = event.seq;
          if (event.kind === 'end') return;
        }
        await once(this.changes, request.taskId, { signal: context.signal });
      }
    } finally {
      this.openWatches -= 1;
    }
  }

  private implementation(): ExecutionServiceImplementation {
    return {
      createTask: async (request) => {
        this.created.push(request);
        if (request.input === 'over budget') throw fail.budgetExceeded('the per-day budget is spent');
        const existing = [...this.tasks.values()].find((task) => task.requestId === request.requestId);
        if (existing) return { task: existing, replayed: true };
        const task: Task = {
          id: newId('tsk'),
          projectId: request.projectId,
          state: TaskState.TASK_STATE_QUEUED,
          input: request.input,
          mode: request.mode,
          budget: request.budget,
          result: '',
          error: undefined,
          costMicroUsd: 0,
          classification: undefined,
          explanation: [],
          attempts: [],
          agentId: request.agentId,
          backends: request.backends,
          capabilities: request.capabilities,
          workspace: request.workspace,
          verify: request.verify,
          webhooks: request.webhooks,
          cancelRequestedBy: '',
          createTime: new Date(),
          startTime: undefined,
          finishTime: undefined,
          requestId: request.requestId,
          lastEventSeq: 0,
          webhookDeliveries: [],
        };
        this.tasks.set(task.id, task);
        this.events.set(task.id, []);
        this.emit(task.id, 'state', { state: 'queued' });
        return { task, replayed: false };
      },
      getTask: async (request) => ({ task: this.find(request.taskId, request.projectId) }),
      listTasks: async (request) => ({
        tasks: [...this.tasks.values()]
          .filter((task) => task.projectId === request.projectId)
          .filter((task) => request.state === TaskState.TASK_STATE_UNSPECIFIED || task.state === request.state),
        nextPageToken: '',
      }),
      cancelTask: async (request) => {
        const task = this.find(request.taskId, request.projectId);
        task.state = TaskState.TASK_STATE_CANCELLED;
        task.cancelRequestedBy = request.requestedBy;
        return { task };
      },
      watchTask: (request, context) => this.watch(request, context),
      execute: async () => {
        throw fail.invalid('not part of this test');
      },
    };
  }
}

/** Reads an SSE body to its end (or until `stopAfter` events) and returns the parsed events. */
async function readEvents(response: Response, stopAfter = Infinity) {
  const events: Array<{ id?: string; event?: string; data: string }> = [];
  let comments = 0;
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  while (events.length < stopAfter) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (frame.startsWith(':')) {
        comments += 1;
        continue;
      }
      const event: { id?: string; event?: string; data: string } = { data: '' };
      for (const line of frame.split('\n')) {
        const [field, ...rest] = line.split(': ');
        const value = rest.join(': ');
        if (field === 'id') event.id = value;
        else if (field === 'event') event.event = value;
        else if (field === 'data') event.data = event.data ? `${event.data}\n${value}` : value;
      }
      events.push(event);
    }
  }
  await reader.cancel().catch(() => undefined);
  return { events, comments };
}

describe('the gateway over HTTP, with a real registry and pool', () => {
  let gateway: RunningGateway;
  let registry: Awaited<ReturnType<typeof startRegistry>>;
  let pool: Awaited<ReturnType<typeof startPool>>;
  const execution = new StandInExecution();
  const databases: Array<Awaited<ReturnType<typeof testDatabase>>> = [];
  let devTokenId = '';

  const call = (path: string, init: RequestInit & { token?: string | null } = {}) => {
    const headers = new Headers(init.headers);
    const token = init.token === undefined ? devToken : init.token;
    if (token !== null) headers.set('authorization', `Bearer ${token}`);
    return fetch(`${gateway.url}${path}`, { ...init, headers });
  };
  const postJson = (path: string, body: unknown, init: RequestInit & { token?: string | null } = {}) =>
    call(path, {
      ...init,
      method: init.method ?? 'POST',
      headers: { 'content-type': 'application/json', ...(init.headers as Record<string, string>) },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });

  async function expectProblem(response: Response, status: number, code?: string) {
    const text = await response.text();
    expect({ status: response.status, body: text }).toMatchObject({ status });
    expect(response.headers.get('content-type')).toBe('application/problem+json');
    const problem = JSON.parse(text) as Record<string, unknown>;
    expect(problem).toMatchObject({ status, type: expect.stringMatching(/^urn:actor:problem:/), title: expect.any(String), detail: expect.any(String) });
    if (code) expect(problem.code).toBe(code);
    expect(text).not.toMatch(/at .*\.ts:\d+/);
    return problem;
  }

  beforeAll(async () => {
    const logger = createLogger('gateway-test', 'silent');
    const [registryDatabase, poolDatabase] = await Promise.all([testDatabase(), testDatabase()]);
    databases.push(registryDatabase!, poolDatabase!);
    [registry, pool] = await Promise.all([
      startRegistry({
        config: loadRegistryConfig({
          REGISTRY_ADDR: '127.0.0.1:0',
          DATABASE_URL: registryDatabase!.databaseUrl,
          ACTOR_DATA_DIR: registryDatabase!.dataDir,
          ACTOR_DEV_TOKEN: devToken,
        }),
        secretKey: 'test-key',
        logger,
      }),
      startPool({
        config: loadPoolConfig({ POOL_ADDR: '127.0.0.1:0', DATABASE_URL: poolDatabase!.databaseUrl, ACTOR_DATA_DIR: poolDatabase!.dataDir }),
        logger,
      }),
    ]);
    await new RegistryRepository(registry.database.db).ensureToken(newId('tok'), 'prj_default', hashToken(readOnlyToken), [
      'tasks:read',
    ]);
    await new RegistryRepository(registry.database.db).ensureProject('prj_other', 'other');
    await new RegistryRepository(registry.database.db).ensureToken(newId('tok'), 'prj_other', hashToken(otherProjectToken), [
      'secrets:admin',
    ]);
    const executionAddress = await execution.start();
    gateway = await startGateway({
      config: loadGatewayConfig({
        GATEWAY_PORT: '0',
        GATEWAY_MAX_BODY_BYTES: String(maxBodyBytes),
        GATEWAY_SSE_KEEPALIVE_MS: '50',
        REGISTRY_ADDR: registry.address,
        POOL_ADDR: pool.address,
        EXECUTION_ADDR: executionAddress,
        PLACEMENT_ADDR: downAddress,
        BILLING_ADDR: downAddress,
      }),
      logger,
    });
    devTokenId = (await createClient(RegistryServiceDefinition, registry.address).authenticateToken({ token: devToken })).tokenId;
  });

  afterAll(async () => {
    await gateway?.stop();
    await execution.server?.shutdown();
    await Promise.all([registry?.stop(), pool?.stop()]);
    await Promise.all(databases.map((database) => database.drop()));
  });

  describe('operations routes', () => {
    it('answers /healthz without a token', async () => {
      const response = await call('/healthz', { token: null });
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ status: 'ok' });
    });

    it('answers /readyz 503 naming the services that are down', async () => {
      const response = await call('/readyz', { token: null });
      expect(response.status).toBe(503);
      expect(await response.json()).toEqual({
        status: 'not_ready',
        services: { registry: 'serving', pool: 'serving', execution: 'serving', placement: 'unreachable', billing: 'unreachable' },
        not_ready: ['placement', 'billing'],
      });
    });

    it('describes every route in /openapi.json', async () => {
      const response = await call('/openapi.json', { token: null });
      const document = (await response.json()) as { openapi: string; paths: Record<string, Record<string, unknown>> };
      expect(document.openapi).toBe('3.1.0');
      const described = Object.entries(document.paths).flatMap(([path, methods]) =>
        Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
      );
      expect(described.sort()).toEqual(
        [
          'POST /v1/tasks',
          'GET /v1/tasks',
          'GET /v1/tasks/{id}',
          'POST /v1/tasks/{id}/cancel',
          'GET /v1/tasks/{id}/events',
          'GET /v1/adapters',
          'GET /v1/usage',
          'GET /v1/secrets',
          'PUT /v1/secrets/{name}',
          'DELETE /v1/secrets/{name}',
          'GET /api/v1/agents',
          'POST /api/v1/agents',
          'GET /api/v1/agents/{id}',
          'PUT /api/v1/agents/{id}',
          'DELETE /api/v1/agents/{id}',
          'GET /healthz',
          'GET /readyz',
          'GET /openapi.json',
          'GET /metrics',
        ].sort(),
      );
    });

    it('answers an unknown route 404 and a wrong method 405 with Allow', async () => {
      await expectProblem(await call('/v2/nothing'), 404, 'actor.not_found');
      const wrongMethod = await call('/v1/tasks', { method: 'DELETE' });
      expect(wrongMethod.headers.get('allow')).toBe('POST, GET');
      await expectProblem(wrongMethod, 405, 'actor.method_not_allowed');
      const agents = await call('/api/v1/agents/agt_x', { method: 'PATCH' });
      expect(agents.headers.get('allow')).toBe('GET, PUT, DELETE');
      await expectProblem(agents, 405);
    });

    it('counts requests by route and status in /metrics', async () => {
      await call('/v1/tasks/tsk_nope');
      const text = await (await call('/metrics', { token: null })).text();
      expect(text).toMatch(/actor_gateway_http_requests_total\{method="GET",route="\/v1\/tasks\/\{id\}",status="404"\} [1-9]/);
      expect(text).toMatch(/actor_gateway_http_requests_total\{method="GET",route="\/healthz",status="200"\} [1-9]/);
      expect(text).toContain('actor_gateway_sse_connections_open 0');
    });
  });

  describe('authentication', () => {
    it('answers a missing token 401 with WWW-Authenticate: Bearer', async () => {
      const response = await postJson('/v1/tasks', { task: 'hello' }, { token: null });
      expect(response.headers.get('www-authenticate')).toBe('Bearer');
      await expectProblem(response, 401, 'actor.unauthenticated');
    });

    it('answers an unknown or malformed token 401', async () => {
      const unknown = await postJson('/v1/tasks', { task: 'hello' }, { token: 'not-a-real-token' });
      expect(unknown.headers.get('www-authenticate')).toContain('Bearer');
      await expectProblem(unknown, 401, 'actor.unauthenticated');
      const malformed = await call('/v1/tasks', { headers: { authorization: 'Basic dXNlcjpwYXNz' }, token: null });
      await expectProblem(malformed, 401, 'actor.unauthenticated');
    });

    it('lets a valid token through to validation', async () => {
      await expectProblem(await postJson('/v1/tasks', {}), 400, 'actor.invalid_argument');
    });

    it('answers 403 when the token lacks the scope', async () => {
      const response = await postJson('/v1/tasks', { task: 'hello' }, { token: readOnlyToken });
      const problem = await expectProblem(response, 403, 'actor.permission_denied');
      expect(problem.detail).toContain('tasks:write');
      expect((await call('/v1/tasks', { token: readOnlyToken })).status).toBe(200);
    });
  });

  describe('bad input on POST /v1/tasks is a 4xx problem, never a 500', () => {
    const cases: Array<{ name: string; body: string; status: number; code: string; path?: string; headers?: Record<string, string> }> = [
      { name: 'invalid JSON', body: '{"task": "hi",', status: 400, code: 'actor.invalid_json' },
      { name: 'an empty body', body: '', status: 400, code: 'actor.invalid_json' },
      { name: 'a JSON array', body: '[]', status: 400, code: 'actor.invalid_argument', path: '(body)' },
      { name: 'JSON null', body: 'null', status: 400, code: 'actor.invalid_argument', path: '(body)' },
      { name: 'a missing task', body: '{"mode":"best"}', status: 400, code: 'actor.invalid_argument', path: 'task' },
      { name: 'a task of the wrong type', body: '{"task":42}', status: 400, code: 'actor.invalid_argument', path: 'task' },
      { name: 'a budget of the wrong type', body: '{"task":"t","budget":"lots"}', status: 400, code: 'actor.invalid_argument', path: 'budget' },
      { name: 'an unknown mode', body: '{"task":"t","mode":"smartest"}', status: 400, code: 'actor.invalid_argument', path: 'mode' },
      { name: 'a negative budget', body: '{"task":"t","budget":{"per_task_usd":-0.5}}', status: 400, code: 'actor.invalid_argument', path: 'budget.per_task_usd' },
      { name: 'an unknown field', body: '{"task":"t","priority":"high"}', status: 400, code: 'actor.invalid_argument', path: 'priority' },
      { name: 'a webhook to a file URL', body: '{"task":"t","webhooks":[{"url":"file:///x","secret_ref":"s"}]}', status: 400, code: 'actor.invalid_argument', path: 'webhooks[0].url' },
      { name: 'deeply nested JSON', body: `{"task":"t","verify":${'['.repeat(5000)}${']'.repeat(5000)}}`, status: 400, code: 'actor.invalid_argument' },
      { name: 'an oversized body', body: JSON.stringify({ task: 'x'.repeat(maxBodyBytes + 1) }), status: 413, code: 'actor.body_too_large' },
      { name: 'a form body', body: 'task=hello', status: 415, code: 'actor.unsupported_media_type', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
      { name: 'a bad Idempotency-Key', body: '{"task":"t"}', status: 400, code: 'actor.invalid_argument', path: 'Idempotency-Key', headers: { 'idempotency-key': 'x'.repeat(201) } },
    ];

    for (const testCase of cases) {
      it(`answers ${testCase.name} with ${testCase.status} ${testCase.code}`, async () => {
        const response = await postJson('/v1/tasks', testCase.body, { headers: testCase.headers });
        const problem = await expectProblem(response, testCase.status, testCase.code);
        if (testCase.path) expect((problem.errors as Array<{ path: string }>).map((error) => error.path)).toContain(testCase.path);
      });
    }

    it('answers a body without a content type 415', async () => {
      const response = await call('/v1/tasks', { method: 'POST', body: new Blob(['{"task":"t"}']) });
      await expectProblem(response, 415, 'actor.unsupported_media_type');
    });

    it('refuses an oversized body sent without a Content-Length (chunked) with 413', async () => {
      const chunk = new TextEncoder().encode(`{"task":"${'y'.repeat(4096)}`);
      let sent = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent > maxBodyBytes * 2) controller.close();
          else {
            controller.enqueue(chunk);
            sent += chunk.length;
          }
        },
      });
      const response = await call('/v1/tasks', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        duplex: 'half',
      } as RequestInit);
      await expectProblem(response, 413, 'actor.body_too_large');
    });

    it('still serves requests after all that', async () => {
      expect((await call('/healthz')).status).toBe(200);
    });
  });

  describe('tasks (stand-in execution)', () => {
    it('creates a task: 201, Location, the task JSON, and the right CreateTask request', async () => {
      const response = await postJson(
        '/v1/tasks',
        { task: 'What is 2+2?', mode: 'cheapest', budget: { per_task_usd: 0.25, per_day_usd: 3 }, backends: ['demo:alpha-mini'] },
        { headers: { 'idempotency-key': 'create-once' } },
      );
      expect(response.status).toBe(201);
      const task = (await response.json()) as Record<string, any>;
      expect(response.headers.get('location')).toBe(`/v1/tasks/${task.id}`);
      expect(task).toMatchObject({
        id: expect.stringMatching(/^tsk_/),
        state: 'queued',
        mode: 'cheapest',
        task: 'What is 2+2?',
        budget: { per_task: { usd: 0.25, micro_usd: 250_000 }, per_day: { usd: 3, micro_usd: 3_000_000 } },
        result: null,
        error: null,
        cost: { usd: 0, micro_usd: 0 },
        backends: ['demo:alpha-mini'],
        links: { events: `/v1/tasks/${task.id}/events` },
      });
      expect(execution.created.at(-1)).toMatchObject({
        requestId: 'create-once',
        projectId: 'prj_default',
        budget: { perTaskMicroUsd: 250_000, perDayMicroUsd: 3_000_000 },
      });

      const replay = await postJson('/v1/tasks', { task: 'What is 2+2?' }, { headers: { 'idempotency-key': 'create-once' } });
      expect(replay.status).toBe(200);
      expect(((await replay.json()) as { id: string }).id).toBe(task.id);
    });

    it('gives each un-keyed create its own request id, so the gRPC retry is safe but two POSTs are two tasks', async () => {
      const first = (await (await postJson('/v1/tasks', { task: 'a' })).json()) as { id: string };
      const second = (await (await postJson('/v1/tasks', { task: 'a' })).json()) as { id: string };
      expect(first.id).not.toBe(second.id);
      const [a, b] = execution.created.slice(-2);
      expect(a!.requestId).not.toBe('');
      expect(a!.requestId).not.toBe(b!.requestId);
    });

    it("maps the service's error code: a spent budget is 429 actor.budget.exceeded", async () => {
      await expectProblem(await postJson('/v1/tasks', { task: 'over budget' }), 429, 'actor.budget.exceeded');
    });

    it('gets, lists and cancels tasks; cancel records the token id', async () => {
      const created = (await (await postJson('/v1/tasks', { task: 'to cancel' })).json()) as { id: string };
      const fetched = await call(`/v1/tasks/${created.id}`);
      expect(fetched.status).toBe(200);
      expect(((await fetched.json()) as { task: string }).task).toBe('to cancel');

      const list = (await (await call('/v1/tasks?limit=10&state=queued')).json()) as { data: Array<{ id: string }>; next_page_token: unknown };
      expect(list.data.map((task) => task.id)).toContain(created.id);
      expect(list.next_page_token).toBeNull();

      const cancelled = await call(`/v1/tasks/${created.id}/cancel`, { method: 'POST' });
      expect(cancelled.status).toBe(202);
      expect(await cancelled.json()).toMatchObject({ state: 'cancelled', cancel_requested_by: devTokenId });
    });

    it('answers an unknown task id 404, whether or not it looks like one', async () => {
      await expectProblem(await call('/v1/tasks/tsk_nope'), 404, 'actor.not_found');
      await expectProblem(await call(`/v1/tasks/${newId('tsk')}`), 404, 'actor.task.not_found');
      await expectProblem(await call(`/v1/tasks/${newId('tsk')}/cancel`, { method: 'POST' }), 404);
      await expectProblem(await call('/v1/tasks/%E0%A4%A'), 400);
    });

    it('refuses a bad list query', async () => {
      const problem = await expectProblem(await call('/v1/tasks?limit=0&state=done'), 400, 'actor.invalid_argument');
      expect((problem.errors as Array<{ path: string }>).map((error) => error.path).sort()).toEqual(['limit', 'state']);
    });
  });

  describe('task events over SSE (stand-in execution)', () => {
    async function createTask(): Promise<string> {
      return ((await (await postJson('/v1/tasks', { task: 'stream me' })).json()) as { id: string }).id;
    }

    it('streams id/event/data frames and closes after end', async () => {
      const id = await createTask();
      execution.emit(id, 'state', { state: 'running' });
      execution.emit(id, 'output', { text: 'thinking\nstill thinking' });
      const response = await call(`/v1/tasks/${id}/events`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
      expect(response.headers.get('cache-control')).toBe('no-cache');
      expect(response.headers.get('x-accel-buffering')).toBe('no');
      setTimeout(() => execution.emit(id, 'end', { state: 'succeeded' }), 150);
      const { events, comments } = await readEvents(response);
      expect(events).toEqual([
        { id: '1', event: 'state', data: '{"state":"queued"}' },
        { id: '2', event: 'state', data: '{"state":"running"}' },
        { id: '3', event: 'output', data: '{"text":"thinking\\nstill thinking"}' },
        { id: '4', event: 'end', data: '{"state":"succeeded"}' },
      ]);
      expect(comments).toBeGreaterThan(0);
    });

    it('replays only what follows Last-Event-ID (or ?after=)', async () => {
      const id = await createTask();
      execution.emit(id, 'state', { state: 'running' });
      execution.emit(id, 'end', { state: 'succeeded' });
      const afterHeader = await readEvents(await call(`/v1/tasks/${id}/events`, { headers: { 'last-event-id': '2' } }));
      expect(afterHeader.events.map((event) => event.id)).toEqual(['3']);
      const afterQuery = await readEvents(await call(`/v1/tasks/${id}/events?after=1`));
      expect(afterQuery.events.map((event) => event.id)).toEqual(['2', '3']);
      await expectProblem(await call(`/v1/tasks/${id}/events`, { headers: { 'last-event-id': 'abc' } }), 400, 'actor.invalid_argument');
    });

    it('answers an unknown task with a 404 problem, not a stream', async () => {
      await expectProblem(await call(`/v1/tasks/${newId('tsk')}/events`), 404, 'actor.task.not_found');
    });

    it('stops the gRPC watch when the client goes away', async () => {
      const id = await createTask();
      const controller = new AbortController();
      const response = await call(`/v1/tasks/${id}/events`, { signal: controller.signal });
      const { events } = await readEvents(response, 1);
      expect(events).toHaveLength(1);
      expect(execution.openWatches).toBe(1);
      expect(await (await call('/metrics', { token: null })).text()).toContain('actor_gateway_sse_connections_open 1');
      controller.abort();
      await expect.poll(() => execution.openWatches, { timeout: 5_000 }).toBe(0);
      await expect.poll(async () => (await (await call('/metrics', { token: null })).text()).includes('actor_gateway_sse_connections_open 0')).toBe(true);
    });
  });

  describe('adapters and usage', () => {
    it('lists adapters with their rate cards; demo adapters say so', async () => {
      const registryClient = createClient(RegistryServiceDefinition, registry.address);
      await registryClient.putAdapter({
        adapter: {
          type: 'demo:gateway-mini',
          displayName: 'Gateway mini',
          modelFamily: 'demo-alpha',
          capabilities: ['general'],
          limits: { contextTokens: 8000, maxOutputTokens: 1000, concurrency: 2, timeoutMs: 10_000, egress: false },
          trustClass: TrustClass.TRUST_CLASS_FIRST_PARTY,
          qualityTier: 1,
          acceptsByoKey: false,
          requiresByoKey: false,
          demo: true,
          ready: true,
          readyReason: 'built in',
          rateCard: undefined,
          updateTime: undefined,
        },
        requestId: 'gateway-test',
      });
      await registryClient.putRateCard({
        rateCard: { adapterType: 'demo:gateway-mini', inputMicroUsdPerMtok: 150_000, outputMicroUsdPerMtok: 600_000, source: 'demo: fictional prices', reviewer: 'test' },
        reviewerKind: 'human',
      });
      const response = await call('/v1/adapters');
      expect(response.status).toBe(200);
      const { data } = (await response.json()) as { data: Array<Record<string, unknown>> };
      expect(data.find((adapter) => adapter.type === 'demo:gateway-mini')).toMatchObject({
        display_name: 'Gateway mini',
        model_family: 'demo-alpha',
        trust_class: 'first_party',
        demo: true,
        ready: true,
        limits: { max_output_tokens: 1000, concurrency: 2 },
        rate_card: { revision: 1, input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.6, source: 'demo: fictional prices', reviewer: 'test' },
      });
    });

    it('answers usage 503 while billing is down, and refuses a bad day first', async () => {
      await expectProblem(await call('/v1/usage?day=2026-02-30'), 400, 'actor.invalid_argument');
      await expectProblem(await call('/v1/usage?day=2026-01-01'), 503, 'actor.unavailable');
    });
  });

  describe('/api/v1/agents against a real pool', () => {
    it('creates, reads, lists, replaces and deletes an agent', async () => {
      const created = await postJson('/api/v1/agents', {
        name: 'gateway-alpha',
        agent_type: 'demo:alpha-mini',
        configuration: { latency_ms: 5, quality: 0.9 },
        concurrency: 2,
      });
      expect(created.status).toBe(201);
      const agent = (await created.json()) as Record<string, any>;
      expect(created.headers.get('location')).toBe(`/api/v1/agents/${agent.id}`);
      expect(agent).toMatchObject({
        id: expect.stringMatching(/^agt_/),
        name: 'gateway-alpha',
        description: '',
        agent_type: 'demo:alpha-mini',
        capabilities: ['*'],
        configuration: { latency_ms: 5, quality: 0.9 },
        enabled: true,
        concurrency: 2,
        created_at: expect.any(String),
      });

      expect(await (await call(`/api/v1/agents/${agent.id}`)).json()).toMatchObject({ id: agent.id, name: 'gateway-alpha' });
      const list = (await (await call('/api/v1/agents')).json()) as { data: Array<{ id: string }> };
      expect(list.data.map((entry) => entry.id)).toContain(agent.id);

      const replaced = await postJson(
        `/api/v1/agents/${agent.id}`,
        { name: 'gateway-alpha', agent_type: 'demo:alpha-mini', enabled: false, capabilities: ['code'] },
        { method: 'PUT' },
      );
      expect(replaced.status).toBe(200);
      const current = (await replaced.json()) as Record<string, any>;
      expect(current).toMatchObject({ enabled: false, capabilities: ['code'], concurrency: 1, configuration: {} });

      // What GET returns can be edited and PUT back as it is.
      const roundTrip = await postJson(`/api/v1/agents/${agent.id}`, { ...current, configuration: { quality: 0 } }, { method: 'PUT' });
      expect(roundTrip.status).toBe(200);
      expect(await roundTrip.json()).toMatchObject({ id: agent.id, configuration: { quality: 0 }, enabled: false });
      await expectProblem(
        await postJson(`/api/v1/agents/${agent.id}`, { ...current, id: 'agt_other' }, { method: 'PUT' }),
        400,
        'actor.invalid_argument',
      );

      const deleted = await call(`/api/v1/agents/${agent.id}`, { method: 'DELETE' });
      expect(deleted.status).toBe(204);
      await expectProblem(await call(`/api/v1/agents/${agent.id}`), 404);
      await expectProblem(await call(`/api/v1/agents/${agent.id}`, { method: 'DELETE' }), 404);
    });

    it('answers a taken name 409, a bad body 400, and a token without agents:admin 403', async () => {
      const body = { name: 'gateway-beta', agent_type: 'demo:beta' };
      expect((await postJson('/api/v1/agents', body)).status).toBe(201);
      await expectProblem(await postJson('/api/v1/agents', body), 409);
      const invalid = await expectProblem(await postJson('/api/v1/agents', { name: 'x', agent_type: 'demo:beta', concurrency: 0, owner: 'me' }), 400);
      expect((invalid.errors as Array<{ path: string }>).map((error) => error.path).sort()).toEqual(['concurrency', 'owner']);
      await expectProblem(await postJson('/api/v1/agents', { name: 'gateway-gamma', agent_type: 'demo:beta' }, { token: readOnlyToken }), 403);
      // Nesting is capped (at full body size it could overflow the stack when forwarded): a 400, not a 500.
      const deep = `{"name":"deep","agent_type":"demo:beta","configuration":${'{"a":'.repeat(2_000)}1${'}'.repeat(2_000)}}`;
      await expectProblem(await call('/api/v1/agents', { method: 'POST', headers: { 'content-type': 'application/json' }, body: deep }), 400, 'actor.invalid_argument');
      expect((await call('/api/v1/agents', { token: readOnlyToken })).status).toBe(200);
    });
  });

  describe('/v1/secrets against a real registry', () => {
    const putSecret = (name: string, body: unknown, token?: string | null) => postJson(`/v1/secrets/${name}`, body, { method: 'PUT', token });
    const listNames = async (token?: string) =>
      ((await (await call('/v1/secrets', { token })).json()) as { data: Array<{ name: string }> }).data.map((secret) => secret.name);
    const registryClient = () => createClient(RegistryServiceDefinition, registry.address);

    it('creates (201), rotates (200), lists and deletes a secret, never answering its value', async () => {
      const first = 'whsec_gateway_first_0f3a9c';
      const second = 'whsec_gateway_second_77d1e2';
      const created = await putSecret('hook', { value: first });
      const createdText = await created.text();
      expect(created.status).toBe(201);
      expect(createdText).not.toContain(first);
      const createdBody = JSON.parse(createdText) as Record<string, unknown>;
      expect(createdBody).toEqual({ name: 'hook', version: 1, created_at: expect.any(String), updated_at: expect.any(String) });

      const rotated = await putSecret('hook', { value: second });
      const rotatedText = await rotated.text();
      expect(rotated.status).toBe(200);
      expect(rotatedText).not.toContain(second);
      expect(JSON.parse(rotatedText)).toMatchObject({ name: 'hook', version: 2, created_at: createdBody.created_at });
      // The registry holds the new value for the internal callers (webhook signing, BYO keys).
      expect((await registryClient().resolveSecret({ projectId: 'prj_default', name: 'hook' })).value).toBe(second);

      const list = await call('/v1/secrets');
      const listText = await list.text();
      expect(list.status).toBe(200);
      expect(listText).not.toContain(first);
      expect(listText).not.toContain(second);
      expect((JSON.parse(listText) as { data: unknown[] }).data).toContainEqual({
        name: 'hook',
        version: 2,
        created_at: createdBody.created_at,
        updated_at: expect.any(String),
      });

      const deleted = await call('/v1/secrets/hook', { method: 'DELETE' });
      expect(deleted.status).toBe(204);
      expect(await deleted.text()).toBe('');
      await expectProblem(await call('/v1/secrets/hook', { method: 'DELETE' }), 404, 'actor.secret.not_found');
      expect(await listNames()).not.toContain('hook');
    });

    it('keeps each project to its own secrets', async () => {
      expect((await putSecret('shared-name', { value: 'default-value' })).status).toBe(201);
      expect(await listNames(otherProjectToken)).toEqual([]);
      await expectProblem(await call('/v1/secrets/shared-name', { method: 'DELETE', token: otherProjectToken }), 404);
      expect((await putSecret('shared-name', { value: 'other-value' }, otherProjectToken)).status).toBe(201);
      expect((await registryClient().resolveSecret({ projectId: 'prj_default', name: 'shared-name' })).value).toBe('default-value');
      expect((await registryClient().resolveSecret({ projectId: 'prj_other', name: 'shared-name' })).value).toBe('other-value');
    });

    it('answers a token without secrets:admin 403 on every secrets route, and stores nothing', async () => {
      for (const response of [
        await call('/v1/secrets', { token: readOnlyToken }),
        await putSecret('from-reader', { value: 'reader-value' }, readOnlyToken),
        await call('/v1/secrets/shared-name', { method: 'DELETE', token: readOnlyToken }),
      ]) {
        const problem = await expectProblem(response, 403, 'actor.permission_denied');
        expect(problem.detail).toContain('secrets:admin');
      }
      expect(await listNames()).not.toContain('from-reader');
      expect(await listNames()).toContain('shared-name');
      await expectProblem(await call('/v1/secrets', { token: null }), 401);
    });

    it('answers bad names and bodies with a 4xx problem that does not echo the value, never a 500', async () => {
      const value = 'sk-canary-gateway-5e1b';
      const cases: Array<{ path: string; body: unknown; status: number; errorPath?: string }> = [
        { path: 'Upper', body: { value }, status: 400, errorPath: 'name' },
        { path: '-dash', body: { value }, status: 400, errorPath: 'name' },
        { path: 'x'.repeat(64), body: { value }, status: 400, errorPath: 'name' },
        { path: 'a%2Fb', body: { value }, status: 400, errorPath: 'name' },
        { path: 'a%20b', body: { value }, status: 400, errorPath: 'name' },
        { path: 'ok', body: {}, status: 400, errorPath: 'value' },
        { path: 'ok', body: { value: '' }, status: 400, errorPath: 'value' },
        { path: 'ok', body: { value: 42 }, status: 400, errorPath: 'value' },
        { path: 'ok', body: { value, note: value }, status: 400, errorPath: 'note' },
        { path: 'ok', body: [value], status: 400 },
        { path: 'ok', body: `{"value": "${value}"`, status: 400 },
        { path: 'ok', body: { value: 'x'.repeat(maxBodyBytes) }, status: 413 },
      ];
      for (const testCase of cases) {
        const response = await putSecret(testCase.path, testCase.body);
        const problem = await expectProblem(response, testCase.status);
        expect(JSON.stringify(problem)).not.toContain(value);
        if (testCase.errorPath) expect((problem.errors as Array<{ path: string }>).map((error) => error.path)).toContain(testCase.errorPath);
      }
      await expectProblem(await call('/v1/secrets/ok', { method: 'PUT', body: value }), 415);
      await expectProblem(await call('/v1/secrets/Bad%20Name', { method: 'DELETE' }), 400);
      await expectProblem(await call('/v1/secrets/%E0%A4%A', { method: 'DELETE' }), 400);
      expect(await listNames()).not.toContain('ok');
    });
  });
});
