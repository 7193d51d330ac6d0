import type { z } from 'zod';

/**
 * Why an adapter's env settings do not parse, naming each variable and never a value (a value can be
 * a key): the `reason` discovery reports for a not-ready adapter.
 */
export function invalidSettingsReason(error: z.ZodError): string {
  return `invalid settings: ${error.issues.map((issue) => `${issue.path.join('.')} ${issue.message}`).join('; ')}`;
}
