import { z } from 'zod';
import { usdToMicro } from '@actor/kit';
import { TrustClass } from '@actor/proto/registry';
import { bootstrapReviewer, type AdapterDefinition } from '../agent.js';
import { locateExecutable } from '../subprocess/executable-lookup.js';
import { ClaudeCodeAgent } from './claude-code-agent.js';
import { invalidSettingsReason, presentSettings } from '../adapter-settings.js';

export const claudeCodeAdapterType = 'claude-code';

/**
 * The settings of the `claude-code` adapter, from env.
 * - `ACTOR_CLAUDE_CODE_BIN`: path of the `claude` executable; default: `claude` on `PATH`.
 * - `ACTOR_CLAUDE_CODE_MODEL`: the model when a request names none; default: the CLI's.
 * - `ACTOR_CLAUDE_CODE_PRICE_INPUT_PER_MTOK_USD` / `..._OUTPUT_...`: USD per million tokens, default
 *   3 / 15 (Claude Sonnet's list prices).
 * - `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`, `CLAUDE_CONFIG_DIR`: passed to the CLI as they are.
 *   Without a key every run needs a bring-your-own key in its request environment.
 */
const claudeCodeSettingsSchema = z.object({
  ACTOR_CLAUDE_CODE_MODEL: z.string().trim().min(1).optional(),
  ACTOR_CLAUDE_CODE_PRICE_INPUT_PER_MTOK_USD: z.coerce.number().nonnegative().default(3),
  ACTOR_CLAUDE_CODE_PRICE_OUTPUT_PER_MTOK_USD: z.coerce.number().nonnegative().default(15),
});

export const claudeCodeLimits = {
  contextTokens: 200_000,
  maxOutputTokens: 32_000,
  concurrency: 2,
  timeoutMs: 600_000,
  egress: true,
};

/** Variables of the service's env that the CLI receives. */
const passedThrough = ['ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL', 'CLAUDE_CONFIG_DIR'] as const;

export type ClaudeCodeDiscovery = { definition: AdapterDefinition; reason?: undefined } | { definition?: undefined; reason: string };

/** The `claude-code` adapter when its binary is found, else why not. Reads only the env object it is given. */
export function discoverClaudeCodeAdapter(env: Record<string, string | undefined>): ClaudeCodeDiscovery {
  const present = presentSettings(env);
  const configured = present.ACTOR_CLAUDE_CODE_BIN;
  const binaryPath = locateExecutable(configured, 'claude', present.PATH ?? '');
  if (!binaryPath) {
    return {
      reason: configured
        ? `ACTOR_CLAUDE_CODE_BIN=${configured} is not an executable file`
        : 'no `claude` executable on PATH: install @anthropic-ai/claude-code or set ACTOR_CLAUDE_CODE_BIN',
    };
  }
  const parsed = claudeCodeSettingsSchema.safeParse(present);
  if (!parsed.success) {
    return { reason: invalidSettingsReason(parsed.error) };
  }
  const settings = parsed.data;
  const environment = Object.fromEntries(passedThrough.flatMap((name) => (present[name] ? [[name, present[name]]] : [])));
  const prices = {
    inputMicroUsdPerMtok: usdToMicro(settings.ACTOR_CLAUDE_CODE_PRICE_INPUT_PER_MTOK_USD),
    outputMicroUsdPerMtok: usdToMicro(settings.ACTOR_CLAUDE_CODE_PRICE_OUTPUT_PER_MTOK_USD),
    microUsdPerSecond: 0,
    microUsdPerTask: 0,
  };
  const keyed = environment.ANTHROPIC_API_KEY !== undefined;
  return {
    definition: {
      declaration: {
        type: claudeCodeAdapterType,
        displayName: 'Claude Code (CLI)',
        modelFamily: 'anthropic',
        capabilities: ['code', 'general', 'research', 'action', 'structured-output'],
        limits: { ...claudeCodeLimits },
        trustClass: TrustClass.TRUST_CLASS_EXTERNAL,
        qualityTier: 4,
        acceptsByoKey: true,
        requiresByoKey: false,
        demo: false,
        ready: true,
        readyReason: `claude CLI at ${binaryPath}; ${keyed ? 'ANTHROPIC_API_KEY configured' : 'no ANTHROPIC_API_KEY: runs need a bring-your-own key'}`,
      },
      rateCard: {
        ...prices,
        source:
          present.ACTOR_CLAUDE_CODE_PRICE_INPUT_PER_MTOK_USD || present.ACTOR_CLAUDE_CODE_PRICE_OUTPUT_PER_MTOK_USD
            ? 'operator setting: ACTOR_CLAUDE_CODE_PRICE_INPUT_PER_MTOK_USD / ACTOR_CLAUDE_CODE_PRICE_OUTPUT_PER_MTOK_USD'
            : 'default: Claude Sonnet list prices (set ACTOR_CLAUDE_CODE_PRICE_*_PER_MTOK_USD for another model)',
        reviewer: bootstrapReviewer,
      },
      create: () =>
        new ClaudeCodeAgent({
          type: claudeCodeAdapterType,
          binaryPath,
          environment,
          model: settings.ACTOR_CLAUDE_CODE_MODEL,
          limits: { ...claudeCodeLimits },
          prices,
        }),
    },
  };
}
