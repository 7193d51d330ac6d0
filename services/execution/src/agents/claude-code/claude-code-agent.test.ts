import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  startAnthropicFakeServer,
  type AnthropicFakeReply,
  type AnthropicFakeRequest,
  type AnthropicFakeServer,
} from '../../../../../test/fakes/anthropic-fake-server.js';
import type { AgentEvent, AgentRequest, AgentResult } from '../agent.js';
import { runAgentConformance } from '../conformance.js';
import { ClaudeCodeAgent } from './claude-code-agent.js';
import { claudeCodeLimits, discoverClaudeCodeAdapter } from './claude-code-discovery.js';

/**
 * These tests run the real `claude` CLI (installed by .ci/run outside the workspace, or named by
 * CLAUDE_CODE_BIN) against a fake Anthropic Messages server on loopback.
 */
const installedBinary = resolve(import.meta.dirname, '../../../../../.tools/claude-code/node_modules/.bin/claude');
const binaryPath = process.env.CLAUDE_CODE_BIN ?? installedBinary;
const binaryFound = existsSync(binaryPath);

const apiKey = 'sk-ant-fake-0123456789abcdef';
const prices = { inputMicroUsdPerMtok: 3_000_000, outputMicroUsdPerMtok: 15_000_000, microUsdPerSecond: 0, microUsdPerTask: 0 };

/** Replies chosen from the whole conversation; markers in the prompts say what each test wants. */
function respond(request: AnthropicFakeRequest): AnthropicFakeReply {
  // The CLI's short side calls carry no tools: answer them at once.
  if (!request.hasTools) return { text: 'side' };
  const conversation = request.texts.join('\n');
  const toolNames = (request.body.tools as Array<{ name?: string }>).map((tool) => tool.name);
  if (toolNames.includes('StructuredOutput') && request.toolResults.length === 0) {
    return { toolUse: { name: 'StructuredOutput', input: { title: 'Quarterly report', priority: 2 } } };
  }
  if (conversation.includes('[[reject]]')) return { status: 400 };
  if (conversation.includes('[[slow]]')) return { chunks: Array.from({ length: 100 }, () => 'word '), delayMs: 100 };
  if (conversation.includes('[[tool]]')) {
    if (request.toolResults.length === 0) return { toolUse: { name: 'Bash', input: { command: 'echo tool-says-hi', description: 'Print a greeting' } } };
    return { text: `The tool said: ${request.toolResults.join(' ').trim()}` };
  }
  if (conversation.includes('[[recall]]')) {
    const remembered = /remember the word (\w+)/i.exec(conversation)?.[1] ?? 'nothing';
    return { text: `You asked me to remember ${remembered}.` };
  }
  return { text: 'The capital of France is Paris.' };
}

if (!binaryFound) {
  describe('claude-code against the real CLI', () => {
    it.runIf(process.env.CI === 'true')('finds the claude binary (CI installs it in .ci/run)', () => {
      throw new Error(`no claude binary at ${binaryPath}: run npm install --prefix .tools/claude-code @anthropic-ai/claude-code@2.1.197, or set CLAUDE_CODE_BIN`);
    });
    it.skipIf(process.env.CI === 'true')(`skipped: no claude binary at ${binaryPath} (set CLAUDE_CODE_BIN or install it into .tools/claude-code)`, () => {});
  });
} else {
  let configDirectory: string;
  const agentFor = (fake: AnthropicFakeServer, overrides: Partial<ConstructorParameters<typeof ClaudeCodeAgent>[0]> = {}) =>
    new ClaudeCodeAgent({
      type: 'claude-code',
      binaryPath,
      environment: { ANTHROPIC_BASE_URL: fake.baseURL, ANTHROPIC_API_KEY: apiKey, CLAUDE_CONFIG_DIR: configDirectory },
      model: 'claude-fake-model',
      limits: { ...claudeCodeLimits },
      prices,
      ...overrides,
    });

  runAgentConformance('claude-code (real CLI, fake Anthropic server)', async () => {
    configDirectory = await mkdtemp(join(tmpdir(), 'actor-claude-config-'));
    const fake = await startAnthropicFakeServer({ apiKey, respond });
    return {
      agent: agentFor(fake),
      rateCard: { ...prices, source: 'test', reviewer: 'test' },
      request: (executionId) => ({ executionId, prompt: 'What is the capital of France?' }),
      slowRequest: (executionId) => ({ executionId, prompt: 'Count slowly [[slow]]' }),
      structured: {
        request: (executionId) => ({ executionId, prompt: 'Extract the title and priority.' }),
        jsonSchema: { type: 'object', properties: { title: { type: 'string' }, priority: { type: 'integer' } }, required: ['title', 'priority'] },
      },
      broken: {
        agent: agentFor(fake, { binaryPath: '/nonexistent/claude' }),
        request: { executionId: 'exe_missing_cli', prompt: 'Hello?' },
        errorMatches: /cannot start \/nonexistent\/claude: ENOENT/,
      },
      close: () => fake.close(),
    };
  });

  describe('ClaudeCodeAgent with the real CLI', () => {
    let fake: AnthropicFakeServer;
    let agent: ClaudeCodeAgent;
    let workingDirectory: string;

    beforeAll(async () => {
      configDirectory ??= await mkdtemp(join(tmpdir(), 'actor-claude-config-'));
      workingDirectory = await mkdtemp(join(tmpdir(), 'actor-claude-work-'));
      fake = await startAnthropicFakeServer({ apiKey, respond });
      agent = agentFor(fake);
    });
    afterAll(async () => {
      await fake?.close();
      await rm(workingDirectory, { recursive: true, force: true });
      await rm(configDirectory, { recursive: true, force: true });
    });

    async function execute(request: Omit<AgentRequest, 'executionId'>, on = agent): Promise<{ result: AgentResult; events: AgentEvent[] }> {
      const events: AgentEvent[] = [];
      const result = await on.execute({ executionId: `exe_claude_${Math.random()}`, workingDirectory, ...request }, new AbortController().signal, (event) => events.push(event));
      return { result, events };
    }

    it('answers a plain prompt with the session, turns, usage and the cost the CLI reports', async () => {
      const { result } = await execute({ prompt: 'What is the capital of France?', systemPrompt: 'Answer in one sentence.' });
      expect(result.errorMessage).toBeUndefined();
      expect(result).toMatchObject({ success: true, output: 'The capital of France is Paris.' });
      expect(result.sessionId).toMatch(/^[0-9a-f-]{36}$/);
      expect(result.reportedCostMicroUsd).toBeGreaterThan(0);
      expect(result.inputTokens).toBeGreaterThan(0);
      expect(result.outputTokens).toBeGreaterThan(0);
      expect(result.executionLog.join('\n')).toMatch(/1 turn\(s\)/);
      const main = fake.requests.filter((request) => request.hasTools).at(-1)!;
      expect(main.body.model).toBe('claude-fake-model');
      expect(JSON.stringify(main.body.system)).toContain('Answer in one sentence.');
      expect(main.texts.join('\n')).toContain('What is the capital of France?');
    });

    it('runs a tool round trip with --allowedTools', async () => {
      const { result, events } = await execute({ prompt: 'Greet me through the shell [[tool]]', allowedTools: ['Bash(echo *)'], maxSteps: 5 });
      expect(result.errorMessage).toBeUndefined();
      expect(result).toMatchObject({ success: true, output: 'The tool said: tool-says-hi' });
      expect(events).toContainEqual({ kind: 'log', message: expect.stringMatching(/tool Bash called with .*echo tool-says-hi/) });
      expect(fake.requests.some((request) => request.toolResults.some((text) => text.includes('tool-says-hi')))).toBe(true);
    });

    it('does not run a tool that is not allowed', async () => {
      const before = fake.requests.length;
      const { result } = await execute({ prompt: 'Greet me through the shell [[tool]]', disallowedTools: ['Bash'], maxSteps: 5 });
      expect(result.success).toBe(true);
      const sent = fake.requests.slice(before).flatMap((request) => request.toolResults);
      expect(sent.join('\n')).not.toContain('tool-says-hi');
    });

    it('resumes a session by id: the second run sees the first one\'s conversation', async () => {
      const first = await execute({ prompt: 'Please remember the word PINEAPPLE.' });
      expect(first.result.success).toBe(true);
      const second = await execute({ prompt: 'Which word was it? [[recall]]', sessionId: first.result.sessionId });
      expect(second.result.errorMessage).toBeUndefined();
      expect(second.result.output).toBe('You asked me to remember PINEAPPLE.');
      expect(second.result.sessionId).toBe(first.result.sessionId);
    });

    it('stops at the reservation when the streamed usage already costs it, before the next turn', async () => {
      const before = fake.requests.length;
      // The CLI's first main call carries ~20k input tokens: at $3 per million, more than 1,000 micro-USD.
      const { result } = await execute({ prompt: 'Greet me through the shell [[tool]]', allowedTools: ['Bash(echo *)'], maxBudgetMicroUsd: 1_000 });
      expect(result).toMatchObject({ success: false, errorKind: 'budget' });
      expect(result.errorMessage).toMatch(/budget of 1000 micro-USD/);
      expect(fake.requests.slice(before).some((request) => request.toolResults.length > 0)).toBe(false);
    });

    it('stops when the CLI itself reports the budget reached (--max-budget-usd)', async () => {
      // Zero prices: only the CLI's own running cost can stop this run, after its first turn.
      const unpriced = agentFor(fake, { prices: { ...prices, inputMicroUsdPerMtok: 0, outputMicroUsdPerMtok: 0 } });
      const { result } = await execute({ prompt: 'Greet me through the shell [[tool]]', allowedTools: ['Bash(echo *)'], maxBudgetMicroUsd: 1_000 }, unpriced);
      expect(result).toMatchObject({ success: false, errorKind: 'budget' });
      expect(result.errorMessage).toMatch(/CLI stopped the run at its budget/);
      expect(result.reportedCostMicroUsd).toBeGreaterThan(1_000);
    });

    it('passes a generated MCP config file and removes it when the run ends', async () => {
      const before = new Set(await readdir(tmpdir()));
      const { result } = await execute({
        prompt: 'What is the capital of France?',
        mcpConfig: { mcpServers: { 'actor-probe': { command: process.execPath, args: ['-e', 'process.exit(0)'] } } },
      });
      expect(result.success).toBe(true);
      expect(result.executionLog.join('\n')).toMatch(/MCP servers: actor-probe/);
      const left = (await readdir(tmpdir())).filter((name) => name.startsWith('actor-mcp-') && !before.has(name));
      expect(left).toEqual([]);
    });

    it('fails as a backend error, with the CLI\'s reason, when the API answers an error', async () => {
      const { result } = await execute({ prompt: 'This one is refused [[reject]]', timeoutMs: 45_000 });
      expect(result).toMatchObject({ success: false, errorKind: 'backend' });
      expect(result.errorMessage).toMatch(/400/);
    });

    describe('a bring-your-own key in request.environment', () => {
      let byoFake: AnthropicFakeServer;
      const byoKey = 'sk-ant-byo-5f4e3d2c1b0a99887766';
      let run: { result: AgentResult; events: AgentEvent[] };

      beforeAll(async () => {
        // This server accepts only the task's own key, and the agent has none configured.
        byoFake = await startAnthropicFakeServer({
          apiKey: byoKey,
          respond: (request) => (request.hasTools ? { text: `Echoing what I was given: ${request.apiKey}` } : { text: 'side' }),
        });
        const keyless = agentFor(byoFake, { environment: { ANTHROPIC_BASE_URL: byoFake.baseURL, CLAUDE_CONFIG_DIR: configDirectory } });
        run = await execute({ prompt: 'Hello', environment: { ANTHROPIC_API_KEY: byoKey } }, keyless);
      });
      afterAll(async () => {
        await byoFake?.close();
      });

      it('reaches the backend', () => {
        expect(run.result.errorMessage).toBeUndefined();
        expect(run.result.success).toBe(true);
        expect(byoFake.requests.filter((request) => request.hasTools).every((request) => request.apiKey === byoKey)).toBe(true);
      });

      it('never appears in output, events, errors or the execution log', () => {
        expect(JSON.stringify(run)).not.toContain(byoKey);
        expect(run.result.output).toBe('Echoing what I was given: [redacted]');
      });
    });
  });
}

describe('discoverClaudeCodeAdapter', () => {
  it('declares claude-code when ACTOR_CLAUDE_CODE_BIN names an executable', () => {
    const discovery = discoverClaudeCodeAdapter({ ACTOR_CLAUDE_CODE_BIN: process.execPath, ANTHROPIC_API_KEY: 'k' });
    expect(discovery.definition?.declaration).toMatchObject({ type: 'claude-code', modelFamily: 'anthropic', acceptsByoKey: true });
    expect(discovery.definition?.create().type).toBe('claude-code');
  });

  it('finds claude on PATH', () => {
    const directory = resolve(binaryPath, '..');
    const discovery = discoverClaudeCodeAdapter({ PATH: `/nonexistent:${directory}` });
    if (!binaryFound) return;
    expect(discovery.definition?.declaration.readyReason).toContain(join(directory, 'claude'));
    expect(discovery.definition?.declaration.readyReason).toMatch(/bring-your-own key/);
  });

  it('says why it is not ready without a binary', () => {
    expect(discoverClaudeCodeAdapter({ PATH: '/nonexistent' }).reason).toMatch(/no `claude` executable on PATH/);
    expect(discoverClaudeCodeAdapter({ ACTOR_CLAUDE_CODE_BIN: '/nonexistent/claude' }).reason).toMatch(/ACTOR_CLAUDE_CODE_BIN=\/nonexistent\/claude is not an executable/);
  });
});
