import type { z } from 'zod';

/**
 * Why an adapter's env settings do not parse, naming each variable and never a value (a value can be
 * a key): the `reason` discovery reports for a not-ready adapter.
 */
export function invalidSettingsReason(error: z.ZodError): string {
  return `invalid settings: ${error.issues.map((issue) => `${issue.path.join('.')} ${issue.message}`).join('; ')}`;
}

/** The settings that are set: an empty or blank variable counts as unset, as a shell's `VAR=` line means. */
export function presentSettings(env: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1].trim() !== ''));
}
