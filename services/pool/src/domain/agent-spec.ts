import { z } from 'zod';
import { fail } from '@actor/kit';
import type { Agent } from '@actor/proto/pool';

/** An agent's mutable fields, validated and normalised. */
export interface AgentSpec {
  name: string;
  description: string;
  agentType: string;
  /** `["*"]` for every capability, or a sorted list without duplicates. */
  capabilities: string[];
  configuration: Record<string, unknown>;
  enabled: boolean;
  concurrency: number;
}

/** The most leases one agent may hold at once; one slot row exists per unit. */
export const maxConcurrency = 1_000;

/** Largest configuration document accepted, in characters of JSON. */
export const maxConfigurationLength = 64 * 1024;

const capabilityPattern = /^[a-z0-9][a-z0-9._:-]{0,63}$/;

const configurationSchema = z
  .string()
  .max(maxConfigurationLength, `must be at most ${maxConfigurationLength} characters`)
  .transform((text, context) => {
    if (text.trim() === '') return {};
    try {
      return JSON.parse(text) as unknown;
    } catch {
      context.addIssue({ code: 'custom', message: 'must be valid JSON' });
      return z.NEVER;
    }
  })
  .pipe(
    z.custom<Record<string, unknown>>(
      (value) => typeof value === 'object' && value !== null && !Array.isArray(value),
      'must be a JSON object',
    ),
  );

const agentSpecSchema = z.object({
  name: z
    .string()
    .min(1, 'is required')
    .max(100, 'must be at most 100 characters')
    .refine((name) => name.trim() === name, 'must not start or end with whitespace')
    .refine((name) => !/\p{Cc}/u.test(name), 'must not contain control characters'),
  description: z.string().max(2_000, 'must be at most 2000 characters'),
  agentType: z
    .string()
    .min(1, 'is required')
    .max(200, 'must be at most 200 characters')
    .refine((type) => !/\s/.test(type), 'must not contain whitespace'),
  capabilities: z
    .array(z.string())
    .max(64, 'must list at most 64 capabilities')
    .transform((list, context) => {
      const unique = [...new Set(list)];
      if (unique.length === 0) return ['*'];
      if (unique.includes('*')) {
        if (unique.length > 1) context.addIssue({ code: 'custom', message: 'must be "*" alone or a list without "*"' });
        return ['*'];
      }
      const bad = unique.filter((capability) => !capabilityPattern.test(capability));
      if (bad.length > 0) {
        context.addIssue({
          code: 'custom',
          message: `invalid capability ${bad.map((capability) => JSON.stringify(capability)).join(', ')}: use lowercase letters, digits, ".", "_", ":" or "-"`,
        });
      }
      return unique.sort();
    }),
  configurationJson: configurationSchema,
  enabled: z.boolean(),
  concurrency: z
    .number()
    .int('must be an integer')
    .min(0, 'must not be negative')
    .max(maxConcurrency, `must be at most ${maxConcurrency}`)
    .transform((value) => (value === 0 ? 1 : value)),
});

/** Turns zod issues into one INVALID_ARGUMENT message naming every wrong field as the proto spells it. */
export function invalidArgument(prefix: string, error: z.ZodError) {
  const problems = error.issues.map((issue) => {
    const field = issue.path
      .map((part) => String(part).replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`))
      .join('.');
    return `${prefix}${field} ${issue.message}`;
  });
  return fail.invalid(problems.join('; '));
}

/**
 * Validates an agent as sent by a client. Empty capabilities mean `*` (a slot with no declared
 * limits serves anything of its type); empty configuration means `{}`; concurrency 0 means 1.
 */
export function parseAgentSpec(agent: Agent | undefined): AgentSpec {
  if (!agent) throw fail.invalid('agent is required');
  const result = agentSpecSchema.safeParse(agent);
  if (!result.success) throw invalidArgument('agent.', result.error);
  const { configurationJson, ...rest } = result.data;
  return { ...rest, configuration: configurationJson };
}
