import { createServer } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { priceUsage } from '@actor/kit';
import { startOpenAiFakeServer, type FakeReply, type OpenAiFakeServer } from '../../../../../test/fakes/openai-fake-server.js';
import type { AgentEvent, AgentRequest, AgentResult } from '../agent.js';
import { runAgentConformance } from '../conformance.js';
import { AiSdkAgent } from './ai-sdk-agent.js';
import { discoverAiSdkAdapter } from './ai-sdk-discovery.js';

const apiKey = 'sk-test-abcdef0123456789';
const model = 'fake-model';
const limits = { contextTokens: 128_000, maxOutputTokens: 4_096, concurrency: 4, timeoutMs: 120_000, egress: false };

function agentFor(baseURL: string, key = apiKey): AiSdkAgent {
  return new AiSdkAgent({ type: `ai-sdk:openai-compatible/${model}`, baseURL, apiKey: key, model, providerName: 'openai-compatible', limits });
}

/** A loopback port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const lastUserMessage = (body: Record<string, unknown>) =>
  String((body.messages as { content: unknown }[] | undefined)?.at(-1)?.content ?? '');

/** Slow prompts answer for seconds; schema calls answer the judge shape; the rest a short text. */
function conformanceReply(body: Record<string, unknown>): FakeReply {
  const slow = lastUserMessage(body).includes('slowly');
  if (body.response_format) return { json: { title: 'Quarterly report', priority: 2 }, delayMs: slow ? 5_000 : 0 };
  if (slow) return { content: 'word '.repeat(100), chunks: Array.from({ length: 100 }, () => 'word '), delayMs: 100 };
  return { content: 'The capital of France is Paris.' };
}

runAgentConformance('ai-sdk:openai-compatible (fake OpenAI server)', async () => {
  const fake = await startOpenAiFakeServer({ apiKey, models: [model], respond: conformanceReply });
  const definition = discoverAiSdkAdapter({ ACTOR_OPENAI_BASE_URL: fake.baseURL, ACTOR_OPENAI_API_KEY: apiKey, ACTOR_OPENAI_MODEL: model }).definition!;
  const port = await closedPort();
  return {
    agent: definition.create(),
    rateCard: definition.rateCard,
    request: (executionId) => ({ executionId, prompt: 'What is the capital of France?' }),
    slowRequest: (executionId) => ({ executionId, prompt: 'Answer slowly, please.' }),
    structured: {
      request: (executionId) => ({ executionId, prompt: 'Extract the title and priority.' }),
      jsonSchema: { type: 'object', properties: { title: { type: 'string' }, priority: { type: 'integer' } }, required: ['title', 'priority'] },
    },
    broken: {
      agent: agentFor(`http://127.0.0.1:${port}/v1`),
      request: { executionId: 'exe_unreachable', prompt: 'Hello?' },
      errorMatches: new RegExp(`cannot reach http://127\\.0\\.0\\.1:${port}/v1: .*ECONNREFUSED`),
    },
    close: () => fake.close(),
  };
});

describe('AiSdkAgent against the fake OpenAI server', () => {
  let fake: OpenAiFakeServer;
  const signal = new AbortController().signal;

  beforeAll(async () => {
    fake = await startOpenAiFakeServer({ apiKey, models: [model] });
  });
  afterAll(async () => {
    await fake?.close();
  });
  beforeEach(() => {
    fake.requests.length = 0;
  });

  async function execute(request: AgentRequest, agent = agentFor(fake.baseURL)): Promise<{ result: AgentResult; events: AgentEvent[] }> {
    const events: AgentEvent[] = [];
    const result = await agent.execute(request, signal, (event) => events.push(event));
    return { result, events };
  }

  it('sends the system prompt, the prompt, the model and the key over Chat Completions', async () => {
    const { result } = await execute({ executionId: 'exe_wire', prompt: 'Hello there', systemPrompt: 'Be brief.' });
    expect(result.success).toBe(true);
    expect(fake.requests).toHaveLength(1);
    const [request] = fake.requests;
    expect(request).toMatchObject({ method: 'POST', path: '/v1/chat/completions', authorization: `Bearer ${apiKey}` });
    expect(request?.body).toMatchObject({
      model,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 4_096,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hello there' },
      ],
    });
  });

  it('reports the same usage, and so the same cost, from a streamed and a non-streamed call of the same reply', async () => {
    // JSON text, so that the same reply serves the streamed call and the structured (non-streamed) one.
    const reply: FakeReply = { json: { answer: 42 }, usage: { promptTokens: 1_234, completionTokens: 56 } };
    fake.script(reply, reply);
    const streamed = (await execute({ executionId: 'exe_stream', prompt: 'What is the answer?' })).result;
    const plain = await agentFor(fake.baseURL).executeWithSchema(
      { executionId: 'exe_plain', prompt: 'What is the answer?' },
      { type: 'object', properties: { answer: { type: 'number' } }, required: ['answer'] },
      signal,
    );
    expect(streamed.output).toBe('{"answer":42}');
    expect(plain.structured).toEqual({ answer: 42 });
    expect(fake.requests.map((request) => request.body?.stream ?? false)).toEqual([true, false]);
    expect(streamed).toMatchObject({ success: true, inputTokens: 1_234, outputTokens: 56 });
    expect({ inputTokens: plain.inputTokens, outputTokens: plain.outputTokens }).toEqual({ inputTokens: 1_234, outputTokens: 56 });
    const prices = { inputMicroUsdPerMtok: 150_000, outputMicroUsdPerMtok: 600_000, microUsdPerSecond: 0, microUsdPerTask: 0 };
    const cost = (result: AgentResult) => priceUsage(prices, { inputTokens: result.inputTokens, outputTokens: result.outputTokens, durationMs: 0, calls: 1 });
    expect(cost(streamed)).toBe(cost(plain));
    expect(cost(streamed)).toBe(219);
  });

  it('reports a stream cut midway as an explicit failure, keeping the partial output', async () => {
    fake.script({ content: 'one two three four five six', chunks: ['one ', 'two ', 'three ', 'four ', 'five ', 'six'], cutAfterChunks: 2 });
    const { result, events } = await execute({ executionId: 'exe_cut', prompt: 'Count to six.' });
    expect(result.success).toBe(false);
    expect(result.errorKind).toBe('backend');
    expect(result.errorMessage).toMatch(/stream broke off after 8 characters/);
    expect(result.output).toBe('one two ');
    expect(events).toEqual([
      { kind: 'output', text: 'one ' },
      { kind: 'output', text: 'two ' },
    ]);
  });

  it('reports a stream that ends without the model finishing as a failure, not a truncated success', async () => {
    fake.script({ content: 'one two three', chunks: ['one ', 'two ', 'three'], endAfterChunks: 2 });
    const { result } = await execute({ executionId: 'exe_ended', prompt: 'Count to three.' });
    expect(result).toMatchObject({ success: false, errorKind: 'backend', output: 'one two ' });
    expect(result.errorMessage).toMatch(/ended before the model finished/);
  });

  it('refuses a 401 with a clear error that never contains the API key', async () => {
    const wrongKey = 'sk-wrong-key-9876543210';
    const { result } = await execute({ executionId: 'exe_401', prompt: 'Hello' }, agentFor(fake.baseURL, wrongKey));
    expect(result.success).toBe(false);
    expect(result.errorKind).toBe('backend');
    expect(result.errorMessage).toMatch(/HTTP 401 \(check the API key\)/);
    // The fake echoes the presented key in its error body, as OpenAI does with part of it.
    expect(JSON.stringify(result)).not.toContain(wrongKey);
    const health = await agentFor(fake.baseURL, wrongKey).healthCheck();
    expect(health.find((row) => row.name === 'endpoint')).toMatchObject({ status: 'fail', message: expect.stringMatching(/refused the API key/) });
    expect(JSON.stringify(health)).not.toContain(wrongKey);
  });

  it('uses a bring-your-own key from request.environment for that call only, and never shows it', async () => {
    const byoKey = 'sk-byo-project-secret-13579';
    const events: AgentEvent[] = [];
    // The fake accepts only the configured key, so the BYO key is refused and its 401 echoes it back.
    const refused = await agentFor(fake.baseURL).execute(
      { executionId: 'exe_byo', prompt: 'Hello', environment: { OPENAI_API_KEY: byoKey } },
      signal,
      (event) => events.push(event),
    );
    expect(fake.requests.at(-1)?.authorization).toBe(`Bearer ${byoKey}`);
    expect(refused).toMatchObject({ success: false, errorKind: 'backend' });
    expect(refused.errorMessage).toMatch(/HTTP 401/);
    expect(JSON.stringify({ refused, events })).not.toContain(byoKey);
    // The next call without one goes back to the configured key.
    const { result } = await execute({ executionId: 'exe_after_byo', prompt: 'Hello' });
    expect(result.success).toBe(true);
    expect(fake.requests.at(-1)?.authorization).toBe(`Bearer ${apiKey}`);
  });

  it('turns an HTTP 500 into a backend failure with the server message', async () => {
    fake.script({ status: 500, errorMessage: 'The server had an error while processing your request.' });
    const { result } = await execute({ executionId: 'exe_500', prompt: 'Hello' });
    expect(result).toMatchObject({ success: false, errorKind: 'backend', output: '' });
    expect(result.errorMessage).toMatch(/HTTP 500: The server had an error/);
    expect(fake.requests).toHaveLength(1);
  });

  it('returns the structured value of a JSON-schema call, sent as response_format json_schema', async () => {
    const schema = {
      type: 'object',
      properties: { pass: { type: 'boolean' }, reasons: { type: 'array', items: { type: 'string' } } },
      required: ['pass', 'reasons'],
    };
    fake.script({ json: { pass: false, reasons: ['misses the second part'] } });
    const result = await agentFor(fake.baseURL).executeWithSchema({ executionId: 'exe_json', prompt: 'Judge this.' }, schema, signal);
    expect(result).toMatchObject({ success: true, structured: { pass: false, reasons: ['misses the second part'] } });
    expect(fake.requests[0]?.body?.response_format).toMatchObject({ type: 'json_schema', json_schema: { schema } });
  });

  it('fails a structured call whose answer is not JSON', async () => {
    fake.script({ content: 'Sure! Here is the verdict: it passes.' });
    const result = await agentFor(fake.baseURL).executeWithSchema(
      { executionId: 'exe_not_json', prompt: 'Judge this.' },
      { type: 'object', properties: { pass: { type: 'boolean' } }, required: ['pass'] },
      signal,
    );
    expect(result).toMatchObject({ success: false, errorKind: 'backend' });
    expect(result.structured).toBeUndefined();
  });

  it('checks its health: key present, endpoint answering, model listed', async () => {
    expect(await agentFor(fake.baseURL).healthCheck()).toEqual([
      { name: 'api-key', status: 'ok', message: expect.any(String) },
      { name: 'endpoint', status: 'ok', message: expect.stringMatching(/GET .*\/v1\/models answered HTTP 200/) },
    ]);
    const other = new AiSdkAgent({ type: 'ai-sdk:openai-compatible/other', baseURL: fake.baseURL, apiKey, model: 'other', providerName: 'openai-compatible', limits });
    expect((await other.healthCheck())[1]).toMatchObject({ status: 'warn', message: expect.stringMatching(/does not list the model other/) });
  });

  it('reports an unreachable endpoint in its health check', async () => {
    const port = await closedPort();
    const rows = await agentFor(`http://127.0.0.1:${port}/v1`).healthCheck();
    expect(rows[1]).toMatchObject({ name: 'endpoint', status: 'fail', message: expect.stringMatching(/ECONNREFUSED/) });
  });
});

describe('discoverAiSdkAdapter', () => {
  it('is not ready, and says which variables to set, without a base URL and key', () => {
    expect(discoverAiSdkAdapter({}).reason).toBe('set ACTOR_OPENAI_BASE_URL and ACTOR_OPENAI_API_KEY to use an OpenAI-compatible endpoint');
    expect(discoverAiSdkAdapter({ ACTOR_OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1', ACTOR_OPENAI_API_KEY: ' ' }).reason).toMatch(
      /^set ACTOR_OPENAI_API_KEY /,
    );
  });

  it('declares an external adapter with defaults from a base URL and key', () => {
    const { definition } = discoverAiSdkAdapter({ ACTOR_OPENAI_BASE_URL: 'https://api.example.com/v1', ACTOR_OPENAI_API_KEY: 'sk-x' });
    expect(definition?.declaration).toMatchObject({
      type: 'ai-sdk:openai-compatible/gpt-4o-mini',
      modelFamily: 'openai',
      qualityTier: 3,
      trustClass: 5,
      demo: false,
      capabilities: ['general', 'code', 'research', 'action', 'structured-output'],
    });
    expect(definition?.declaration.readyReason).not.toContain('sk-x');
    expect(definition?.rateCard).toMatchObject({ inputMicroUsdPerMtok: 150_000, outputMicroUsdPerMtok: 600_000, reviewer: 'actor-bootstrap' });
  });

  it('takes model, family, tier and prices from env', () => {
    const { definition } = discoverAiSdkAdapter({
      ACTOR_OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1',
      ACTOR_OPENAI_API_KEY: 'ollama',
      ACTOR_OPENAI_MODEL: 'llama3.1:8b',
      ACTOR_OPENAI_MODEL_FAMILY: 'meta',
      ACTOR_OPENAI_QUALITY_TIER: '2',
      ACTOR_OPENAI_PRICE_INPUT_PER_MTOK_USD: '0',
      ACTOR_OPENAI_PRICE_OUTPUT_PER_MTOK_USD: '0.05',
    });
    expect(definition?.declaration).toMatchObject({ type: 'ai-sdk:openai-compatible/llama3.1:8b', modelFamily: 'meta', qualityTier: 2 });
    expect(definition?.rateCard).toMatchObject({ inputMicroUsdPerMtok: 0, outputMicroUsdPerMtok: 50_000, source: expect.stringMatching(/^operator setting/) });
    expect(definition?.create().type).toBe('ai-sdk:openai-compatible/llama3.1:8b');
  });

  it('explains invalid settings instead of declaring a broken adapter', () => {
    const result = discoverAiSdkAdapter({ ACTOR_OPENAI_BASE_URL: 'not a url', ACTOR_OPENAI_API_KEY: 'k', ACTOR_OPENAI_QUALITY_TIER: '9' });
    expect(result.definition).toBeUndefined();
    expect(result.reason).toMatch(/ACTOR_OPENAI_BASE_URL/);
    expect(result.reason).toMatch(/ACTOR_OPENAI_QUALITY_TIER/);
  });
});
