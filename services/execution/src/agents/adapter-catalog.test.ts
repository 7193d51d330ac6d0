import { describe, expect, it } from 'vitest';
import { createAgentFor, discoverAdapters } from './adapter-catalog.js';

describe('discoverAdapters', () => {
  it('always offers the demo backends and script, and says why the OpenAI-compatible and claude-code adapters are not ready', () => {
    const catalog = discoverAdapters({});
    expect(catalog.definitions.map((definition) => definition.declaration.type)).toEqual([
      'demo:alpha-mini',
      'demo:alpha-pro',
      'demo:beta-small',
      'demo:beta-large',
      'script',
    ]);
    expect(catalog.notReady).toEqual([
      { type: 'ai-sdk:openai-compatible/*', reason: expect.stringMatching(/set ACTOR_OPENAI_BASE_URL and ACTOR_OPENAI_API_KEY/) },
      { type: 'ai-sdk:openai/*', reason: 'set OPENAI_API_KEY to use the OpenAI API' },
      { type: 'ai-sdk:anthropic/*', reason: 'set ANTHROPIC_API_KEY to use the Anthropic API' },
      { type: 'claude-code', reason: expect.stringMatching(/no `claude` executable on PATH/) },
      { type: 'opencode', reason: expect.stringMatching(/no `opencode` executable on PATH and no ACTOR_OPENCODE_URL/) },
      { type: 'copilot', reason: expect.stringMatching(/no `copilot` executable on PATH/) },
    ]);
    expect(catalog.definitions.find((definition) => definition.declaration.type === 'script')?.defaultSlot).toBe(false);
  });

  it('declares claude-code when its binary is found', () => {
    const catalog = discoverAdapters({ ACTOR_CLAUDE_CODE_BIN: process.execPath });
    expect(catalog.notReady.map((adapter) => adapter.type)).toEqual(['ai-sdk:openai-compatible/*', 'ai-sdk:openai/*', 'ai-sdk:anthropic/*', 'opencode', 'copilot']);
    expect(catalog.createAgentFor('claude-code')?.type).toBe('claude-code');
  });

  it('declares copilot when its binary and a GitHub token are found', () => {
    const catalog = discoverAdapters({ ACTOR_COPILOT_BIN: process.execPath, GH_TOKEN: 'ghp_catalog0123456789' });
    expect(catalog.notReady.map((adapter) => adapter.type)).toEqual(['ai-sdk:openai-compatible/*', 'ai-sdk:openai/*', 'ai-sdk:anthropic/*', 'claude-code', 'opencode']);
    expect(catalog.createAgentFor('copilot')?.type).toBe('copilot');
    expect(discoverAdapters({ ACTOR_COPILOT_BIN: process.execPath }).notReady).toContainEqual({ type: 'copilot', reason: expect.stringMatching(/no GitHub token/) });
  });

  it('adds the OpenAI-compatible adapter when its base URL and key are set', () => {
    const catalog = discoverAdapters({ ACTOR_OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1', ACTOR_OPENAI_API_KEY: 'ollama', ACTOR_OPENAI_MODEL: 'qwen2.5' });
    expect(catalog.notReady.map((adapter) => adapter.type)).toEqual(['ai-sdk:openai/*', 'ai-sdk:anthropic/*', 'claude-code', 'opencode', 'copilot']);
    expect(catalog.definitions.at(-1)?.declaration.type).toBe('ai-sdk:openai-compatible/qwen2.5');
    expect(catalog.createAgentFor('ai-sdk:openai-compatible/qwen2.5')?.type).toBe('ai-sdk:openai-compatible/qwen2.5');
  });

  it('adds the OpenAI and Anthropic adapters when their keys are set, next to the OpenAI-compatible one', () => {
    const catalog = discoverAdapters({ OPENAI_API_KEY: 'sk-catalog', ANTHROPIC_API_KEY: 'sk-ant-catalog', ACTOR_ANTHROPIC_MODEL: 'claude-sonnet-4-5' });
    expect(catalog.notReady.map((adapter) => adapter.type)).toEqual(['ai-sdk:openai-compatible/*', 'claude-code', 'opencode', 'copilot']);
    expect(catalog.definitions.slice(-2).map((definition) => definition.declaration.type)).toEqual(['ai-sdk:openai/gpt-4o-mini', 'ai-sdk:anthropic/claude-sonnet-4-5']);
    expect(catalog.createAgentFor('ai-sdk:anthropic/claude-sonnet-4-5')?.byoKeyVariable).toBe('ANTHROPIC_API_KEY');
    expect(catalog.createAgentFor('ai-sdk:openai/gpt-4o-mini')?.byoKeyVariable).toBe('OPENAI_API_KEY');
    expect(JSON.stringify(catalog.definitions.map((definition) => definition.declaration))).not.toMatch(/sk-catalog|sk-ant-catalog/);
  });

  it('creates agents for discovered types only', async () => {
    const catalog = discoverAdapters({});
    const agent = catalog.createAgentFor('demo:beta-small');
    expect(agent?.type).toBe('demo:beta-small');
    const result = await agent!.execute({ executionId: 'exe_catalog', prompt: 'Hi', configuration: { latency_ms: 0 } }, new AbortController().signal, () => {});
    expect(result.success).toBe(true);
    expect(catalog.createAgentFor('demo:unknown')).toBeUndefined();
    expect(catalog.createAgentFor('ai-sdk:openai-compatible/gpt-4o-mini')).toBeUndefined();
  });

  it('lets the process-wide createAgentFor reach demo types always and discovered types after discovery', () => {
    expect(createAgentFor('demo:alpha-pro')?.type).toBe('demo:alpha-pro');
    expect(createAgentFor('script')?.type).toBe('script');
    expect(createAgentFor('ai-sdk:openai-compatible/catalog-test-model')).toBeUndefined();
    discoverAdapters({ ACTOR_OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1', ACTOR_OPENAI_API_KEY: 'k', ACTOR_OPENAI_MODEL: 'catalog-test-model' });
    expect(createAgentFor('ai-sdk:openai-compatible/catalog-test-model')?.type).toBe('ai-sdk:openai-compatible/catalog-test-model');
  });
});
