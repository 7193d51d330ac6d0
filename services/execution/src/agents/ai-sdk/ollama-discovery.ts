import { z } from 'zod';
import { TrustClass } from '@actor/proto/registry';
import { bootstrapReviewer, type AdapterDefinition } from '../agent.js';
import { AiSdkAgent } from './ai-sdk-agent.js';
import { invalidSettingsReason, presentSettings } from '../adapter-settings.js';

/** The provider name in the adapter types (`ai-sdk:ollama/<model>`). */
export const ollamaProvider = 'ollama';

/** The key sent to Ollama, which ignores it. */
export const ollamaPlaceholderKey = 'no-key-needed-for-ollama';

/** Where Ollama listens when nothing else is said. */
export const defaultOllamaUrl = 'http://127.0.0.1:11434';

/**
 * The settings of Ollama discovery, from env.
 * - `ACTOR_OLLAMA_URL`: Ollama's base URL (without `/v1`), default `http://127.0.0.1:11434`; `off`
 *   skips the probe. At start-up `GET <url>/api/tags` lists the pulled models; each becomes an adapter
 *   `ai-sdk:ollama/<model>` served through Ollama's OpenAI-compatible API at `<url>/v1`.
 * - `ACTOR_OLLAMA_TIMEOUT_MS`: how long the probe waits for an answer, default 1500: a machine
 *   without Ollama must not slow the start-up down.
 * - `ACTOR_OLLAMA_QUALITY_TIER`: the quality tier (1..5) declared for every Ollama model, default 2.
 */
const ollamaSettingsSchema = z.object({
  ACTOR_OLLAMA_URL: z.union([
    z.literal('off'),
    z.url({ protocol: /^https?$/, error: 'must be an http(s) URL such as http://127.0.0.1:11434, or off' }),
  ]).default(defaultOllamaUrl),
  ACTOR_OLLAMA_TIMEOUT_MS: z.coerce.number().int().positive().default(1_500),
  ACTOR_OLLAMA_QUALITY_TIER: z.coerce.number().int().min(1).max(5).default(2),
});

/** `GET /api/tags` as Ollama answers it (https://github.com/ollama/ollama/blob/main/docs/api.md#list-local-models). */
const tagsSchema = z.object({
  models: z
    .array(
      z
        .object({
          name: z.string().min(1),
          model: z.string().optional(),
          details: z.object({ family: z.string().optional(), parameter_size: z.string().optional() }).loose().nullish(),
        })
        .loose(),
    )
    .nullish(),
});

/**
 * Declared limits of an Ollama model. The OpenAI-compatible endpoint cannot set the context size, so
 * the model runs with the server's default context (4096 tokens in current releases, unless the
 * operator raised `OLLAMA_CONTEXT_LENGTH`); longer prompts would be cut silently, so placement must
 * see the small figure. Local models are slow: a long time limit.
 */
export const ollamaLimits = {
  contextTokens: 4_096,
  maxOutputTokens: 2_048,
  concurrency: 1,
  timeoutMs: 300_000,
  egress: false,
};

export interface OllamaDiscovery {
  /** One adapter per model Ollama lists. */
  definitions: AdapterDefinition[];
  /** Why no Ollama adapter is offered, when none is. */
  reason?: string;
}

/**
 * Asks the Ollama at `ACTOR_OLLAMA_URL` (default localhost) which models it has. Never throws: a
 * server that does not answer in time, answers an error or lists nothing gives a reason instead.
 * Reads only the env object it is given.
 */
export async function discoverOllamaAdapters(env: Record<string, string | undefined>): Promise<OllamaDiscovery> {
  const present = presentSettings(env);
  const parsed = ollamaSettingsSchema.safeParse(present);
  if (!parsed.success) {
    return { definitions: [], reason: invalidSettingsReason(parsed.error) };
  }
  const settings = parsed.data;
  if (settings.ACTOR_OLLAMA_URL === 'off') return { definitions: [], reason: 'Ollama discovery is off (ACTOR_OLLAMA_URL=off)' };
  const url = settings.ACTOR_OLLAMA_URL.replace(/\/+$/, '');
  const tagsUrl = `${url}/api/tags`;
  let body: unknown;
  try {
    const response = await fetch(tagsUrl, { signal: AbortSignal.timeout(settings.ACTOR_OLLAMA_TIMEOUT_MS) });
    if (!response.ok) return { definitions: [], reason: `no Ollama at ${url}: GET /api/tags answered HTTP ${response.status}` };
    body = await response.json();
  } catch (error) {
    return { definitions: [], reason: `no Ollama answering at ${url} (${probeFailure(error, settings.ACTOR_OLLAMA_TIMEOUT_MS)}); start it with \`ollama serve\` or set ACTOR_OLLAMA_URL` };
  }
  const tags = tagsSchema.safeParse(body);
  if (!tags.success) return { definitions: [], reason: `${url}/api/tags did not answer in Ollama's format` };
  const models = [...new Set((tags.data.models ?? []).map((model) => model.name))];
  if (models.length === 0) return { definitions: [], reason: `Ollama at ${url} has no models: pull one with \`ollama pull <model>\`` };

  const families = new Map((tags.data.models ?? []).map((model) => [model.name, model.details?.family]));
  const sizes = new Map((tags.data.models ?? []).map((model) => [model.name, model.details?.parameter_size]));
  const definitions = models.map((model): AdapterDefinition => {
    const type = `ai-sdk:${ollamaProvider}/${model}`;
    // A judge must come from another family; Ollama names the architecture (`llama`, `qwen2`), the best hint it gives.
    const family = families.get(model) || model.split(':')[0] || model;
    const size = sizes.get(model);
    return {
      declaration: {
        type,
        displayName: `${model} (Ollama${size ? `, ${size}` : ''})`,
        modelFamily: family,
        capabilities: ['general', 'code', 'research', 'action', 'structured-output'],
        limits: { ...ollamaLimits },
        // The operator's own server: nothing leaves their infrastructure.
        trustClass: TrustClass.TRUST_CLASS_FIRST_PARTY,
        qualityTier: settings.ACTOR_OLLAMA_QUALITY_TIER,
        acceptsByoKey: false,
        requiresByoKey: false,
        demo: false,
        ready: true,
        readyReason: `Ollama at ${url} lists ${model}`,
      },
      rateCard: {
        inputMicroUsdPerMtok: 0,
        outputMicroUsdPerMtok: 0,
        microUsdPerSecond: 0,
        microUsdPerTask: 0,
        source: 'local Ollama model: no per-token price (runs on the operator\'s own hardware)',
        reviewer: bootstrapReviewer,
      },
      create: () =>
        new AiSdkAgent({
          type,
          baseURL: `${url}/v1`,
          // Ollama ignores the key, but the SDK and the health check want one. Not `ollama`: the agent
          // redacts its key from every message, and that word is in the adapter's own type.
          apiKey: ollamaPlaceholderKey,
          model,
          providerName: ollamaProvider,
          limits: { ...ollamaLimits },
        }),
    };
  });
  return { definitions };
}

function probeFailure(error: unknown, timeoutMs: number): string {
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) return `no answer within ${timeoutMs} ms`;
  if (error instanceof SyntaxError) return 'the answer is not JSON';
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
}
