import { z } from 'zod';
import { usdToMicro } from '@actor/kit';
import { TrustClass } from '@actor/proto/registry';
import { bootstrapReviewer, type AdapterDefinition } from '../agent.js';
import { locateExecutable } from '../subprocess/executable-lookup.js';
import { CopilotAgent, copilotProviderSecretVariables, copilotTokenVariables } from './copilot-agent.js';
import { invalidSettingsReason, presentSettings } from '../adapter-settings.js';

export const copilotAdapterType = 'copilot';

/**
 * The settings of the `copilot` adapter, from env.
 * - `ACTOR_COPILOT_BIN`: path of the `copilot` executable; default: `copilot` on `PATH`.
 * - `ACTOR_COPILOT_MODEL`: the model when a request names none (`--model`); default: the CLI's.
 * - `ACTOR_COPILOT_MODEL_FAMILY`: the declared model family; default: guessed from the model name
 *   (`claude*` anthropic, `gpt*`/`o<digit>*` openai, `gemini*` google), else from `COPILOT_PROVIDER_TYPE`
 *   (`anthropic`), else `anthropic`, the family of the CLI's default model (Claude Sonnet).
 * - `ACTOR_COPILOT_PRICE_INPUT_PER_MTOK_USD` / `..._OUTPUT_...`: USD per million tokens, default 0;
 *   `ACTOR_COPILOT_PRICE_PER_TASK_USD`: USD per run, default 0.04 (GitHub's price of one premium
 *   request beyond a plan's allowance; one prompt at a 1x model uses one).
 * - Credentials, passed to the CLI as they are: `COPILOT_GITHUB_TOKEN`, `GH_TOKEN`, `GITHUB_TOKEN`
 *   (a token of a Copilot subscriber), or a custom provider (`COPILOT_PROVIDER_BASE_URL`,
 *   `COPILOT_PROVIDER_TYPE`, `COPILOT_PROVIDER_API_KEY`, `COPILOT_PROVIDER_BEARER_TOKEN`,
 *   `COPILOT_PROVIDER_WIRE_API`, `COPILOT_MODEL`); `COPILOT_HOME` (config and sessions),
 *   `COPILOT_OFFLINE`, `GH_HOST`, `COPILOT_GH_HOST`.
 */
const copilotSettingsSchema = z.object({
  ACTOR_COPILOT_MODEL: z.string().trim().min(1).optional(),
  ACTOR_COPILOT_MODEL_FAMILY: z.string().trim().min(1).optional(),
  ACTOR_COPILOT_PRICE_INPUT_PER_MTOK_USD: z.coerce.number().nonnegative().default(0),
  ACTOR_COPILOT_PRICE_OUTPUT_PER_MTOK_USD: z.coerce.number().nonnegative().default(0),
  ACTOR_COPILOT_PRICE_PER_TASK_USD: z.coerce.number().nonnegative().default(0.04),
});

export const copilotLimits = {
  contextTokens: 128_000,
  maxOutputTokens: 16_384,
  concurrency: 2,
  timeoutMs: 600_000,
  egress: true,
};

/** Variables of the service's env that the CLI receives. */
const passedThrough = [
  ...copilotTokenVariables,
  ...copilotProviderSecretVariables,
  'COPILOT_PROVIDER_BASE_URL',
  'COPILOT_PROVIDER_TYPE',
  'COPILOT_PROVIDER_WIRE_API',
  'COPILOT_PROVIDER_MODEL_ID',
  'COPILOT_PROVIDER_WIRE_MODEL',
  'COPILOT_MODEL',
  'COPILOT_HOME',
  'COPILOT_OFFLINE',
  'GH_HOST',
  'COPILOT_GH_HOST',
] as const;

export type CopilotDiscovery = { definition: AdapterDefinition; reason?: undefined } | { definition?: undefined; reason: string };

/** The `copilot` adapter when its binary and a credential are found, else why not. Reads only the env object it is given. */
export function discoverCopilotAdapter(env: Record<string, string | undefined>): CopilotDiscovery {
  const present = presentSettings(env);
  const configured = present.ACTOR_COPILOT_BIN;
  const binaryPath = locateExecutable(configured, 'copilot', present.PATH ?? '');
  if (!binaryPath) {
    return {
      reason: configured
        ? `ACTOR_COPILOT_BIN=${configured} is not an executable file`
        : 'no `copilot` executable on PATH: install @github/copilot or set ACTOR_COPILOT_BIN',
    };
  }
  const token = copilotTokenVariables.find((name) => present[name]);
  const provider = present.COPILOT_PROVIDER_BASE_URL;
  if (!token && !provider) {
    return { reason: `copilot CLI at ${binaryPath}, but no GitHub token: set ${copilotTokenVariables.join(', ')} (or COPILOT_PROVIDER_BASE_URL for a custom provider)` };
  }
  const parsed = copilotSettingsSchema.safeParse(present);
  if (!parsed.success) {
    return { reason: invalidSettingsReason(parsed.error) };
  }
  const settings = parsed.data;
  const environment = Object.fromEntries(passedThrough.flatMap((name) => (present[name] ? [[name, present[name]]] : [])));
  const prices = {
    inputMicroUsdPerMtok: usdToMicro(settings.ACTOR_COPILOT_PRICE_INPUT_PER_MTOK_USD),
    outputMicroUsdPerMtok: usdToMicro(settings.ACTOR_COPILOT_PRICE_OUTPUT_PER_MTOK_USD),
    microUsdPerSecond: 0,
    microUsdPerTask: usdToMicro(settings.ACTOR_COPILOT_PRICE_PER_TASK_USD),
  };
  const model = settings.ACTOR_COPILOT_MODEL ?? present.COPILOT_MODEL;
  const priced = ['ACTOR_COPILOT_PRICE_INPUT_PER_MTOK_USD', 'ACTOR_COPILOT_PRICE_OUTPUT_PER_MTOK_USD', 'ACTOR_COPILOT_PRICE_PER_TASK_USD'].some((name) => present[name]);
  return {
    definition: {
      declaration: {
        type: copilotAdapterType,
        displayName: 'GitHub Copilot (CLI)',
        modelFamily: settings.ACTOR_COPILOT_MODEL_FAMILY ?? copilotModelFamily(model, present.COPILOT_PROVIDER_TYPE),
        capabilities: ['code', 'general', 'research', 'action', 'structured-output'],
        limits: { ...copilotLimits },
        trustClass: TrustClass.TRUST_CLASS_EXTERNAL,
        qualityTier: 4,
        acceptsByoKey: true,
        requiresByoKey: false,
        demo: false,
        ready: true,
        readyReason: `copilot CLI at ${binaryPath}; ${provider ? `custom provider at ${provider}` : `${token} configured`}${model ? `; model ${model}` : ''}`,
      },
      rateCard: {
        ...prices,
        source: priced
          ? 'operator setting: ACTOR_COPILOT_PRICE_INPUT_PER_MTOK_USD / ACTOR_COPILOT_PRICE_OUTPUT_PER_MTOK_USD / ACTOR_COPILOT_PRICE_PER_TASK_USD'
          : 'default: USD 0.04 a run, GitHub\'s price of one premium request beyond the plan allowance (a 1x model; set ACTOR_COPILOT_PRICE_* for other models or a custom provider)',
        reviewer: bootstrapReviewer,
      },
      create: () =>
        new CopilotAgent({
          type: copilotAdapterType,
          binaryPath,
          environment,
          model: settings.ACTOR_COPILOT_MODEL,
          limits: { ...copilotLimits },
          prices,
        }),
    },
  };
}

/** The model family a model name belongs to, as far as its name tells. */
export function copilotModelFamily(model: string | undefined, providerType: string | undefined): string {
  const name = (model ?? '').toLowerCase();
  if (name.startsWith('claude')) return 'anthropic';
  if (name.startsWith('gpt') || /^o\d/.test(name)) return 'openai';
  if (name.startsWith('gemini')) return 'google';
  if (providerType === 'anthropic') return 'anthropic';
  if (model) return 'unknown';
  // The CLI's default model is a Claude Sonnet model (github/copilot-cli README: "By default, copilot utilizes Claude Sonnet").
  return 'anthropic';
}
