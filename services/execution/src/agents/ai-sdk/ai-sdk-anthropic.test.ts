import { createServer } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { priceUsage } from '@actor/kit';
import {
  startAnthropicFakeServer,
  type AnthropicFakeReply,
  type AnthropicFakeRequest,
  type AnthropicFakeServer,
} from '../../../../../test/fakes/anthropic-fake-server.js';
import type { AgentEvent, AgentRequest, AgentResult } from '../agent.js';
import { runAgentConformance } from '../conformance.js';
import { AiSdkAgent } from './ai-sdk-agent.js';
import { discoverAnthropicAdapter } from './hosted-provider-discovery.js';

const apiKey = 'sk-ant-test-abcdef0123456789';
/** A model the SDK knows to take native structured output (`output_config.format`). */
const model = 'claude-haiku-4-5';
const limits = { contextTokens: 200_000, maxOutputTokens: 4_096, concurrency: 4, timeoutMs: 120_000, egress: false };
const signal = new AbortController().signal;

function agentFor(baseURL: string, options: { key?: string; model?: string } = {}): AiSdkAgent {
  const modelId = options.model ?? model;
  return new AiSdkAgent({
    type: `ai-sdk:anthropic/${modelId}`,
    baseURL,
    apiKey: options.key ?? apiKey,
    model: modelId,
    providerName: 'anthropic',
    api: 'anthropic-messages',
    limits,
  });
}

/** A loopback port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** How the SDK asked for structured output: native `output_config.format`, or a forced `json` tool. */
function structuredMode(request: AnthropicFakeRequest): 'format' | 'tool' | undefined {
  const body = request.body;
  if ((body.output_config as { format?: { type?: string } } | undefined)?.format?.type === 'json_schema') return 'format';
  if (Array.isArray(body.tools) && (body.tools as { name?: string }[]).some((tool) => tool.name === 'json')) return 'tool';
  return undefined;
}

/** Slow prompts answer for seconds; schema calls answer the shape asked, as text or as the json tool's input. */
function conformanceReply(request: AnthropicFakeRequest): AnthropicFakeReply {
  const slow = request.texts.some((text) => text.includes('slowly'));
  const value = { title: 'Quarterly report', priority: 2 };
  const mode = structuredMode(request);
  if (mode === 'format') return { json: value, delayMs: slow ? 5_000 : 0 };
  if (mode === 'tool') return { toolUse: { name: 'json', input: value }, delayMs: slow ? 5_000 : 0 };
  if (slow) return { text: 'word '.repeat(100), chunks: Array.from({ length: 100 }, () => 'word '), delayMs: 100 };
  return { text: 'The capital of France is Paris.' };
}

runAgentConformance('ai-sdk:anthropic (fake Anthropic Messages API)', async () => {
  const fake = await startAnthropicFakeServer({ apiKey, models: [model], respond: conformanceReply });
  const definition = discoverAnthropicAdapter({ ANTHROPIC_API_KEY: apiKey, ACTOR_ANTHROPIC_BASE_URL: `${fake.baseURL}/v1`, ACTOR_ANTHROPIC_MODEL: model }).definition!;
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

describe('AiSdkAgent against the fake Anthropic Messages API', () => {
  let fake: AnthropicFakeServer;
  let baseURL: string;

  beforeAll(async () => {
    fake = await startAnthropicFakeServer({ apiKey, models: [model], echoKeyInErrors: true, respond: conformanceReply });
    baseURL = `${fake.baseURL}/v1`;
  });
  afterAll(async () => {
    await fake?.close();
  });
  beforeEach(() => {
    fake.requests.length = 0;
  });

  async function execute(request: AgentRequest, agent = agentFor(baseURL)): Promise<{ result: AgentResult; events: AgentEvent[] }> {
    const events: AgentEvent[] = [];
    const result = await agent.execute(request, signal, (event) => events.push(event));
    return { result, events };
  }

  it('posts the system prompt, the prompt, the model, max_tokens and the key to /v1/messages', async () => {
    const { result } = await execute({ executionId: 'exe_wire', prompt: 'Hello there', systemPrompt: 'Be brief.' });
    expect(result).toMatchObject({ success: true, output: 'The capital of France is Paris.' });
    expect(result.executionLog?.[0]).toMatch(/POST .*\/v1\/messages \(model claude-haiku-4-5\)/);
    expect(fake.requests).toHaveLength(1);
    const [request] = fake.requests;
    expect(request).toMatchObject({ path: '/v1/messages', apiKey, texts: ['Hello there'] });
    expect(request?.body).toMatchObject({ model, stream: true, max_tokens: 4_096 });
    expect(JSON.stringify(request?.body.system)).toContain('Be brief.');
  });

  it('reports the same usage, and so the same cost, from a streamed and a non-streamed call of the same reply', async () => {
    const reply: AnthropicFakeReply = { json: { answer: 42 }, usage: { inputTokens: 3_210, outputTokens: 45 } };
    fake.script(reply, reply);
    const events: AgentEvent[] = [];
    const streamed = await agentFor(baseURL).execute({ executionId: 'exe_stream', prompt: 'What is the answer?' }, signal, (event) => events.push(event));
    const plain = await agentFor(baseURL).executeWithSchema(
      { executionId: 'exe_plain', prompt: 'What is the answer?' },
      { type: 'object', properties: { answer: { type: 'number' } }, required: ['answer'] },
      signal,
    );
    expect(fake.requests.map((request) => request.body.stream ?? false)).toEqual([true, false]);
    expect(events.length).toBeGreaterThan(0);
    expect(streamed).toMatchObject({ success: true, output: '{"answer":42}', inputTokens: 3_210, outputTokens: 45 });
    expect(plain).toMatchObject({ success: true, structured: { answer: 42 }, inputTokens: 3_210, outputTokens: 45 });
    const { rateCard } = discoverAnthropicAdapter({ ANTHROPIC_API_KEY: apiKey }).definition!;
    const cost = (result: AgentResult) => priceUsage(rateCard, { inputTokens: result.inputTokens, outputTokens: result.outputTokens, durationMs: 0, calls: 1 });
    expect(cost(streamed)).toBe(cost(plain));
    // 3210 * $1/Mtok + 45 * $5/Mtok = 3210 + 225 micro-USD.
    expect(cost(streamed)).toBe(3_435);
  });

  it('reports a stream cut midway as an explicit failure, keeping the partial output', async () => {
    fake.script({ text: 'one two three four five six', chunks: ['one ', 'two ', 'three ', 'four ', 'five ', 'six'], cutAfterChunks: 2 });
    const { result, events } = await execute({ executionId: 'exe_cut', prompt: 'Count to six.' });
    expect(result).toMatchObject({ success: false, errorKind: 'backend', output: 'one two ' });
    expect(result.errorMessage).toMatch(/stream broke off after 8 characters/);
    expect(events).toEqual([
      { kind: 'output', text: 'one ' },
      { kind: 'output', text: 'two ' },
    ]);
  });

  it('reports a stream that ends without message_delta and message_stop as a failure, not a truncated success', async () => {
    fake.script({ text: 'one two three', chunks: ['one ', 'two ', 'three'], endAfterChunks: 2 });
    const { result } = await execute({ executionId: 'exe_ended', prompt: 'Count to three.' });
    expect(result).toMatchObject({ success: false, errorKind: 'backend', output: 'one two ' });
    expect(result.errorMessage).toMatch(/ended before the model finished/);
  });

  it('refuses a 401 with a clear error that never contains the API key, and never shows a BYO key', async () => {
    const wrongKey = 'sk-ant-wrong-9876543210';
    const { result } = await execute({ executionId: 'exe_401', prompt: 'Hello' }, agentFor(baseURL, { key: wrongKey }));
    expect(result).toMatchObject({ success: false, errorKind: 'backend' });
    expect(result.errorMessage).toMatch(/HTTP 401 \(check the API key\)/);
    expect(result.errorMessage).toMatch(/invalid x-api-key: \[redacted\]/);
    expect(JSON.stringify(result)).not.toContain(wrongKey);
    const byoKey = 'sk-ant-byo-project-13579';
    const refused = await execute({ executionId: 'exe_byo', prompt: 'Hello', environment: { ANTHROPIC_API_KEY: byoKey, OPENAI_API_KEY: 'ignored' } });
    expect(fake.requests.at(-1)?.apiKey).toBe(byoKey);
    expect(refused.result.errorMessage).toMatch(/HTTP 401/);
    expect(JSON.stringify(refused)).not.toContain(byoKey);
    const health = await agentFor(baseURL, { key: wrongKey }).healthCheck();
    expect(health.find((row) => row.name === 'endpoint')).toMatchObject({ status: 'fail', message: expect.stringMatching(/refused the API key \(HTTP 401\)/) });
    expect(JSON.stringify(health)).not.toContain(wrongKey);
  });

  it('turns an HTTP 529 overload into a backend failure', async () => {
    fake.script({ status: 529 });
    const { result } = await execute({ executionId: 'exe_529', prompt: 'Hello' });
    expect(result).toMatchObject({ success: false, errorKind: 'backend', output: '' });
    expect(result.errorMessage).toMatch(/HTTP 529/);
    expect(fake.requests).toHaveLength(1);
  });

  it('asks for native structured output (output_config.format) on a model that has it', async () => {
    const schema = { type: 'object', properties: { pass: { type: 'boolean' }, reasons: { type: 'array', items: { type: 'string' } } }, required: ['pass', 'reasons'] };
    fake.script({ json: { pass: false, reasons: ['misses the second part'] } });
    const result = await agentFor(baseURL).executeWithSchema({ executionId: 'exe_json', prompt: 'Judge this.' }, schema, signal);
    expect(result).toMatchObject({ success: true, structured: { pass: false, reasons: ['misses the second part'] } });
    expect(fake.requests[0]?.body.output_config).toMatchObject({ format: { type: 'json_schema', schema: { properties: schema.properties } } });
  });

  it('falls back to a forced json tool on an older model, and returns the tool input as the value', async () => {
    const older = 'claude-3-haiku-20240307';
    const result = await agentFor(baseURL, { model: older }).executeWithSchema(
      { executionId: 'exe_json_tool', prompt: 'Extract the title and priority.' },
      { type: 'object', properties: { title: { type: 'string' }, priority: { type: 'integer' } }, required: ['title', 'priority'] },
      signal,
    );
    expect(result).toMatchObject({ success: true, structured: { title: 'Quarterly report', priority: 2 } });
    expect(structuredMode(fake.requests[0]!)).toBe('tool');
    expect(fake.requests[0]?.body.output_config).toBeUndefined();
  });

  it('fails a structured call whose answer is not JSON', async () => {
    fake.script({ text: 'Sure! It passes.' });
    const result = await agentFor(baseURL).executeWithSchema(
      { executionId: 'exe_not_json', prompt: 'Judge this.' },
      { type: 'object', properties: { pass: { type: 'boolean' } }, required: ['pass'] },
      signal,
    );
    expect(result).toMatchObject({ success: false, errorKind: 'backend' });
    expect(result.structured).toBeUndefined();
  });

  it('checks its health with GET /v1/models and the x-api-key header', async () => {
    expect(await agentFor(baseURL).healthCheck()).toEqual([
      { name: 'api-key', status: 'ok', message: expect.any(String) },
      { name: 'endpoint', status: 'ok', message: expect.stringMatching(/GET .*\/v1\/models answered HTTP 200/) },
    ]);
    const rows = await agentFor(baseURL, { model: 'claude-unlisted' }).healthCheck();
    expect(rows[1]).toMatchObject({ status: 'warn', message: expect.stringMatching(/does not list the model claude-unlisted/) });
  });
});

describe('discoverAnthropicAdapter', () => {
  it('is not ready without ANTHROPIC_API_KEY', () => {
    expect(discoverAnthropicAdapter({}).reason).toBe('set ANTHROPIC_API_KEY to use the Anthropic API');
    expect(discoverAnthropicAdapter({ ANTHROPIC_API_KEY: '', ACTOR_ANTHROPIC_MODEL: 'claude-sonnet-4-5' }).definition).toBeUndefined();
  });

  it('declares ai-sdk:anthropic/claude-haiku-4-5 of family anthropic by default, taking a BYO key, without showing the key', () => {
    const { definition } = discoverAnthropicAdapter({ ANTHROPIC_API_KEY: 'sk-ant-discovery-secret' });
    expect(definition?.declaration).toMatchObject({
      type: 'ai-sdk:anthropic/claude-haiku-4-5',
      modelFamily: 'anthropic',
      qualityTier: 3,
      acceptsByoKey: true,
      requiresByoKey: false,
      capabilities: expect.arrayContaining(['structured-output']),
      readyReason: 'configured from env: https://api.anthropic.com (Messages API), model claude-haiku-4-5',
    });
    expect(definition?.rateCard).toMatchObject({ inputMicroUsdPerMtok: 1_000_000, outputMicroUsdPerMtok: 5_000_000, source: expect.stringMatching(/^default: Claude Haiku 4\.5/) });
    expect(JSON.stringify(definition)).not.toContain('sk-ant-discovery-secret');
    expect(definition?.create().byoKeyVariable).toBe('ANTHROPIC_API_KEY');
  });

  it('takes base URL, model, tier and prices from env, and explains invalid ones', () => {
    const { definition } = discoverAnthropicAdapter({
      ANTHROPIC_API_KEY: 'k',
      ACTOR_ANTHROPIC_BASE_URL: 'http://127.0.0.1:9/v1',
      ACTOR_ANTHROPIC_MODEL: 'claude-sonnet-4-5',
      ACTOR_ANTHROPIC_QUALITY_TIER: '4',
      ACTOR_ANTHROPIC_PRICE_INPUT_PER_MTOK_USD: '3',
      ACTOR_ANTHROPIC_PRICE_OUTPUT_PER_MTOK_USD: '15',
    });
    expect(definition?.declaration).toMatchObject({ type: 'ai-sdk:anthropic/claude-sonnet-4-5', qualityTier: 4, readyReason: expect.stringContaining('http://127.0.0.1:9') });
    expect(definition?.rateCard).toMatchObject({ inputMicroUsdPerMtok: 3_000_000, outputMicroUsdPerMtok: 15_000_000, source: expect.stringMatching(/^operator setting/) });
    const invalid = discoverAnthropicAdapter({ ANTHROPIC_API_KEY: 'k', ACTOR_ANTHROPIC_BASE_URL: 'ftp://x', ACTOR_ANTHROPIC_QUALITY_TIER: '0' });
    expect(invalid.definition).toBeUndefined();
    expect(invalid.reason).toMatch(/ACTOR_ANTHROPIC_BASE_URL/);
    expect(invalid.reason).toMatch(/ACTOR_ANTHROPIC_QUALITY_TIER/);
  });
});
