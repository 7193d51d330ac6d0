import { z } from 'zod';
import { usdToMicro } from '@actor/kit';
import { TrustClass } from '@actor/proto/registry';
import { bootstrapReviewer, type AdapterDefinition } from '../agent.js';
import { locateExecutable } from '../subprocess/executable-lookup.js';
import { OpencodeAgent } from './opencode-agent.js';
import { basicAuthorization } from './opencode-server.js';
import { invalidSettingsReason, presentSettings } from '../adapter-settings.js';

export const opencodeAdapterType = 'opencode';

/**
 * The settings of the `opencode` adapter, from env.
 * - `ACTOR_OPENCODE_URL`: base URL of an `opencode serve` already running (`http://127.0.0.1:4096`);
 *   runs then share it and the adapter starts none. Unset: each run starts its own server.
 * - `ACTOR_OPENCODE_SERVER_PASSWORD` / `ACTOR_OPENCODE_SERVER_USERNAME` (default `opencode`): basic auth
 *   for that server, as set there with `OPENCODE_SERVER_PASSWORD`.
 * - `ACTOR_OPENCODE_BIN`: path of the `opencode` executable; default: `opencode` on `PATH`.
 * - `ACTOR_OPENCODE_MODEL`: `provider/model` when a request names none; default: the server's.
 * - `ACTOR_OPENCODE_BYO_KEY_VARIABLE`: the variable a started server reads its provider's key from
 *   (`ANTHROPIC_API_KEY`, or one named in the opencode config with `{env:...}`); a bring-your-own key
 *   arrives there. Default `ANTHROPIC_API_KEY`.
 * - `ACTOR_OPENCODE_PRICE_INPUT_PER_MTOK_USD` / `..._OUTPUT_...`: USD per million tokens, default
 *   3 / 15 (Claude Sonnet's list prices; opencode's default provider is Anthropic).
 * - Passed to a started server as they are: every `OPENCODE_*` variable except the server password and
 *   username (the adapter sets a fresh one per run), `XDG_CONFIG_HOME`, `XDG_DATA_HOME`,
 *   `XDG_CACHE_HOME`, `XDG_STATE_HOME`, and the provider keys `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`,
 *   `OPENROUTER_API_KEY` plus the BYO key variable.
 */
const opencodeSettingsSchema = z.object({
  ACTOR_OPENCODE_URL: z.url({ protocol: /^https?$/ }).optional(),
  ACTOR_OPENCODE_SERVER_USERNAME: z.string().default('opencode'),
  ACTOR_OPENCODE_SERVER_PASSWORD: z.string().optional(),
  ACTOR_OPENCODE_MODEL: z
    .string()
    .trim()
    .regex(/^[^/\s]+\/\S+$/, 'must be provider/model')
    .optional(),
  ACTOR_OPENCODE_BYO_KEY_VARIABLE: z
    .string()
    .regex(/^[A-Z_][A-Z0-9_]*$/, 'must be an environment variable name')
    .default('ANTHROPIC_API_KEY'),
  ACTOR_OPENCODE_PRICE_INPUT_PER_MTOK_USD: z.coerce.number().nonnegative().default(3),
  ACTOR_OPENCODE_PRICE_OUTPUT_PER_MTOK_USD: z.coerce.number().nonnegative().default(15),
});

export const opencodeLimits = {
  contextTokens: 200_000,
  maxOutputTokens: 32_000,
  concurrency: 2,
  timeoutMs: 600_000,
  egress: true,
};

const passedThrough = ['XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_CACHE_HOME', 'XDG_STATE_HOME', 'ANTHROPIC_API_KEY', 'OPENAI_API_KEY', 'OPENROUTER_API_KEY'];
const notPassed = new Set(['OPENCODE_SERVER_PASSWORD', 'OPENCODE_SERVER_USERNAME']);

export type OpencodeDiscovery = { definition: AdapterDefinition; reason?: undefined } | { definition?: undefined; reason: string };

/**
 * The `opencode` adapter when `ACTOR_OPENCODE_URL` is set or its binary is found, else why not.
 * Reads only the env object it is given.
 */
export function discoverOpencodeAdapter(env: Record<string, string | undefined>): OpencodeDiscovery {
  const present = presentSettings(env);
  const parsed = opencodeSettingsSchema.safeParse(present);
  if (!parsed.success) {
    return { reason: invalidSettingsReason(parsed.error) };
  }
  const settings = parsed.data;
  let binaryPath: string | undefined;
  if (!settings.ACTOR_OPENCODE_URL) {
    const configured = present.ACTOR_OPENCODE_BIN;
    binaryPath = locateExecutable(configured, 'opencode', present.PATH ?? '');
    if (!binaryPath) {
      return {
        reason: configured
          ? `ACTOR_OPENCODE_BIN=${configured} is not an executable file`
          : 'no `opencode` executable on PATH and no ACTOR_OPENCODE_URL: install opencode-ai or set ACTOR_OPENCODE_BIN or ACTOR_OPENCODE_URL',
      };
    }
  }
  const byoKeyVariable = settings.ACTOR_OPENCODE_BYO_KEY_VARIABLE;
  const environment = Object.fromEntries(
    Object.entries(present).filter(
      ([name]) => (name.startsWith('OPENCODE_') && !notPassed.has(name)) || passedThrough.includes(name) || name === byoKeyVariable,
    ),
  );
  const server = settings.ACTOR_OPENCODE_URL
    ? {
        url: settings.ACTOR_OPENCODE_URL.replace(/\/+$/, ''),
        ...(settings.ACTOR_OPENCODE_SERVER_PASSWORD
          ? { authorization: basicAuthorization(settings.ACTOR_OPENCODE_SERVER_PASSWORD, settings.ACTOR_OPENCODE_SERVER_USERNAME) }
          : {}),
      }
    : undefined;
  const prices = {
    inputMicroUsdPerMtok: usdToMicro(settings.ACTOR_OPENCODE_PRICE_INPUT_PER_MTOK_USD),
    outputMicroUsdPerMtok: usdToMicro(settings.ACTOR_OPENCODE_PRICE_OUTPUT_PER_MTOK_USD),
    microUsdPerSecond: 0,
    microUsdPerTask: 0,
  };
  return {
    definition: {
      declaration: {
        type: opencodeAdapterType,
        displayName: 'OpenCode (server)',
        // opencode runs any provider's model; the family follows the default (Anthropic) unless the model says otherwise.
        modelFamily: modelFamilyOf(settings.ACTOR_OPENCODE_MODEL),
        capabilities: ['code', 'general', 'research', 'action', 'structured-output'],
        limits: { ...opencodeLimits },
        trustClass: TrustClass.TRUST_CLASS_EXTERNAL,
        qualityTier: 4,
        acceptsByoKey: server === undefined,
        requiresByoKey: false,
        demo: false,
        ready: true,
        readyReason: server
          ? `opencode server at ${server.url}${server.authorization ? ' (basic auth)' : ''}`
          : `opencode at ${binaryPath}: each run starts its own server${settings.ACTOR_OPENCODE_MODEL ? `, model ${settings.ACTOR_OPENCODE_MODEL}` : ''}`,
      },
      rateCard: {
        ...prices,
        source:
          present.ACTOR_OPENCODE_PRICE_INPUT_PER_MTOK_USD || present.ACTOR_OPENCODE_PRICE_OUTPUT_PER_MTOK_USD
            ? 'operator setting: ACTOR_OPENCODE_PRICE_INPUT_PER_MTOK_USD / ACTOR_OPENCODE_PRICE_OUTPUT_PER_MTOK_USD'
            : 'default: Claude Sonnet list prices (set ACTOR_OPENCODE_PRICE_*_PER_MTOK_USD for another model)',
        reviewer: bootstrapReviewer,
      },
      create: () =>
        new OpencodeAgent({
          type: opencodeAdapterType,
          ...(binaryPath ? { binaryPath } : {}),
          ...(server ? { server } : {}),
          environment,
          model: settings.ACTOR_OPENCODE_MODEL,
          byoKeyVariable,
          limits: { ...opencodeLimits },
          prices,
        }),
    },
  };
}

/** The model family of a `provider/model` id, by its provider; `anthropic` (opencode's default) when unset. */
function modelFamilyOf(model: string | undefined): string {
  return model?.split('/')[0]?.toLowerCase() ?? 'anthropic';
}
