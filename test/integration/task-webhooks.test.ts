import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@actor/kit';
import { TaskState, type Task } from '@actor/proto/execution';
import { loadGatewayConfig } from '../../gateway/src/config.js';
import { startGateway, type RunningGateway } from '../../gateway/src/gateway-server.js';
import { startInProcessPlatform, type InProcessPlatform } from '../support/in-process-platform.js';

/**
 * A real task through the five services, subscribed to every state change: each change the worker
 * records reaches a local receiver, signed with the project secret held by the registry. The secret
 * is written the way a user writes it: PUT /v1/secrets/{name} through the gateway.
 */
describe('webhooks of a task run by the pipeline', () => {
  const secret = `whsec_${randomBytes(24).toString('base64')}`;
  const received: Array<{ headers: IncomingHttpHeaders; body: string }> = [];
  let receiver: Server;
  let url: string;
  let platform: InProcessPlatform;
  let gateway: RunningGateway;

  beforeAll(async () => {
    receiver = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        received.push({ headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/actor`;
    platform = await startInProcessPlatform(createLogger('integration', 'silent'), {
      ACTOR_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
      EXECUTION_WEBHOOK_POLL_INTERVAL_MS: '50',
    });
    await platform.configureAgents({ latency_ms: 0, quality: 1 });
    gateway = await startGateway({
      config: loadGatewayConfig({
        GATEWAY_PORT: '0',
        REGISTRY_ADDR: platform.addresses.registry,
        POOL_ADDR: platform.addresses.pool,
        PLACEMENT_ADDR: platform.addresses.placement,
        EXECUTION_ADDR: platform.addresses.execution,
        BILLING_ADDR: platform.addresses.billing,
      }),
      logger: createLogger('gateway', 'silent'),
    });
    const put = await fetch(`${gateway.url}/v1/secrets/hooks`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${platform.devToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ value: secret }),
    });
    expect(put.status).toBe(201);
  }, 180_000);

  afterAll(async () => {
    await gateway?.stop();
    await platform?.stop();
    await new Promise((resolve) => receiver?.close(resolve));
  });

  it('sends every state change in order of the task life, signed, the last one with result and cost', async () => {
    const { task: created } = await platform.execution.createTask({
      projectId: 'prj_default',
      input: 'Name three colours',
      mode: 'cheapest',
      webhooks: [{ url, secretRef: 'hooks', events: ['task.*'] }],
    });
    for await (const { event } of platform.execution.watchTask({ taskId: created!.id, projectId: 'prj_default' })) void event;
    const deadline = Date.now() + 30_000;
    let task: Task;
    for (;;) {
      task = (await platform.execution.getTask({ taskId: created!.id, projectId: 'prj_default' })).task!;
      if (task.webhookDeliveries.every((delivery) => delivery.status === 'delivered')) break;
      if (Date.now() > deadline) throw new Error(JSON.stringify(task.webhookDeliveries));
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(task.state).toBe(TaskState.TASK_STATE_SUCCEEDED);
    // Deliveries run side by side, so arrival order is free; the rows keep the order of the changes.
    expect(task.webhookDeliveries.map((delivery) => delivery.eventType)).toEqual([
      'task.queued',
      'task.running',
      'task.verifying',
      'task.succeeded',
    ]);
    expect(received).toHaveLength(4);
    for (const request of received) {
      const id = request.headers['webhook-id'] as string;
      const timestamp = request.headers['webhook-timestamp'] as string;
      const expected = createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'))
        .update(`${id}.${timestamp}.${request.body}`)
        .digest('base64');
      expect(request.headers['webhook-signature']).toBe(`v1,${expected}`);
    }
    const succeeded = received.map((request) => JSON.parse(request.body)).find((body) => body.type === 'task.succeeded');
    expect(succeeded.data).toMatchObject({
      task_id: task.id,
      state: 'succeeded',
      result: task.result,
      error: null,
      cost: { micro_usd: task.costMicroUsd },
    });
  });
});
