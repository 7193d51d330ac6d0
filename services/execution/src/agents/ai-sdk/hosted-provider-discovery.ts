import { z } from 'zod';
import { usdToMicro } from '@actor/kit';
import { TrustClass } from '@actor/proto/registry';
import { bootstrapReviewer } from '../agent.js';
import { AiSdkAgent, type AiSdkApi } from './ai-sdk-agent.js';
import type { AiSdkDiscovery } from './ai-sdk-discovery.js';
import { invalidSettingsReason, presentSettings } from '../adapter-settings.js';

/** The provider names in the adapter types (`ai-sdk:openai/<model>`, `ai-sdk:anthropic/<model>`). */
export const openAiProvider = 'openai';
export const anthropicProvider = 'anthropic';

const httpUrl = (example: string) => z.url({ protocol: /^https?$/, error: `must be an http(s) URL such as ${example}` });
const qualityTier = z.coerce.number().int().min(1).max(5).default(3);
const price = z.coerce.number().nonnegative().optional();

/**
 * The settings of the OpenAI adapter `ai-sdk:openai/<model>` (OpenAI's own API, as opposed to the
 * OpenAI-compatible adapter of `ACTOR_OPENAI_*`), from env.
 * - `OPENAI_API_KEY` (required): the key, under the name OpenAI's own tools read.
 * - `ACTOR_OPENAI_PLATFORM_BASE_URL`: the API up to `/v1`, default `https://api.openai.com/v1`
 *   (a proxy or a regional endpoint that speaks the same API).
 * - `ACTOR_OPENAI_PLATFORM_API`: `responses` (default, `POST /v1/responses`) or `chat`
 *   (`POST /v1/chat/completions`).
 * - `ACTOR_OPENAI_PLATFORM_MODEL`: the model id, default `gpt-4o-mini`.
 * - `ACTOR_OPENAI_PLATFORM_QUALITY_TIER`: 1..5, default 3.
 * - `ACTOR_OPENAI_PLATFORM_PRICE_INPUT_PER_MTOK_USD` / `..._OUTPUT_...`: USD per million tokens,
 *   default 0.15 / 0.60 (gpt-4o-mini's list prices).
 */
const openAiSettingsSchema = z.object({
  OPENAI_API_KEY: z.string().min(1),
  ACTOR_OPENAI_PLATFORM_BASE_URL: httpUrl('https://api.openai.com/v1').default('https://api.openai.com/v1'),
  ACTOR_OPENAI_PLATFORM_API: z.enum(['responses', 'chat']).default('responses'),
  ACTOR_OPENAI_PLATFORM_MODEL: z.string().trim().min(1).default('gpt-4o-mini'),
  ACTOR_OPENAI_PLATFORM_QUALITY_TIER: qualityTier,
  ACTOR_OPENAI_PLATFORM_PRICE_INPUT_PER_MTOK_USD: price,
  ACTOR_OPENAI_PLATFORM_PRICE_OUTPUT_PER_MTOK_USD: price,
});

/**
 * The settings of the Anthropic adapter `ai-sdk:anthropic/<model>`, from env.
 * - `ANTHROPIC_API_KEY` (required): the key, under the name Anthropic's own tools read.
 * - `ACTOR_ANTHROPIC_BASE_URL`: the API up to `/v1`, default `https://api.anthropic.com/v1`.
 * - `ACTOR_ANTHROPIC_MODEL`: the model id, default `claude-haiku-4-5`.
 * - `ACTOR_ANTHROPIC_QUALITY_TIER`: 1..5, default 3.
 * - `ACTOR_ANTHROPIC_PRICE_INPUT_PER_MTOK_USD` / `..._OUTPUT_...`: USD per million tokens, default
 *   1 / 5 (Claude Haiku 4.5's list prices).
 */
const anthropicSettingsSchema = z.object({
  ANTHROPIC_API_KEY: z.string().min(1),
  ACTOR_ANTHROPIC_BASE_URL: httpUrl('https://api.anthropic.com/v1').default('https://api.anthropic.com/v1'),
  ACTOR_ANTHROPIC_MODEL: z.string().trim().min(1).default('claude-haiku-4-5'),
  ACTOR_ANTHROPIC_QUALITY_TIER: qualityTier,
  ACTOR_ANTHROPIC_PRICE_INPUT_PER_MTOK_USD: price,
  ACTOR_ANTHROPIC_PRICE_OUTPUT_PER_MTOK_USD: price,
});

const openAiLimits = { contextTokens: 128_000, maxOutputTokens: 4_096, concurrency: 4, timeoutMs: 120_000, egress: false };
const anthropicLimits = { contextTokens: 200_000, maxOutputTokens: 4_096, concurrency: 4, timeoutMs: 120_000, egress: false };

/**
 * `ai-sdk:openai/<model>` over OpenAI's Responses API (or Chat Completions) when `OPENAI_API_KEY` is
 * set, else why not. Reads only the env object it is given.
 */
export function discoverOpenAiAdapter(env: Record<string, string | undefined>): AiSdkDiscovery {
  const present = presentSettings(env);
  if (present.OPENAI_API_KEY === undefined) return { reason: 'set OPENAI_API_KEY to use the OpenAI API' };
  const parsed = openAiSettingsSchema.safeParse(present);
  if (!parsed.success) return { reason: invalidSettingsReason(parsed.error) };
  const settings = parsed.data;
  const api: AiSdkApi = settings.ACTOR_OPENAI_PLATFORM_API === 'chat' ? 'openai-chat' : 'openai-responses';
  return define({
    provider: openAiProvider,
    api,
    apiLabel: settings.ACTOR_OPENAI_PLATFORM_API === 'chat' ? 'Chat Completions' : 'Responses API',
    displayVendor: 'OpenAI',
    baseURL: settings.ACTOR_OPENAI_PLATFORM_BASE_URL,
    apiKey: settings.OPENAI_API_KEY,
    model: settings.ACTOR_OPENAI_PLATFORM_MODEL,
    modelFamily: 'openai',
    qualityTier: settings.ACTOR_OPENAI_PLATFORM_QUALITY_TIER,
    limits: openAiLimits,
    prices: {
      input: settings.ACTOR_OPENAI_PLATFORM_PRICE_INPUT_PER_MTOK_USD,
      output: settings.ACTOR_OPENAI_PLATFORM_PRICE_OUTPUT_PER_MTOK_USD,
      defaults: { input: 0.15, output: 0.6, name: 'gpt-4o-mini' },
      variablePrefix: 'ACTOR_OPENAI_PLATFORM_PRICE',
    },
  });
}

/**
 * `ai-sdk:anthropic/<model>` over the Anthropic Messages API when `ANTHROPIC_API_KEY` is set, else
 * why not. Reads only the env object it is given.
 */
export function discoverAnthropicAdapter(env: Record<string, string | undefined>): AiSdkDiscovery {
  const present = presentSettings(env);
  if (present.ANTHROPIC_API_KEY === undefined) return { reason: 'set ANTHROPIC_API_KEY to use the Anthropic API' };
  const parsed = anthropicSettingsSchema.safeParse(present);
  if (!parsed.success) return { reason: invalidSettingsReason(parsed.error) };
  const settings = parsed.data;
  return define({
    provider: anthropicProvider,
    api: 'anthropic-messages',
    apiLabel: 'Messages API',
    displayVendor: 'Anthropic',
    baseURL: settings.ACTOR_ANTHROPIC_BASE_URL,
    apiKey: settings.ANTHROPIC_API_KEY,
    model: settings.ACTOR_ANTHROPIC_MODEL,
    modelFamily: 'anthropic',
    qualityTier: settings.ACTOR_ANTHROPIC_QUALITY_TIER,
    limits: anthropicLimits,
    prices: {
      input: settings.ACTOR_ANTHROPIC_PRICE_INPUT_PER_MTOK_USD,
      output: settings.ACTOR_ANTHROPIC_PRICE_OUTPUT_PER_MTOK_USD,
      defaults: { input: 1, output: 5, name: 'Claude Haiku 4.5' },
      variablePrefix: 'ACTOR_ANTHROPIC_PRICE',
    },
  });
}

interface HostedAdapterSettings {
  provider: string;
  api: AiSdkApi;
  apiLabel: string;
  displayVendor: string;
  baseURL: string;
  apiKey: string;
  model: string;
  modelFamily: string;
  qualityTier: number;
  limits: typeof openAiLimits;
  prices: {
    input: number | undefined;
    output: number | undefined;
    defaults: { input: number; output: number; name: string };
    variablePrefix: string;
  };
}

function define(settings: HostedAdapterSettings): AiSdkDiscovery {
  const type = `ai-sdk:${settings.provider}/${settings.model}`;
  const { prices } = settings;
  const pricesSet = prices.input !== undefined || prices.output !== undefined;
  return {
    definition: {
      declaration: {
        type,
        displayName: `${settings.model} (${settings.displayVendor} ${settings.apiLabel})`,
        modelFamily: settings.modelFamily,
        capabilities: ['general', 'code', 'research', 'action', 'structured-output'],
        limits: { ...settings.limits },
        trustClass: TrustClass.TRUST_CLASS_EXTERNAL,
        qualityTier: settings.qualityTier,
        // A slot's `api_key_secret` replaces the configured key for its runs, as `byoKeyVariable`.
        acceptsByoKey: true,
        requiresByoKey: false,
        demo: false,
        ready: true,
        readyReason: `configured from env: ${new URL(settings.baseURL).origin} (${settings.apiLabel}), model ${settings.model}`,
      },
      rateCard: {
        inputMicroUsdPerMtok: usdToMicro(prices.input ?? prices.defaults.input),
        outputMicroUsdPerMtok: usdToMicro(prices.output ?? prices.defaults.output),
        microUsdPerSecond: 0,
        microUsdPerTask: 0,
        source: pricesSet
          ? `operator setting: ${prices.variablePrefix}_INPUT_PER_MTOK_USD / ${prices.variablePrefix}_OUTPUT_PER_MTOK_USD`
          : `default: ${prices.defaults.name} list prices (set ${prices.variablePrefix}_*_PER_MTOK_USD for another model)`,
        reviewer: bootstrapReviewer,
      },
      create: () =>
        new AiSdkAgent({
          type,
          baseURL: settings.baseURL,
          apiKey: settings.apiKey,
          model: settings.model,
          providerName: settings.provider,
          api: settings.api,
          limits: { ...settings.limits },
        }),
    },
  };
}

