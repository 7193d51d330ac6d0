import type { Agent, AdapterDefinition } from './agent.js';
import { discoverAiSdkAdapter, openAiCompatibleProvider } from './ai-sdk/ai-sdk-discovery.js';
import { claudeCodeAdapterType, discoverClaudeCodeAdapter } from './claude-code/claude-code-discovery.js';
import { copilotAdapterType, discoverCopilotAdapter } from './copilot/copilot-discovery.js';
import { anthropicProvider, discoverAnthropicAdapter, discoverOpenAiAdapter, openAiProvider } from './ai-sdk/hosted-provider-discovery.js';
import { discoverOllamaAdapters, ollamaProvider } from './ai-sdk/ollama-discovery.js';
import { demoAdapterDefinitions } from './demo/demo-catalog.js';
import { discoverOpencodeAdapter, opencodeAdapterType } from './opencode/opencode-discovery.js';
import { scriptAdapterDefinition } from './script/script-catalog.js';

/** An adapter family that was looked for and is not usable, and why. */
export interface NotReadyAdapter {
  /** The adapter type, or its family pattern when the exact type is unknown (`ai-sdk:openai-compatible/*`). */
  type: string;
  reason: string;
}

/** What start-up discovery found. */
export interface AdapterCatalog {
  /** The adapters ready to declare and run, demo backends first. */
  definitions: AdapterDefinition[];
  /** The adapters looked for and not configured, for `GET /v1/adapters` and health checks. */
  notReady: NotReadyAdapter[];
  /** A new Agent for a type this discovery found, or undefined for any other type. */
  createAgentFor(type: string): Agent | undefined;
}

/** The adapters that need nothing installed: the demo backends, then `script`. */
function builtInDefinitions(): AdapterDefinition[] {
  return [...demoAdapterDefinitions(), scriptAdapterDefinition()];
}

/**
 * Every adapter type this process can run: the built-in ones, plus whatever `discoverAdapters` found.
 * Process-wide, so that a caller holding only `createAgentFor` reaches what discovery registered.
 */
const runnable = new Map<string, AdapterDefinition>(
  builtInDefinitions().map((definition) => [definition.declaration.type, definition]),
);

/**
 * A new Agent for an adapter type this process can run (a demo backend, or a type a
 * `discoverAdapters` call found), or undefined for any other type.
 */
export function createAgentFor(type: string): Agent | undefined {
  return runnable.get(type)?.create();
}

/**
 * Finds the adapters whose prerequisites are present: the built-in demo backends and `script` always,
 * the OpenAI-compatible one when its env is set, `ai-sdk:openai/<model>` when `OPENAI_API_KEY` is,
 * `ai-sdk:anthropic/<model>` when `ANTHROPIC_API_KEY` is, `claude-code` when its binary is found (on `PATH`
 * or at `ACTOR_CLAUDE_CODE_BIN`), `copilot` when its binary (`ACTOR_COPILOT_BIN` or `PATH`) and a GitHub
 * token or custom provider are. Reads only the env object it is given.
 */
export function discoverAdapters(env: Record<string, string | undefined>): AdapterCatalog {
  const definitions = builtInDefinitions();
  const notReady: NotReadyAdapter[] = [];
  const aiSdk = discoverAiSdkAdapter(env);
  if (aiSdk.definition) definitions.push(aiSdk.definition);
  else notReady.push({ type: `ai-sdk:${openAiCompatibleProvider}/*`, reason: aiSdk.reason });
  const openAi = discoverOpenAiAdapter(env);
  if (openAi.definition) definitions.push(openAi.definition);
  else notReady.push({ type: `ai-sdk:${openAiProvider}/*`, reason: openAi.reason });
  const anthropic = discoverAnthropicAdapter(env);
  if (anthropic.definition) definitions.push(anthropic.definition);
  else notReady.push({ type: `ai-sdk:${anthropicProvider}/*`, reason: anthropic.reason });
  const claudeCode = discoverClaudeCodeAdapter(env);
  if (claudeCode.definition) definitions.push(claudeCode.definition);
  else notReady.push({ type: claudeCodeAdapterType, reason: claudeCode.reason });
  const opencode = discoverOpencodeAdapter(env);
  if (opencode.definition) definitions.push(opencode.definition);
  else notReady.push({ type: opencodeAdapterType, reason: opencode.reason });
  const copilot = discoverCopilotAdapter(env);
  if (copilot.definition) definitions.push(copilot.definition);
  else notReady.push({ type: copilotAdapterType, reason: copilot.reason });

  const byType = new Map(definitions.map((definition) => [definition.declaration.type, definition]));
  for (const [type, definition] of byType) runnable.set(type, definition);
  return {
    definitions,
    notReady,
    createAgentFor: (type) => byType.get(type)?.create(),
  };
}

/**
 * `discoverAdapters`, plus the adapters found by asking local servers: the models of an Ollama
 * answering at `ACTOR_OLLAMA_URL` (default localhost), as `ai-sdk:ollama/<model>`. Takes at most
 * `ACTOR_OLLAMA_TIMEOUT_MS` longer; an Ollama that does not answer is listed in `notReady`.
 */
export async function discoverAllAdapters(env: Record<string, string | undefined>): Promise<AdapterCatalog> {
  const catalog = discoverAdapters(env);
  const ollama = await discoverOllamaAdapters(env);
  const definitions = [...catalog.definitions, ...ollama.definitions];
  const notReady = ollama.reason === undefined ? catalog.notReady : [...catalog.notReady, { type: `ai-sdk:${ollamaProvider}/*`, reason: ollama.reason }];
  const byType = new Map(definitions.map((definition) => [definition.declaration.type, definition]));
  for (const definition of ollama.definitions) runnable.set(definition.declaration.type, definition);
  return { definitions, notReady, createAgentFor: (type) => byType.get(type)?.create() };
}
