import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { lookup } from 'node:dns/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { Status } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, createLogger } from '@actor/kit';
import { rejection, testDatabase } from '@actor/kit/testing';
import { ExecutionServiceDefinition, type Task } from '@actor/proto/execution';
import { RegistryServiceDefinition } from '@actor/proto/registry';
import { loadRegistryConfig } from '../../../registry/src/config.js';
import { startRegistry } from '../../../registry/src/registry-server.js';
import { loadExecutionConfig } from '../config.js';
import { TaskRepository } from '../db/task-repository.js';
import { startExecution } from '../execution-server.js';

interface Received {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * Webhook delivery end to end on one machine: a real registry holding the project's signing secret,
 * the execution service (no task workers: state changes come from CancelTask and from the task
 * repository, as the worker would write them) and a node:http receiver that answers as each test
 * scripts it and checks nothing itself; the test checks the signature with its own HMAC.
 */
describe('webhook delivery', () => {
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const project = 'prj_default'; // the project the registry creates at start
  const received: Received[] = [];
  /** Status codes a path answers, one per request; 200 once a path's list is used up. */
  const script = new Map<string, number[]>();
  const logLines: string[] = [];
  let receiver: Server;
  let base: string;
  let registry: Awaited<ReturnType<typeof startRegistry>>;
  let registryDatabase: Awaited<ReturnType<typeof testDatabase>>;
  let executionDatabase: Awaited<ReturnType<typeof testDatabase>>;
  let dataDir: string;
  let execution: Awaited<ReturnType<typeof startExecution>> | undefined;
  let client: ReturnType<typeof createClient<typeof ExecutionServiceDefinition>>;
  let registryClient: ReturnType<typeof createClient<typeof RegistryServiceDefinition>>;

  // Everything execution logs, to check that no secret value ever appears in it.
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        logLines.push(chunk.toString());
        done();
      },
    }),
  );

  async function startExecutionService(env: Record<string, string> = {}) {
    const config = loadExecutionConfig({
      EXECUTION_ADDR: '127.0.0.1:0',
      REGISTRY_ADDR: registry.address,
      DATABASE_URL: executionDatabase.databaseUrl,
      ACTOR_DATA_DIR: dataDir,
      EXECUTION_WORKERS: '0',
      EXECUTION_BOOTSTRAP: 'false',
      EXECUTION_SECRET_CACHE_MS: '0',
      EXECUTION_WEBHOOK_POLL_INTERVAL_MS: '50',
      EXECUTION_WEBHOOK_BACKOFF_BASE_MS: '50',
      EXECUTION_WEBHOOK_BACKOFF_MAX_MS: '200',
      EXECUTION_WEBHOOK_MAX_ATTEMPTS: '3',
      ACTOR_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
      ...env,
    });
    execution = await startExecution({ config, logger, adapterEnv: {} });
    client = createClient(ExecutionServiceDefinition, execution.address);
  }

  beforeAll(async () => {
    receiver = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const path = request.url ?? '/';
        received.push({ path, headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
        const status = script.get(path)?.shift() ?? 200;
        response.writeHead(status).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
    registryDatabase = await testDatabase();
    registry = await startRegistry({
      config: loadRegistryConfig({ REGISTRY_ADDR: '127.0.0.1:0', DATABASE_URL: registryDatabase.databaseUrl, ACTOR_DATA_DIR: registryDatabase.dataDir }),
      secretKey: 'webhook-test',
      logger: createLogger('registry', 'silent'),
    });
    registryClient = createClient(RegistryServiceDefinition, registry.address);
    await registryClient.putSecret({ projectId: project, name: 'hook', value: secret });
    executionDatabase = await testDatabase();
    // On PGlite the data must outlive a restart of the service: a directory, not memory.
    dataDir = mkdtempSync(join(tmpdir(), 'actor-webhooks-'));
    // The first replica sends nothing: the first test restarts it into one that does.
    await startExecutionService({ EXECUTION_WEBHOOK_CONCURRENCY: '0' });
  });

  afterAll(async () => {
    await execution?.stop();
    await registry?.stop();
    await new Promise((resolve) => receiver?.close(resolve));
    await executionDatabase?.drop();
    await registryDatabase?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    // Not one log line carries the signing secret or its key.
    const log = logLines.join('');
    expect(log).not.toContain(secret);
    expect(log).not.toContain(secret.slice('whsec_'.length));
  });

  function requestsTo(path: string): Received[] {
    return received.filter((request) => request.path === path);
  }

  /** Re-reads the task until `done` holds; fails after 20 s (a deadline, not a timing assertion). */
  async function taskWhen(taskId: string, done: (task: Task) => boolean): Promise<Task> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const { task } = await client.getTask({ taskId, projectId: project });
      if (done(task!)) return task!;
      if (Date.now() > deadline) throw new Error(`condition not met; deliveries: ${JSON.stringify(task!.webhookDeliveries)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  const settled = (task: Task) => task.webhookDeliveries.length > 0 && task.webhookDeliveries.every((delivery) => delivery.status !== 'pending');

  function expectSigned(request: Received): void {
    const id = request.headers['webhook-id'] as string;
    const timestamp = request.headers['webhook-timestamp'] as string;
    const signature = request.headers['webhook-signature'] as string;
    expect(id).toMatch(/^whk_[0-9A-Z]{26}$/);
    expect(Math.abs(Number(timestamp) - Date.now() / 1000)).toBeLessThan(300);
    const expected = createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'))
      .update(`${id}.${timestamp}.${request.body}`)
      .digest('base64');
    expect(signature).toBe(`v1,${expected}`);
    expect(request.headers['content-type']).toBe('application/json');
  }

  it('keeps deliveries written while no replica sends, and sends them after a restart', async () => {
    const { task } = await client.createTask({
      projectId: project,
      input: 'hello',
      webhooks: [{ url: `${base}/restart`, secretRef: 'hook', events: ['task.*'] }],
    });
    await client.cancelTask({ taskId: task!.id, projectId: project, requestedBy: 'test' });
    const stored = (await client.getTask({ taskId: task!.id, projectId: project })).task!;
    expect(stored.webhookDeliveries.map((delivery) => [delivery.eventType, delivery.status, delivery.attempts])).toEqual([
      ['task.queued', 'pending', 0],
      ['task.cancelled', 'pending', 0],
    ]);
    expect(requestsTo('/restart')).toHaveLength(0);
    await execution!.stop();
    execution = undefined;

    await startExecutionService();
    const sent = await taskWhen(task!.id, settled);
    expect(sent.webhookDeliveries.map((delivery) => [delivery.status, delivery.attempts, delivery.lastStatusCode])).toEqual([
      ['delivered', 1, 200],
      ['delivered', 1, 200],
    ]);
    const requests = requestsTo('/restart');
    expect(requests).toHaveLength(2);
    requests.forEach(expectSigned);
    expect(requests.map((request) => request.headers['webhook-id']).sort()).toEqual(sent.webhookDeliveries.map((delivery) => delivery.id).sort());
    const cancelled = requests.map((request) => JSON.parse(request.body)).find((body) => body.type === 'task.cancelled');
    expect(cancelled.data).toMatchObject({
      task_id: task!.id,
      state: 'cancelled',
      result: null,
      error: { code: 'actor.cancelled' },
      cost: { usd: 0, micro_usd: 0 },
    });
  });

  it('sends a succeeded task its result and cost, once, to a subscription with the default events', async () => {
    const { task } = await client.createTask({
      projectId: project,
      input: 'What is 2+2?',
      webhooks: [{ url: `${base}/done`, secretRef: 'hook', events: [] }],
    });
    // What the worker writes at the end of a verified run.
    await new TaskRepository(execution!.database.db).finish(task!.id, { state: 'succeeded', result: '4', costMicroUsd: 126_410 });
    const sent = await taskWhen(task!.id, settled);
    expect(sent.webhookDeliveries).toHaveLength(1); // `task.queued` is not a default event
    const [request] = requestsTo('/done');
    expectSigned(request!);
    const body = JSON.parse(request!.body);
    expect(body).toMatchObject({
      type: 'task.succeeded',
      data: { task_id: task!.id, state: 'succeeded', result: '4', error: null, cost: { usd: 0.13, micro_usd: 126_410 } },
    });
    expect(Date.parse(body.timestamp)).not.toBeNaN();
  });

  it('retries after a 500 with the same id and body, then records the success', async () => {
    script.set('/flaky', [500]);
    const { task } = await client.createTask({ projectId: project, input: 'x', webhooks: [{ url: `${base}/flaky`, secretRef: 'hook', events: [] }] });
    await client.cancelTask({ taskId: task!.id, projectId: project, requestedBy: 'test' });
    const sent = await taskWhen(task!.id, settled);
    expect(sent.webhookDeliveries[0]).toMatchObject({ status: 'delivered', attempts: 2, lastStatusCode: 200, lastError: '' });
    const requests = requestsTo('/flaky');
    expect(requests).toHaveLength(2);
    requests.forEach(expectSigned);
    expect(requests[1]!.headers['webhook-id']).toBe(requests[0]!.headers['webhook-id']);
    expect(requests[1]!.body).toBe(requests[0]!.body);
  });

  it('stops at a 410 Gone, and gives up after the last attempt on other failures', async () => {
    script.set('/gone', [410, 200, 200]);
    script.set('/broken', [503, 500, 502, 200]);
    const { task } = await client.createTask({
      projectId: project,
      input: 'x',
      webhooks: [
        { url: `${base}/gone`, secretRef: 'hook', events: [] },
        { url: `${base}/broken`, secretRef: 'hook', events: [] },
      ],
    });
    await client.cancelTask({ taskId: task!.id, projectId: project, requestedBy: 'test' });
    const sent = await taskWhen(task!.id, settled);
    const [gone, broken] = [...sent.webhookDeliveries].sort((left, right) => left.webhookIndex - right.webhookIndex);
    expect(gone).toMatchObject({ status: 'failed', attempts: 1, lastStatusCode: 410 });
    expect(gone!.lastError).toMatch(/410 Gone/);
    expect(requestsTo('/gone')).toHaveLength(1);
    expect(broken).toMatchObject({ status: 'failed', attempts: 3, lastStatusCode: 502 });
    expect(broken!.lastError).toMatch(/HTTP 502 \(gave up after 3 tries\)/);
    expect(requestsTo('/broken')).toHaveLength(3);
  });

  // Replicas share one database only on Postgres (PGlite lives inside one process).
  it.runIf(Boolean(process.env.DATABASE_URL))('sends each delivery once when two replicas claim side by side', async () => {
    const [first, firstClient] = [execution!, client];
    await startExecutionService({ EXECUTION_WEBHOOK_CONCURRENCY: '3' });
    const second = execution!;
    [execution, client] = [first, firstClient];
    try {
      const taskIds: string[] = [];
      for (let index = 0; index < 24; index += 1) {
        const { task } = await client.createTask({ projectId: project, input: `t${index}`, webhooks: [{ url: `${base}/fanout`, secretRef: 'hook', events: [] }] });
        await client.cancelTask({ taskId: task!.id, projectId: project, requestedBy: 'test' });
        taskIds.push(task!.id);
      }
      for (const taskId of taskIds) await taskWhen(taskId, settled);
      const ids = requestsTo('/fanout').map((request) => request.headers['webhook-id']);
      expect(ids).toHaveLength(24);
      expect(new Set(ids).size).toBe(24);
    } finally {
      await second.stop();
    }
  });

  it('refuses internal URLs at creation and internal addresses after DNS at delivery', async () => {
    for (const url of ['http://169.254.169.254/latest/meta-data', 'http://10.0.0.7/hook', 'http://localhost:8080/hook', 'http://[::1]/hook']) {
      const refused = await rejection(client.createTask({ projectId: project, input: 'x', webhooks: [{ url, secretRef: 'hook', events: [] }] }));
      expect(refused.status, url).toBe(Status.INVALID_ARGUMENT);
      expect(refused.message, url).toMatch(/is refused/);
    }
    // A name that passes the creation check and resolves to a loopback or private address.
    const port = (receiver.address() as { port: number }).port;
    const internalName = await nameResolvingInternally();
    const { task } = await client.createTask({
      projectId: project,
      input: 'x',
      webhooks: [{ url: `http://${internalName}:${port}/internal`, secretRef: 'hook', events: [] }],
    });
    await client.cancelTask({ taskId: task!.id, projectId: project, requestedBy: 'test' });
    const sent = await taskWhen(task!.id, settled);
    expect(sent.webhookDeliveries[0]).toMatchObject({ status: 'failed', attempts: 1, lastStatusCode: 0 });
    expect(sent.webhookDeliveries[0]!.lastError).toMatch(/address refused: .* resolves to .*(loopback|private)/);
    expect(requestsTo('/internal')).toHaveLength(0);
  });

  it('refuses unknown event types and a missing secret_ref', async () => {
    const events = await rejection(
      client.createTask({ projectId: project, input: 'x', webhooks: [{ url: `${base}/x`, secretRef: 'hook', events: ['task.done'] }] }),
    );
    expect(events.message).toMatch(/webhook events "task.done" unknown/);
    const secretRef = await rejection(client.createTask({ projectId: project, input: 'x', webhooks: [{ url: `${base}/x`, secretRef: '', events: [] }] }));
    expect(secretRef.message).toMatch(/needs a secret_ref/);
  });

  it('retries while the signing secret is missing, saying which, and delivers once it exists', async () => {
    // Enough tries that the secret surely arrives before they run out.
    await execution!.stop();
    await startExecutionService({ EXECUTION_WEBHOOK_MAX_ATTEMPTS: '1000' });
    const { task } = await client.createTask({ projectId: project, input: 'x', webhooks: [{ url: `${base}/late-secret`, secretRef: 'late', events: [] }] });
    await client.cancelTask({ taskId: task!.id, projectId: project, requestedBy: 'test' });
    const waiting = await taskWhen(task!.id, (current) => (current.webhookDeliveries[0]?.lastError ?? '') !== '');
    expect(waiting.webhookDeliveries[0]).toMatchObject({ status: 'pending', lastStatusCode: 0 });
    expect(waiting.webhookDeliveries[0]!.lastError).toMatch(/signing secret "late" unavailable: project prj_default has no secret named "late"/);
    expect(requestsTo('/late-secret')).toHaveLength(0);
    const lateSecret = 'a raw secret without the prefix';
    await registryClient.putSecret({ projectId: project, name: 'late', value: lateSecret });
    const sent = await taskWhen(task!.id, settled);
    expect(sent.webhookDeliveries[0]).toMatchObject({ status: 'delivered', lastStatusCode: 200, lastError: '' });
    const [request] = requestsTo('/late-secret');
    // A value without `whsec_` signs with its own UTF-8 bytes.
    const expected = createHmac('sha256', lateSecret)
      .update(`${request!.headers['webhook-id']}.${request!.headers['webhook-timestamp']}.${request!.body}`)
      .digest('base64');
    expect(request!.headers['webhook-signature']).toBe(`v1,${expected}`);
    expect(logLines.join('')).not.toContain(lateSecret);
  });
});

/**
 * A host name that is not internal as written but resolves to a loopback or private address: the
 * machine's own name where it resolves so (most hosts), else Debian's `ip6-localhost` from /etc/hosts.
 */
async function nameResolvingInternally(): Promise<string> {
  for (const name of [hostname(), 'ip6-localhost', 'ip6-loopback']) {
    const addresses = await lookup(name, { all: true }).catch(() => []);
    if (addresses.length > 0 && addresses.every(({ address }) => /^(127\.|10\.|192\.168\.|::1$)/.test(address))) return name;
  }
  throw new Error('no host name here resolves to a loopback or private address; the after-DNS check needs one');
}
