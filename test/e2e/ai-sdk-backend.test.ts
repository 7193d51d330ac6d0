import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiFakeServer, type OpenAiFakeServer } from '../fakes/openai-fake-server.js';
import { readEvents } from '../support/sse-client.js';
import { startTestPlatform, type TestPlatform } from '../support/test-platform.js';

/**
 * A user with a key gets real answers: the platform started with ACTOR_OPENAI_* pointing at an
 * OpenAI-compatible endpoint (here a local server speaking the Chat Completions wire format) declares
 * the `ai`-SDK backend, routes a task to it, has a demo judge of another family check it and bills
 * the tokens the endpoint reported.
 */
describe('the ai-SDK backend on an OpenAI-compatible endpoint', () => {
  let fake: OpenAiFakeServer;
  let platform: TestPlatform;
  const backend = 'ai-sdk:openai-compatible/fake-model';
  const auth = () => ({ Authorization: `Bearer ${platform.token}` });

  beforeAll(async () => {
    fake = await startOpenAiFakeServer({
      apiKey: 'sk-e2e-secret',
      respond: () => ({ content: 'Paris is the capital of France.', usage: { promptTokens: 1_000, completionTokens: 2_000 } }),
    });
    platform = await startTestPlatform({
      ACTOR_OPENAI_BASE_URL: fake.baseURL,
      ACTOR_OPENAI_API_KEY: 'sk-e2e-secret',
      ACTOR_OPENAI_MODEL: 'fake-model',
    });
  }, 180_000);
  afterAll(async () => {
    await platform?.stop();
    await fake?.close();
  });

  it('is declared ready beside the demos', async () => {
    const body = (await (await fetch(`${platform.url}/v1/adapters`, { headers: auth() })).json()) as { data: any[] };
    const adapter = body.data.find((item) => item.type === backend);
    expect(adapter).toMatchObject({ demo: false, ready: true, model_family: 'openai' });
    expect(adapter.rate_card.input_usd_per_mtok).toBe(0.15);
    expect(adapter.rate_card.output_usd_per_mtok).toBe(0.6);
  });

  it('answers a task through the endpoint and bills the reported tokens by the rate card', async () => {
    const response = await fetch(`${platform.url}/v1/tasks`, {
      method: 'POST',
      headers: { ...auth(), 'Content-Type': 'application/json' },
      body: JSON.stringify({ task: 'What is the capital of France?', backends: [backend], mode: 'best' }),
    });
    expect(response.status).toBe(201);
    const { id } = (await response.json()) as { id: string };
    const stream = await readEvents(`${platform.url}/v1/tasks/${id}/events`, auth(), { until: 'end', timeoutMs: 60_000 });
    const output = stream.events.filter((event) => event.event === 'output').map((event) => JSON.parse(event.data).text).join('');
    expect(output).toBe('Paris is the capital of France.');

    const task = (await (await fetch(`${platform.url}/v1/tasks/${id}`, { headers: auth() })).json()) as any;
    expect(task.state).toBe('succeeded');
    expect(task.result).toBe('Paris is the capital of France.');
    const attempt = task.attempts[0];
    expect(attempt.backend).toBe(backend);
    expect(attempt.input_tokens).toBe(1_000);
    expect(attempt.output_tokens).toBe(2_000);
    expect(attempt.verdict.judge_model_family).not.toBe('openai');
    // 1,000 x $0.15/M + 2,000 x $0.60/M = 150 + 1,200 micro-USD for the work, plus the demo judge.
    const work = (await (await fetch(`${platform.url}/v1/usage`, { headers: auth() })).json()) as any;
    expect(work.by_backend.find((row: any) => row.backend === backend).cost.micro_usd).toBe(1_350);

    const call = fake.requests.find((request) => request.path.endsWith('/chat/completions'));
    expect(call?.authorization).toBe('Bearer sk-e2e-secret');
    expect(JSON.stringify(call?.body)).toContain('What is the capital of France?');
  });

  it('never shows the key in the adapter list', async () => {
    const text = await (await fetch(`${platform.url}/v1/adapters`, { headers: auth() })).text();
    expect(text).not.toContain('sk-e2e-secret');
  });
});
