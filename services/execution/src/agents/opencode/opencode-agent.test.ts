import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  startAnthropicFakeServer,
  type AnthropicFakeReply,
  type AnthropicFakeRequest,
  type AnthropicFakeServer,
} from '../../../../../test/fakes/anthropic-fake-server.js';
import type { AgentEvent, AgentRequest, AgentResult } from '../agent.js';
import { runAgentConformance } from '../conformance.js';
import { OpencodeAgent, type OpencodeAgentOptions } from './opencode-agent.js';
import { discoverOpencodeAdapter, opencodeLimits } from './opencode-discovery.js';
import { startOpencodeServer, type StartedOpencodeServer } from './opencode-server.js';

/**
 * These tests run the real `opencode serve` (opencode-ai from npm, installed by .ci/run outside the
 * workspace, or named by OPENCODE_BIN) offline: its provider is `@ai-sdk/anthropic` (bundled in the
 * binary, nothing installed at run time) pointed at the fake Anthropic Messages server on loopback,
 * with the models.dev fetch and auto-update switched off. Each run starts its own server, which takes
 * seconds on a busy machine: hence the longer test timeout.
 */
vi.setConfig({ testTimeout: 240_000, hookTimeout: 240_000 });

const installedBinary = resolve(import.meta.dirname, '../../../../../.tools/opencode/node_modules/.bin/opencode');
const binaryPath = process.env.OPENCODE_BIN ?? installedBinary;
const binaryFound = existsSync(binaryPath);

const apiKey = 'sk-ant-fake-opencode-0123456789';
const prices = { inputMicroUsdPerMtok: 3_000_000, outputMicroUsdPerMtok: 15_000_000, microUsdPerSecond: 0, microUsdPerTask: 0 };
const model = 'fakeanthropic/claude-fake';

/** Replies chosen from the whole conversation; markers in the prompts say what each test wants. */
function respond(request: AnthropicFakeRequest): AnthropicFakeReply {
  // opencode's side calls (the session title) carry no tools: answer them at once.
  if (!request.hasTools) return { text: 'A title' };
  const conversation = request.texts.join('\n');
  const toolNames = (request.body.tools as Array<{ name?: string }>).map((tool) => tool.name);
  if (toolNames.includes('StructuredOutput') && request.toolResults.length === 0) {
    return { toolUse: { name: 'StructuredOutput', input: { title: 'Quarterly report', priority: 2 } } };
  }
  if (conversation.includes('[[reject]]')) return { status: 400 };
  if (conversation.includes('[[slow]]')) return { chunks: Array.from({ length: 100 }, () => 'word '), delayMs: 100 };
  if (conversation.includes('[[tool]]')) {
    if (request.toolResults.length === 0) return { toolUse: { name: 'bash', input: { command: 'echo tool-says-hi', description: 'Print a greeting' } } };
    return { text: `The tool said: ${request.toolResults.join(' ').trim()}` };
  }
  if (conversation.includes('[[recall]]')) {
    const remembered = /remember the word (\w+)/i.exec(conversation)?.[1] ?? 'nothing';
    return { text: `You asked me to remember ${remembered}.` };
  }
  return { text: 'The capital of France is Paris.' };
}

/**
 * A private opencode home (config, data, cache, state) whose config names the fake as an Anthropic
 * provider with list prices, so that opencode reports a cost. The config folder is marked as having
 * its plugin dependency installed: opencode otherwise installs `@opencode-ai/plugin` there from npm in
 * the background.
 */
async function opencodeHome(baseURL: string, key: string): Promise<{ root: string; environment: Record<string, string> }> {
  const root = await mkdtemp(join(tmpdir(), 'actor-opencode-home-'));
  const configDirectory = join(root, 'config', 'opencode');
  await mkdir(join(configDirectory, 'node_modules'), { recursive: true });
  const dependencies = { '@opencode-ai/plugin': '*' };
  await writeFile(join(configDirectory, 'package.json'), JSON.stringify({ dependencies }));
  await writeFile(join(configDirectory, 'package-lock.json'), JSON.stringify({ lockfileVersion: 3, packages: { '': { dependencies } } }));
  const config = {
    $schema: 'https://opencode.ai/config.json',
    autoupdate: false,
    share: 'disabled',
    model,
    small_model: model,
    provider: {
      fakeanthropic: {
        npm: '@ai-sdk/anthropic',
        name: 'Fake Anthropic',
        options: { baseURL: `${baseURL}/v1`, apiKey: key },
        models: { 'claude-fake': { name: 'Claude (fake)', tool_call: true, cost: { input: 3, output: 15 }, limit: { context: 200_000, output: 8_000 } } },
      },
    },
  };
  const configFile = join(root, 'opencode.json');
  await writeFile(configFile, JSON.stringify(config));
  return {
    root,
    environment: {
      HOME: root,
      XDG_CONFIG_HOME: join(root, 'config'),
      XDG_DATA_HOME: join(root, 'data'),
      XDG_CACHE_HOME: join(root, 'cache'),
      XDG_STATE_HOME: join(root, 'state'),
      OPENCODE_CONFIG: configFile,
      OPENCODE_DISABLE_MODELS_FETCH: '1',
    },
  };
}

if (!binaryFound) {
  describe('opencode against the real server', () => {
    it.runIf(process.env.CI === 'true')('finds the opencode binary (CI installs it in .ci/run)', () => {
      throw new Error(`no opencode binary at ${binaryPath}: run npm install --prefix .tools/opencode opencode-ai@1.18.33, or set OPENCODE_BIN`);
    });
    it.skipIf(process.env.CI === 'true')(`skipped: no opencode binary at ${binaryPath} (set OPENCODE_BIN or install opencode-ai into .tools/opencode)`, () => {});
  });
} else {
  let home: { root: string; environment: Record<string, string> };
  const agentFor = (overrides: Partial<OpencodeAgentOptions> = {}) =>
    new OpencodeAgent({ type: 'opencode', binaryPath, environment: home.environment, model, limits: { ...opencodeLimits }, prices, ...overrides });

  runAgentConformance('opencode (real opencode serve, fake Anthropic server)', async () => {
    const fake = await startAnthropicFakeServer({ apiKey, respond });
    home = await opencodeHome(fake.baseURL, apiKey);
    return {
      agent: agentFor(),
      rateCard: { ...prices, source: 'test', reviewer: 'test' },
      request: (executionId) => ({ executionId, prompt: 'What is the capital of France?' }),
      slowRequest: (executionId) => ({ executionId, prompt: 'Count slowly [[slow]]' }),
      structured: {
        request: (executionId) => ({ executionId, prompt: 'Extract the title and priority.' }),
        jsonSchema: { type: 'object', properties: { title: { type: 'string' }, priority: { type: 'integer' } }, required: ['title', 'priority'] },
      },
      broken: {
        agent: agentFor({ binaryPath: '/nonexistent/opencode' }),
        request: { executionId: 'exe_missing_opencode', prompt: 'Hello?' },
        errorMatches: /cannot start \/nonexistent\/opencode: ENOENT/,
      },
      close: async () => {
        await fake.close();
        await rm(home.root, { recursive: true, force: true });
      },
    };
  });

  describe('OpencodeAgent with the real server', () => {
    let fake: AnthropicFakeServer;
    let agent: OpencodeAgent;
    let workingDirectory: string;
    let ownHome: { root: string; environment: Record<string, string> };

    beforeAll(async () => {
      fake = await startAnthropicFakeServer({ apiKey, respond });
      ownHome = await opencodeHome(fake.baseURL, apiKey);
      workingDirectory = await mkdtemp(join(tmpdir(), 'actor-opencode-work-'));
      agent = new OpencodeAgent({ type: 'opencode', binaryPath, environment: ownHome.environment, model, limits: { ...opencodeLimits }, prices });
    });
    afterAll(async () => {
      await fake?.close();
      await rm(workingDirectory, { recursive: true, force: true });
      await rm(ownHome.root, { recursive: true, force: true });
    });

    async function execute(request: Omit<AgentRequest, 'executionId'>, on = agent): Promise<{ result: AgentResult; events: AgentEvent[] }> {
      const events: AgentEvent[] = [];
      const result = await on.execute({ executionId: `exe_opencode_${Math.random()}`, workingDirectory, ...request }, new AbortController().signal, (event) => events.push(event));
      return { result, events };
    }

    it('answers a plain prompt with the session, usage and the cost opencode reports', async () => {
      const { result } = await execute({ prompt: 'What is the capital of France?', systemPrompt: 'Answer in one sentence.' });
      expect(result.errorMessage).toBeUndefined();
      expect(result).toMatchObject({ success: true, output: 'The capital of France is Paris.' });
      expect(result.sessionId).toMatch(/^ses_/);
      expect(result.inputTokens).toBeGreaterThan(0);
      expect(result.outputTokens).toBeGreaterThan(0);
      // The fake's usage priced at the config's $3 / $15 per million tokens, as opencode computes it.
      expect(result.reportedCostMicroUsd).toBe(Math.round(result.inputTokens * 3 + result.outputTokens * 15));
      const main = fake.requests.filter((request) => request.hasTools).at(-1)!;
      expect(main.body.model).toBe('claude-fake');
      expect(JSON.stringify(main.body.system)).toContain('Answer in one sentence.');
      expect(main.texts.join('\n')).toContain('What is the capital of France?');
    });

    it('runs a tool round trip and sums the usage of both steps', async () => {
      const before = fake.requests.length;
      const { result, events } = await execute({ prompt: 'Greet me through the shell [[tool]]' });
      expect(result.errorMessage).toBeUndefined();
      expect(result.success).toBe(true);
      expect(result.output).toContain('The tool said: tool-says-hi');
      expect(events).toContainEqual({ kind: 'log', message: expect.stringMatching(/tool bash called with .*echo tool-says-hi/) });
      const steps = fake.requests.slice(before).filter((request) => request.hasTools);
      expect(steps.length).toBe(2);
      expect(steps[1]!.toolResults.join('\n')).toContain('tool-says-hi');
      // Both steps' input counts: more than the larger single request alone.
      expect(result.inputTokens).toBeGreaterThan(Math.max(...steps.map((request) => JSON.stringify(request.body).length / 4)));
    });

    it('does not offer a disallowed tool to the model', async () => {
      const before = fake.requests.length;
      const { result } = await execute({ prompt: 'What is the capital of France?', disallowedTools: ['bash'] });
      expect(result.success).toBe(true);
      const main = fake.requests.slice(before).filter((request) => request.hasTools);
      expect(main.length).toBeGreaterThan(0);
      for (const request of main) expect((request.body.tools as Array<{ name: string }>).map((tool) => tool.name)).not.toContain('bash');
    });

    it("resumes a session by id: the second run (another server process) sees the first one's conversation", async () => {
      const first = await execute({ prompt: 'Please remember the word PINEAPPLE.' });
      expect(first.result.success).toBe(true);
      const second = await execute({ prompt: 'Which word was it? [[recall]]', sessionId: first.result.sessionId });
      expect(second.result.errorMessage).toBeUndefined();
      expect(second.result.output).toBe('You asked me to remember PINEAPPLE.');
      expect(second.result.sessionId).toBe(first.result.sessionId);
    });

    it("fails as a backend error, with the provider's status, when the API answers an error", async () => {
      const { result } = await execute({ prompt: 'This one is refused [[reject]]' });
      expect(result).toMatchObject({ success: false, errorKind: 'backend' });
      expect(result.errorMessage).toMatch(/APIError|400/);
    });

    it('stops at the reservation once the usage reported so far costs it', async () => {
      // The first step alone carries thousands of input tokens: at $3 per million, more than 1,000 micro-USD.
      const { result } = await execute({ prompt: 'Greet me through the shell [[tool]]', maxBudgetMicroUsd: 1_000 });
      expect(result).toMatchObject({ success: false, errorKind: 'budget' });
      expect(result.errorMessage).toMatch(/budget of 1000 micro-USD/);
    });

    describe('a bring-your-own key in request.environment', () => {
      let byoFake: AnthropicFakeServer;
      let byoHome: { root: string; environment: Record<string, string> };
      const byoKey = 'sk-ant-byo-opencode-5f4e3d2c1b0a9988';
      let run: { result: AgentResult; events: AgentEvent[] };

      beforeAll(async () => {
        // This server accepts only the task's own key; the config reads the key from the variable the BYO key arrives in.
        byoFake = await startAnthropicFakeServer({
          apiKey: byoKey,
          respond: (request) => (request.hasTools ? { text: `Echoing what I was given: ${request.apiKey}` } : { text: 'A title' }),
        });
        byoHome = await opencodeHome(byoFake.baseURL, '{env:FAKE_PROVIDER_KEY}');
        const keyless = new OpencodeAgent({
          type: 'opencode',
          binaryPath,
          environment: byoHome.environment,
          model,
          byoKeyVariable: 'FAKE_PROVIDER_KEY',
          limits: { ...opencodeLimits },
          prices,
        });
        expect(keyless.byoKeyVariable).toBe('FAKE_PROVIDER_KEY');
        run = await execute({ prompt: 'Hello', environment: { FAKE_PROVIDER_KEY: byoKey } }, keyless);
      });
      afterAll(async () => {
        await byoFake?.close();
        await rm(byoHome.root, { recursive: true, force: true });
      });

      it('reaches the backend', () => {
        expect(run.result.errorMessage).toBeUndefined();
        expect(run.result.success).toBe(true);
        expect(byoFake.requests.length).toBeGreaterThan(0);
        expect(byoFake.requests.every((request) => request.apiKey === byoKey)).toBe(true);
      });

      it('never appears in output, events, errors or the execution log', () => {
        expect(JSON.stringify(run)).not.toContain(byoKey);
        expect(run.result.output).toBe('Echoing what I was given: [redacted]');
      });
    });

    describe('an already running server (ACTOR_OPENCODE_URL)', () => {
      let shared: StartedOpencodeServer;
      let sharedAgent: OpencodeAgent;

      beforeAll(async () => {
        const launched = await startOpencodeServer({
          binaryPath,
          cwd: workingDirectory,
          environment: { PATH: process.env.PATH ?? '', ...ownHome.environment },
          signal: new AbortController().signal,
        });
        if ('failure' in launched) throw new Error(`could not start opencode serve: ${JSON.stringify(launched)}`);
        shared = launched.server;
        sharedAgent = new OpencodeAgent({ type: 'opencode', server: shared.endpoint, model, limits: { ...opencodeLimits }, prices });
      });
      afterAll(async () => {
        shared?.group.stop();
        await shared?.group.closed;
      });

      it('answers through it, reports it healthy, and takes no bring-your-own key', async () => {
        expect(sharedAgent.byoKeyVariable).toBeUndefined();
        const { result } = await execute({ prompt: 'What is the capital of France?' }, sharedAgent);
        expect(result.errorMessage).toBeUndefined();
        expect(result.output).toBe('The capital of France is Paris.');
        const health = await sharedAgent.healthCheck();
        expect(health).toEqual([{ name: 'server', status: 'ok', message: expect.stringMatching(/healthy, opencode \d+\.\d+/) }]);
      });

      it('aborts the session on cancel without killing the server, which then answers the next run', async () => {
        const controller = new AbortController();
        let fired = () => {};
        const firstOutput = new Promise<void>((resolve) => (fired = resolve));
        const running = sharedAgent.execute({ executionId: 'exe_shared_cancel', workingDirectory, prompt: 'Count slowly [[slow]]' }, controller.signal, (event) => {
          if (event.kind === 'output') fired();
        });
        await firstOutput;
        controller.abort();
        const result = await running;
        expect(result).toMatchObject({ success: false, errorKind: 'cancelled' });
        const { result: next } = await execute({ prompt: 'What is the capital of France?' }, sharedAgent);
        expect(next.output).toBe('The capital of France is Paris.');
      });

      it('refuses a request that brings its own key, which a shared server cannot take', async () => {
        const { result } = await execute({ prompt: 'Hello', environment: { ANTHROPIC_API_KEY: 'sk-ant-someone-elses-key-1234' } }, sharedAgent);
        expect(result).toMatchObject({ success: false, errorKind: 'unavailable' });
        expect(result.errorMessage).toMatch(/shared server/);
        expect(JSON.stringify(result)).not.toContain('sk-ant-someone-elses-key-1234');
      });
    });
  });
}

describe('discoverOpencodeAdapter', () => {
  it('declares opencode when ACTOR_OPENCODE_BIN names an executable, passing opencode and provider settings on', () => {
    const discovery = discoverOpencodeAdapter({
      ACTOR_OPENCODE_BIN: process.execPath,
      ACTOR_OPENCODE_MODEL: 'openai/gpt-5',
      OPENCODE_DISABLE_MODELS_FETCH: '1',
      OPENCODE_SERVER_PASSWORD: 'not-passed',
      DATABASE_URL: 'postgres://not-passed',
    });
    expect(discovery.definition?.declaration).toMatchObject({ type: 'opencode', modelFamily: 'openai', acceptsByoKey: true });
    expect(discovery.definition?.declaration.readyReason).toMatch(/each run starts its own server, model openai\/gpt-5/);
    const agent = discovery.definition!.create() as OpencodeAgent;
    expect(agent.type).toBe('opencode');
    expect(agent.byoKeyVariable).toBe('ANTHROPIC_API_KEY');
  });

  it('uses a running server from ACTOR_OPENCODE_URL without needing a binary', () => {
    const discovery = discoverOpencodeAdapter({ PATH: '/nonexistent', ACTOR_OPENCODE_URL: 'http://127.0.0.1:4096/', ACTOR_OPENCODE_SERVER_PASSWORD: 'secret' });
    expect(discovery.definition?.declaration).toMatchObject({ acceptsByoKey: false, readyReason: 'opencode server at http://127.0.0.1:4096 (basic auth)' });
    expect(discovery.definition?.create().supportsMcp).toBe(false);
  });

  it('says why it is not ready', () => {
    expect(discoverOpencodeAdapter({ PATH: '/nonexistent' }).reason).toMatch(/no `opencode` executable on PATH and no ACTOR_OPENCODE_URL/);
    expect(discoverOpencodeAdapter({ ACTOR_OPENCODE_BIN: '/nonexistent/opencode' }).reason).toMatch(/ACTOR_OPENCODE_BIN=\/nonexistent\/opencode is not an executable/);
    expect(discoverOpencodeAdapter({ ACTOR_OPENCODE_URL: 'ftp://x', PATH: '/nonexistent' }).reason).toMatch(/invalid settings: ACTOR_OPENCODE_URL/);
    expect(discoverOpencodeAdapter({ ACTOR_OPENCODE_BIN: process.execPath, ACTOR_OPENCODE_MODEL: 'no-slash' }).reason).toMatch(/provider\/model/);
  });
});
