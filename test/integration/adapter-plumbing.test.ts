import { createServer } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '@actor/kit';
import { TaskState, type TaskEvent } from '@actor/proto/execution';
import { PlacementServiceDefinition } from '@actor/proto/placement';
import { RegistryServiceDefinition } from '@actor/proto/registry';
import { bootstrapAdapters } from '../../services/execution/src/adapter-bootstrap.js';
import { discoverAllAdapters } from '../../services/execution/src/agents/adapter-catalog.js';
import { startOllamaFakeServer, type OllamaFakeServer } from '../fakes/ollama-fake-server.js';
import { startOpenAiFakeServer, type OpenAiFakeServer } from '../fakes/openai-fake-server.js';
import { startInProcessPlatform, type InProcessPlatform } from '../support/in-process-platform.js';

const projectId = 'prj_default';
const byoKey = 'sk-byo-project-secret-7f3a9c2e41d8';
const operatorKey = 'sk-operator-key-the-endpoint-refuses';
const backend = 'ai-sdk:openai-compatible/fake-model';
const ollamaBackend = 'ai-sdk:ollama/llama3.2:latest';

/**
 * Adapter plumbing across the five services: a bring-your-own key kept as a project secret in the
 * registry reaches the backend and nothing else, and the models of a local Ollama become adapters.
 */
describe('bring-your-own keys and Ollama discovery', () => {
  let platform: InProcessPlatform;
  let openai: OpenAiFakeServer;
  let ollama: OllamaFakeServer;
  let registry: ReturnType<typeof createClient<typeof RegistryServiceDefinition>>;
  const logLines: string[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) });

  beforeAll(async () => {
    // The endpoint accepts only the project's own key, not the one the operator configured.
    openai = await startOpenAiFakeServer({
      apiKey: byoKey,
      respond: () => ({ content: 'Paris is the capital of France.', usage: { promptTokens: 100, completionTokens: 20 } }),
    });
    ollama = await startOllamaFakeServer({
      models: [{ name: 'llama3.2:latest', family: 'llama', parameterSize: '3.2B' }],
      respond: () => ({ content: 'Bonjour from a local model.', usage: { promptTokens: 30, completionTokens: 6 } }),
    });
    platform = await startInProcessPlatform(logger, {}, {
      ACTOR_OPENAI_BASE_URL: openai.baseURL,
      ACTOR_OPENAI_API_KEY: operatorKey,
      ACTOR_OPENAI_MODEL: 'fake-model',
      ACTOR_OLLAMA_URL: ollama.url,
    });
    registry = createClient(RegistryServiceDefinition, platform.addresses.registry);
    await registry.putSecret({ projectId, name: 'openai-key', value: byoKey, requestId: 'byo-secret' });
  }, 180_000);

  afterAll(async () => {
    await platform?.stop();
    await openai?.close();
    await ollama?.close();
  });

  async function configureSlot(agentType: string, configuration: Record<string, unknown>) {
    const { agents } = await platform.pool.listAgents({});
    const slot = agents.find((agent) => agent.agentType === agentType)!;
    await platform.pool.updateAgent({ agent: { ...slot, configurationJson: JSON.stringify(configuration) } });
  }

  async function runTask(input: string, backends: string[]) {
    const { task: created } = await platform.execution.createTask({ projectId, input, backends, mode: 'best' });
    const events: TaskEvent[] = [];
    for await (const { event } of platform.execution.watchTask({ taskId: created!.id, projectId })) events.push(event!);
    const { task } = await platform.execution.getTask({ taskId: created!.id, projectId });
    return { task: task!, events };
  }

  it("runs a slot that names the project secret with that key, which shows up nowhere else", async () => {
    await configureSlot(backend, { api_key_secret: 'openai-key' });
    const { task, events } = await runTask('What is the capital of France?', [backend]);
    expect(task.state).toBe(TaskState.TASK_STATE_SUCCEEDED);
    expect(task.result).toBe('Paris is the capital of France.');
    expect(task.attempts[0]).toMatchObject({ backend, inputTokens: 100, outputTokens: 20 });

    const calls = openai.requests.filter((request) => request.path === '/v1/chat/completions');
    expect(calls).toHaveLength(1);
    expect(calls[0]!.authorization).toBe(`Bearer ${byoKey}`);

    // Everything the platform said about the run: events, the task, its list, billing, placement, logs.
    const { tasks } = await platform.execution.listTasks({ projectId, pageSize: 50, pageToken: '' });
    const { usage } = await platform.billing.listUsage({ projectId, taskId: task.id });
    const placement = createClient(PlacementServiceDefinition, platform.addresses.placement);
    const decisions = await Promise.all(
      task.explanation.filter((entry) => entry.decisionId).map((entry) => placement.getDecision({ id: entry.decisionId })),
    );
    const { agents } = await platform.pool.listAgents({});
    const said = JSON.stringify({ events, task, tasks, usage, decisions }) + logLines.join('\n');
    expect(said).toContain('Paris is the capital of France.');
    expect(logLines.length).toBeGreaterThan(10);
    expect(said).not.toContain(byoKey);
    // The slot holds the secret's name only.
    expect(JSON.stringify(agents)).toContain('openai-key');
    expect(JSON.stringify(agents)).not.toContain(byoKey);
  });

  it('fails the attempt with a clear error, and calls no backend, when the named secret does not exist', async () => {
    await configureSlot(backend, { api_key_secret: 'no-such-key' });
    const before = openai.requests.length;
    const { task, events } = await runTask('What is the capital of Spain?', [backend]);
    expect(task.state).toBe(TaskState.TASK_STATE_FAILED);
    expect(task.attempts[0]?.error).toContain(`project ${projectId} has no secret named "no-such-key"`);
    expect(openai.requests.length).toBe(before);
    const said = JSON.stringify({ events, task }) + logLines.join('\n');
    expect(said).toContain('no-such-key');
    expect(said).not.toContain(byoKey);
  });

  it("declares the local Ollama's models at start-up and runs a task on one through <url>/v1", async () => {
    const { adapter } = await registry.getAdapter({ type: ollamaBackend });
    expect(adapter).toMatchObject({ ready: true, modelFamily: 'llama', demo: false, readyReason: `Ollama at ${ollama.url} lists llama3.2:latest` });
    const { task } = await runTask('Say hello in French.', [ollamaBackend]);
    expect(task.state).toBe(TaskState.TASK_STATE_SUCCEEDED);
    expect(task.result).toBe('Bonjour from a local model.');
    expect(task.attempts[0]).toMatchObject({ backend: ollamaBackend, inputTokens: 30, outputTokens: 6, costMicroUsd: expect.any(Number) });
    expect(ollama.requests.some((request) => request.path === '/v1/chat/completions' && request.body?.model === 'llama3.2:latest')).toBe(true);
  });

  it('marks the Ollama models not ready, with the reason, when a later start finds no Ollama', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const deadUrl = `http://127.0.0.1:${(probe.address() as { port: number }).port}`;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    // The start-up path of the execution service: discovery, then the bootstrap against the real registry and pool.
    const catalog = await discoverAllAdapters({ ACTOR_OLLAMA_URL: deadUrl });
    await bootstrapAdapters({
      registry,
      pool: platform.pool,
      definitions: catalog.definitions,
      notReady: catalog.notReady,
      slotConcurrency: 1,
      logger,
    });
    const { adapter } = await registry.getAdapter({ type: ollamaBackend });
    expect(adapter?.ready).toBe(false);
    expect(adapter?.readyReason).toBe(`no Ollama answering at ${deadUrl} (ECONNREFUSED); start it with \`ollama serve\` or set ACTOR_OLLAMA_URL`);
  });
});
