import { createServer } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { priceUsage } from '@actor/kit';
import { startOpenAiFakeServer, type FakeReply, type OpenAiFakeServer } from '../../../../../test/fakes/openai-fake-server.js';
import type { AgentEvent, AgentRequest, AgentResult } from '../agent.js';
import { runAgentConformance } from '../conformance.js';
import { AiSdkAgent } from './ai-sdk-agent.js';
import { discoverOpenAiAdapter } from './hosted-provider-discovery.js';

const apiKey = 'sk-responses-test-abcdef0123456789';
const model = 'gpt-fake-mini';
const limits = { contextTokens: 128_000, maxOutputTokens: 4_096, concurrency: 4, timeoutMs: 120_000, egress: false };
const signal = new AbortController().signal;

function agentFor(baseURL: string, key = apiKey): AiSdkAgent {
  return new AiSdkAgent({ type: `ai-sdk:openai/${model}`, baseURL, apiKey: key, model, providerName: 'openai', api: 'openai-responses', limits });
}

/** A loopback port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Slow prompts answer for seconds; schema calls (`text.format` json_schema) answer the shape asked. */
function conformanceReply(body: Record<string, unknown>): FakeReply {
  const slow = JSON.stringify(body.input ?? '').includes('slowly');
  const format = (body.text as { format?: { type?: string } } | undefined)?.format;
  if (format?.type === 'json_schema') return { json: { title: 'Quarterly report', priority: 2 }, delayMs: slow ? 5_000 : 0 };
  if (slow) return { content: 'word '.repeat(100), chunks: Array.from({ length: 100 }, () => 'word '), delayMs: 100 };
  return { content: 'The capital of France is Paris.' };
}

runAgentConformance('ai-sdk:openai (fake OpenAI Responses API)', async () => {
  const fake = await startOpenAiFakeServer({ apiKey, models: [model], respond: conformanceReply });
  const definition = discoverOpenAiAdapter({ OPENAI_API_KEY: apiKey, ACTOR_OPENAI_PLATFORM_BASE_URL: fake.baseURL, ACTOR_OPENAI_PLATFORM_MODEL: model }).definition!;
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

describe('AiSdkAgent against the fake OpenAI Responses API', () => {
  let fake: OpenAiFakeServer;

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

  it('posts the instructions, the prompt, the model, the output limit and the key to /v1/responses', async () => {
    const { result } = await execute({ executionId: 'exe_wire', prompt: 'Hello there', systemPrompt: 'Be brief.' });
    expect(result).toMatchObject({ success: true, output: 'A fake answer.' });
    expect(result.executionLog?.[0]).toMatch(/POST .*\/v1\/responses \(model gpt-fake-mini\)/);
    expect(fake.requests).toHaveLength(1);
    const [request] = fake.requests;
    expect(request).toMatchObject({ method: 'POST', path: '/v1/responses', authorization: `Bearer ${apiKey}` });
    expect(request?.body).toMatchObject({ model, stream: true, max_output_tokens: 4_096 });
    expect(JSON.stringify(request?.body?.input)).toContain('Be brief.');
    expect(JSON.stringify(request?.body?.input)).toContain('Hello there');
  });

  it('reports the same usage, and so the same cost, from a streamed and a non-streamed call of the same reply', async () => {
    const reply: FakeReply = { json: { answer: 42 }, usage: { promptTokens: 2_345, completionTokens: 67 } };
    fake.script(reply, reply);
    const events: AgentEvent[] = [];
    const streamed = await agentFor(fake.baseURL).execute({ executionId: 'exe_stream', prompt: 'What is the answer?' }, signal, (event) => events.push(event));
    const plain = await agentFor(fake.baseURL).executeWithSchema(
      { executionId: 'exe_plain', prompt: 'What is the answer?' },
      { type: 'object', properties: { answer: { type: 'number' } }, required: ['answer'] },
      signal,
    );
    expect(fake.requests.map((request) => request.body?.stream ?? false)).toEqual([true, false]);
    expect(events.length).toBeGreaterThan(1);
    expect(streamed).toMatchObject({ success: true, output: '{"answer":42}', inputTokens: 2_345, outputTokens: 67 });
    expect(plain).toMatchObject({ success: true, structured: { answer: 42 }, inputTokens: 2_345, outputTokens: 67 });
    const prices = { inputMicroUsdPerMtok: 150_000, outputMicroUsdPerMtok: 600_000, microUsdPerSecond: 0, microUsdPerTask: 0 };
    const cost = (result: AgentResult) => priceUsage(prices, { inputTokens: result.inputTokens, outputTokens: result.outputTokens, durationMs: 0, calls: 1 });
    expect(cost(streamed)).toBe(cost(plain));
    // 2345 * 0.15 + 67 * 0.60 = 351.75 + 40.2 micro-USD.
    expect(cost(streamed)).toBe(392);
  });

  it('reports a stream cut midway as an explicit failure, keeping the partial output', async () => {
    fake.script({ content: 'one two three four five six', chunks: ['one ', 'two ', 'three ', 'four ', 'five ', 'six'], cutAfterChunks: 2 });
    const { result, events } = await execute({ executionId: 'exe_cut', prompt: 'Count to six.' });
    expect(result).toMatchObject({ success: false, errorKind: 'backend', output: 'one two ' });
    expect(result.errorMessage).toMatch(/stream broke off after 8 characters/);
    expect(events).toEqual([
      { kind: 'output', text: 'one ' },
      { kind: 'output', text: 'two ' },
    ]);
  });

  it('reports a stream that ends without response.completed as a failure, not a truncated success', async () => {
    fake.script({ content: 'one two three', chunks: ['one ', 'two ', 'three'], endAfterChunks: 2 });
    const { result } = await execute({ executionId: 'exe_ended', prompt: 'Count to three.' });
    expect(result).toMatchObject({ success: false, errorKind: 'backend', output: 'one two ' });
    expect(result.errorMessage).toMatch(/ended before the model finished/);
  });

  it('takes an incomplete response (output limit reached) as a finished answer, and logs why it stopped', async () => {
    fake.script({ content: 'a long answer', finishReason: 'max_output_tokens', usage: { promptTokens: 10, completionTokens: 4_096 } });
    const { result } = await execute({ executionId: 'exe_incomplete', prompt: 'Go on and on.' });
    expect(result).toMatchObject({ success: true, output: 'a long answer', outputTokens: 4_096 });
    expect(result.executionLog).toContain(`ai-sdk:openai/${model}: the answer reached the output token limit`);
  });

  it('refuses a 401 with a clear error that never contains the API key, and never shows a BYO key', async () => {
    const wrongKey = 'sk-wrong-responses-9876543210';
    const { result } = await execute({ executionId: 'exe_401', prompt: 'Hello' }, agentFor(fake.baseURL, wrongKey));
    expect(result).toMatchObject({ success: false, errorKind: 'backend' });
    expect(result.errorMessage).toMatch(/HTTP 401 \(check the API key\)/);
    // The fake echoes the presented key in its error body.
    expect(JSON.stringify(result)).not.toContain(wrongKey);
    const byoKey = 'sk-byo-responses-13579';
    const refused = await execute({ executionId: 'exe_byo', prompt: 'Hello', environment: { OPENAI_API_KEY: byoKey } });
    expect(fake.requests.at(-1)?.authorization).toBe(`Bearer ${byoKey}`);
    expect(refused.result.errorMessage).toMatch(/HTTP 401/);
    expect(JSON.stringify(refused)).not.toContain(byoKey);
    const health = await agentFor(fake.baseURL, wrongKey).healthCheck();
    expect(health.find((row) => row.name === 'endpoint')).toMatchObject({ status: 'fail', message: expect.stringMatching(/refused the API key/) });
  });

  it('sends a JSON-schema call as text.format json_schema and returns the structured value', async () => {
    const schema = { type: 'object', properties: { pass: { type: 'boolean' }, reasons: { type: 'array', items: { type: 'string' } } }, required: ['pass', 'reasons'] };
    fake.script({ json: { pass: false, reasons: ['misses the second part'] } });
    const result = await agentFor(fake.baseURL).executeWithSchema({ executionId: 'exe_json', prompt: 'Judge this.' }, schema, signal);
    expect(result).toMatchObject({ success: true, structured: { pass: false, reasons: ['misses the second part'] } });
    expect(fake.requests[0]?.body?.text).toMatchObject({ format: { type: 'json_schema', strict: false, schema } });
  });

  it('fails a structured call whose answer is not JSON', async () => {
    fake.script({ content: 'Sure! It passes.' });
    const result = await agentFor(fake.baseURL).executeWithSchema(
      { executionId: 'exe_not_json', prompt: 'Judge this.' },
      { type: 'object', properties: { pass: { type: 'boolean' } }, required: ['pass'] },
      signal,
    );
    expect(result).toMatchObject({ success: false, errorKind: 'backend' });
    expect(result.structured).toBeUndefined();
  });

  it('speaks Chat Completions instead when ACTOR_OPENAI_PLATFORM_API is chat', async () => {
    const { definition } = discoverOpenAiAdapter({ OPENAI_API_KEY: apiKey, ACTOR_OPENAI_PLATFORM_BASE_URL: fake.baseURL, ACTOR_OPENAI_PLATFORM_MODEL: model, ACTOR_OPENAI_PLATFORM_API: 'chat' });
    const result = await definition!.create().execute({ executionId: 'exe_chat', prompt: 'Hello' }, signal, () => {});
    expect(result.success).toBe(true);
    expect(fake.requests.map((request) => request.path)).toEqual(['/v1/chat/completions']);
  });
});

describe('discoverOpenAiAdapter', () => {
  it('is not ready without OPENAI_API_KEY, whatever the OpenAI-compatible settings say', () => {
    expect(discoverOpenAiAdapter({}).reason).toBe('set OPENAI_API_KEY to use the OpenAI API');
    expect(discoverOpenAiAdapter({ OPENAI_API_KEY: ' ', ACTOR_OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1', ACTOR_OPENAI_API_KEY: 'k' }).definition).toBeUndefined();
  });

  it('declares ai-sdk:openai/gpt-4o-mini on the Responses API by default, without showing the key', () => {
    const { definition } = discoverOpenAiAdapter({ OPENAI_API_KEY: 'sk-discovery-secret' });
    expect(definition?.declaration).toMatchObject({
      type: 'ai-sdk:openai/gpt-4o-mini',
      modelFamily: 'openai',
      qualityTier: 3,
      acceptsByoKey: true,
      readyReason: 'configured from env: https://api.openai.com (Responses API), model gpt-4o-mini',
    });
    expect(definition?.rateCard).toMatchObject({ inputMicroUsdPerMtok: 150_000, outputMicroUsdPerMtok: 600_000 });
    expect(JSON.stringify(definition)).not.toContain('sk-discovery-secret');
    expect(definition?.create().byoKeyVariable).toBe('OPENAI_API_KEY');
  });

  it('takes model, API, tier and prices from env, and explains invalid ones', () => {
    const { definition } = discoverOpenAiAdapter({
      OPENAI_API_KEY: 'sk-x',
      ACTOR_OPENAI_PLATFORM_MODEL: 'gpt-5',
      ACTOR_OPENAI_PLATFORM_API: 'chat',
      ACTOR_OPENAI_PLATFORM_QUALITY_TIER: '5',
      ACTOR_OPENAI_PLATFORM_PRICE_INPUT_PER_MTOK_USD: '1.25',
      ACTOR_OPENAI_PLATFORM_PRICE_OUTPUT_PER_MTOK_USD: '10',
    });
    expect(definition?.declaration).toMatchObject({ type: 'ai-sdk:openai/gpt-5', qualityTier: 5, readyReason: expect.stringContaining('(Chat Completions)') });
    expect(definition?.rateCard).toMatchObject({ inputMicroUsdPerMtok: 1_250_000, outputMicroUsdPerMtok: 10_000_000, source: expect.stringMatching(/^operator setting/) });
    const invalid = discoverOpenAiAdapter({ OPENAI_API_KEY: 'sk-x', ACTOR_OPENAI_PLATFORM_API: 'completions', ACTOR_OPENAI_PLATFORM_BASE_URL: 'nope' });
    expect(invalid.definition).toBeUndefined();
    expect(invalid.reason).toMatch(/ACTOR_OPENAI_PLATFORM_API/);
    expect(invalid.reason).toMatch(/ACTOR_OPENAI_PLATFORM_BASE_URL/);
  });
});
