import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TrustClass } from '@actor/proto/registry';
import { startOllamaFakeServer, type OllamaFakeServer } from '../../../../../test/fakes/ollama-fake-server.js';
import { createAgentFor, discoverAllAdapters } from '../adapter-catalog.js';
import type { AgentEvent } from '../agent.js';
import { discoverOllamaAdapters, ollamaPlaceholderKey } from './ollama-discovery.js';

/** A loopback port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('Ollama discovery', () => {
  let ollama: OllamaFakeServer;

  beforeAll(async () => {
    ollama = await startOllamaFakeServer({
      models: [
        { name: 'llama3.2:latest', family: 'llama', parameterSize: '3.2B' },
        { name: 'qwen2.5-coder:7b', family: 'qwen2', parameterSize: '7.6B' },
      ],
      respond: (body) => {
        const prompt = String((body.messages as Array<{ content: unknown }>).at(-1)?.content);
        return { content: `${String(body.model)} says: ${prompt.toUpperCase()}`, usage: { promptTokens: 12, completionTokens: 5 } };
      },
    });
  });
  afterAll(() => ollama?.close());

  it('declares one ai-sdk:ollama adapter per pulled model, local and free', async () => {
    const found = await discoverOllamaAdapters({ ACTOR_OLLAMA_URL: ollama.url });
    expect(found.reason).toBeUndefined();
    expect(found.definitions.map((definition) => definition.declaration.type)).toEqual(['ai-sdk:ollama/llama3.2:latest', 'ai-sdk:ollama/qwen2.5-coder:7b']);
    const [llama, qwen] = found.definitions;
    expect(llama!.declaration).toMatchObject({
      modelFamily: 'llama',
      trustClass: TrustClass.TRUST_CLASS_FIRST_PARTY,
      demo: false,
      ready: true,
      displayName: 'llama3.2:latest (Ollama, 3.2B)',
      limits: { contextTokens: 4_096 },
    });
    expect(qwen!.declaration.modelFamily).toBe('qwen2');
    expect(llama!.rateCard).toMatchObject({ inputMicroUsdPerMtok: 0, outputMicroUsdPerMtok: 0 });
    expect(ollama.requests.some((request) => request.method === 'GET' && request.path === '/api/tags')).toBe(true);
  });

  it("runs a model through Ollama's OpenAI-compatible API at <url>/v1, streaming, with usage", async () => {
    const found = await discoverOllamaAdapters({ ACTOR_OLLAMA_URL: `${ollama.url}/` });
    const agent = found.definitions.find((definition) => definition.declaration.type === 'ai-sdk:ollama/qwen2.5-coder:7b')!.create();
    const events: AgentEvent[] = [];
    const result = await agent.execute({ executionId: 'exe_ollama', prompt: 'hello' }, new AbortController().signal, (event) => events.push(event));
    expect(result).toMatchObject({ success: true, output: 'qwen2.5-coder:7b says: HELLO', inputTokens: 12, outputTokens: 5 });
    expect(events.filter((event) => event.kind === 'output').map((event) => (event as { text: string }).text).join('')).toBe(result.output);
    const call = ollama.requests.findLast((request) => request.path === '/v1/chat/completions');
    expect(call?.body).toMatchObject({ model: 'qwen2.5-coder:7b', stream: true });
    expect(call?.authorization).toBe(`Bearer ${ollamaPlaceholderKey}`);
    const health = await agent.healthCheck();
    expect(health.find((row) => row.name === 'endpoint')?.status).toBe('ok');
  });

  it('says why when nothing answers, without waiting long', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const found = await discoverOllamaAdapters({ ACTOR_OLLAMA_URL: url });
    expect(found.definitions).toEqual([]);
    expect(found.reason).toBe(`no Ollama answering at ${url} (ECONNREFUSED); start it with \`ollama serve\` or set ACTOR_OLLAMA_URL`);
  });

  it('gives up after ACTOR_OLLAMA_TIMEOUT_MS on a server that never answers', async () => {
    const silent = createHttpServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
    try {
      const found = await discoverOllamaAdapters({ ACTOR_OLLAMA_URL: url, ACTOR_OLLAMA_TIMEOUT_MS: '200' });
      expect(found.reason).toMatch(/^no Ollama answering at .* \(no answer within 200 ms\)/);
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
  });

  it('reports an Ollama without models, a server that is not Ollama, and the off switch', async () => {
    const empty = await startOllamaFakeServer({ models: [] });
    try {
      expect((await discoverOllamaAdapters({ ACTOR_OLLAMA_URL: empty.url })).reason).toBe(`Ollama at ${empty.url} has no models: pull one with \`ollama pull <model>\``);
    } finally {
      await empty.close();
    }
    // The OpenAI fake without Ollama's routes answers /api/tags with 404, as any other web server would.
    const { startOpenAiFakeServer } = await import('../../../../../test/fakes/openai-fake-server.js');
    const other = await startOpenAiFakeServer();
    try {
      const url = other.baseURL.replace(/\/v1$/, '');
      expect((await discoverOllamaAdapters({ ACTOR_OLLAMA_URL: url })).reason).toBe(`no Ollama at ${url}: GET /api/tags answered HTTP 404`);
    } finally {
      await other.close();
    }
    expect(await discoverOllamaAdapters({ ACTOR_OLLAMA_URL: 'off' })).toEqual({ definitions: [], reason: 'Ollama discovery is off (ACTOR_OLLAMA_URL=off)' });
    expect((await discoverOllamaAdapters({ ACTOR_OLLAMA_URL: 'ftp://example' })).reason).toMatch(/^invalid settings: ACTOR_OLLAMA_URL/);
  });

  it('joins the catalog: discoverAllAdapters lists the models, or the reason under ai-sdk:ollama/*', async () => {
    const catalog = await discoverAllAdapters({ ACTOR_OLLAMA_URL: ollama.url });
    expect(catalog.definitions.map((definition) => definition.declaration.type)).toContain('ai-sdk:ollama/llama3.2:latest');
    expect(catalog.notReady.map((adapter) => adapter.type)).not.toContain('ai-sdk:ollama/*');
    expect(catalog.createAgentFor('ai-sdk:ollama/llama3.2:latest')?.type).toBe('ai-sdk:ollama/llama3.2:latest');
    // The process-wide factory (what the execution service's port uses) reaches them too.
    expect(createAgentFor('ai-sdk:ollama/qwen2.5-coder:7b')?.type).toBe('ai-sdk:ollama/qwen2.5-coder:7b');

    const url = `http://127.0.0.1:${await closedPort()}`;
    const without = await discoverAllAdapters({ ACTOR_OLLAMA_URL: url });
    expect(without.definitions.some((definition) => definition.declaration.type.startsWith('ai-sdk:ollama/'))).toBe(false);
    expect(without.notReady).toContainEqual({ type: 'ai-sdk:ollama/*', reason: expect.stringContaining(`no Ollama answering at ${url}`) });
  });
});
