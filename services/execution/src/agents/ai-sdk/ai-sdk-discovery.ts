import { z } from 'zod';
import { usdToMicro } from '@actor/kit';
import { TrustClass } from '@actor/proto/registry';
import { bootstrapReviewer, type AdapterDefinition } from '../agent.js';
import { AiSdkAgent } from './ai-sdk-agent.js';
import { invalidSettingsReason, presentSettings } from '../adapter-settings.js';

/** The provider name in adapter types and SDK metadata. */
export const openAiCompatibleProvider = 'openai-compatible';

/**
 * The settings of the OpenAI-compatible adapter, from env.
 * - `ACTOR_OPENAI_BASE_URL` (required): the endpoint up to `/v1` (`https://api.openai.com/v1`,
 *   `http://127.0.0.1:11434/v1` for Ollama).
 * - `ACTOR_OPENAI_API_KEY` (required): its key (any non-empty text for servers that ignore keys).
 * - `ACTOR_OPENAI_MODEL`: the model id, default `gpt-4o-mini`.
 * - `ACTOR_OPENAI_MODEL_FAMILY`: the family a judge must differ from, default `openai`.
 * - `ACTOR_OPENAI_QUALITY_TIER`: 1..5, default 3.
 * - `ACTOR_OPENAI_PRICE_INPUT_PER_MTOK_USD` / `ACTOR_OPENAI_PRICE_OUTPUT_PER_MTOK_USD`: USD per
 *   million tokens, default 0.15 / 0.60 (gpt-4o-mini's list prices).
 */
const aiSdkSettingsSchema = z.object({
  ACTOR_OPENAI_BASE_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL such as https://api.openai.com/v1' }),
  ACTOR_OPENAI_API_KEY: z.string().min(1),
  ACTOR_OPENAI_MODEL: z.string().trim().min(1).default('gpt-4o-mini'),
  ACTOR_OPENAI_MODEL_FAMILY: z.string().trim().min(1).default('openai'),
  ACTOR_OPENAI_QUALITY_TIER: z.coerce.number().int().min(1).max(5).default(3),
  ACTOR_OPENAI_PRICE_INPUT_PER_MTOK_USD: z.coerce.number().nonnegative().optional(),
  ACTOR_OPENAI_PRICE_OUTPUT_PER_MTOK_USD: z.coerce.number().nonnegative().optional(),
});

const defaultInputUsdPerMtok = 0.15;
const defaultOutputUsdPerMtok = 0.6;

const aiSdkLimits = {
  contextTokens: 128_000,
  maxOutputTokens: 4_096,
  concurrency: 4,
  timeoutMs: 120_000,
  egress: false,
};

export type AiSdkDiscovery = { definition: AdapterDefinition; reason?: undefined } | { definition?: undefined; reason: string };

/**
 * The OpenAI-compatible adapter when its base URL and key are set in `env`, else why not. Reads only
 * the env object it is given (the service's config passes its own), never `process.env`.
 */
export function discoverAiSdkAdapter(env: Record<string, string | undefined>): AiSdkDiscovery {
  // An empty variable counts as unset, as a shell's `VAR=` line means.
  const present = presentSettings(env);
  const missing = ['ACTOR_OPENAI_BASE_URL', 'ACTOR_OPENAI_API_KEY'].filter((name) => present[name] === undefined);
  if (missing.length > 0) return { reason: `set ${missing.join(' and ')} to use an OpenAI-compatible endpoint` };
  const parsed = aiSdkSettingsSchema.safeParse(present);
  if (!parsed.success) {
    return { reason: invalidSettingsReason(parsed.error) };
  }
  const settings = parsed.data;
  const model = settings.ACTOR_OPENAI_MODEL;
  const type = `ai-sdk:${openAiCompatibleProvider}/${model}`;
  const pricesSet = settings.ACTOR_OPENAI_PRICE_INPUT_PER_MTOK_USD !== undefined || settings.ACTOR_OPENAI_PRICE_OUTPUT_PER_MTOK_USD !== undefined;
  return {
    definition: {
      declaration: {
        type,
        displayName: `${model} (OpenAI-compatible)`,
        modelFamily: settings.ACTOR_OPENAI_MODEL_FAMILY,
        capabilities: ['general', 'code', 'research', 'action', 'structured-output'],
        limits: { ...aiSdkLimits },
        trustClass: TrustClass.TRUST_CLASS_EXTERNAL,
        qualityTier: settings.ACTOR_OPENAI_QUALITY_TIER,
        // A slot's `api_key_secret` replaces the configured key for its runs (AdapterAgentsPort).
        acceptsByoKey: true,
        requiresByoKey: false,
        demo: false,
        ready: true,
        readyReason: `configured from env: ${new URL(settings.ACTOR_OPENAI_BASE_URL).origin}, model ${model}`,
      },
      rateCard: {
        inputMicroUsdPerMtok: usdToMicro(settings.ACTOR_OPENAI_PRICE_INPUT_PER_MTOK_USD ?? defaultInputUsdPerMtok),
        outputMicroUsdPerMtok: usdToMicro(settings.ACTOR_OPENAI_PRICE_OUTPUT_PER_MTOK_USD ?? defaultOutputUsdPerMtok),
        microUsdPerSecond: 0,
        microUsdPerTask: 0,
        source: pricesSet
          ? 'operator setting: ACTOR_OPENAI_PRICE_INPUT_PER_MTOK_USD / ACTOR_OPENAI_PRICE_OUTPUT_PER_MTOK_USD'
          : 'default: gpt-4o-mini list prices (set ACTOR_OPENAI_PRICE_*_PER_MTOK_USD for another model)',
        reviewer: bootstrapReviewer,
      },
      create: () =>
        new AiSdkAgent({
          type,
          baseURL: settings.ACTOR_OPENAI_BASE_URL,
          apiKey: settings.ACTOR_OPENAI_API_KEY,
          model,
          providerName: openAiCompatibleProvider,
          limits: { ...aiSdkLimits },
        }),
    },
  };
}
