import { z } from 'zod';

/** Thrown when the environment does not satisfy a service's config schema; lists every problem. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/**
 * Parses the environment against a zod schema once, at start. Every problem is reported together so
 * that an operator fixes them in one go instead of one restart per mistake.
 */
export function loadConfig<Schema extends z.ZodType>(
  schema: Schema,
  env: Record<string, string | undefined> = process.env,
): z.infer<Schema> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  throw new ConfigError(
    result.error.issues.map((issue) => `${issue.path.join('.') || '(env)'}: ${issue.message}`),
  );
}

/** A `host:port` peer address; the default is used when the variable is unset or empty. */
export function addressSetting(defaultAddress: string) {
  return z
    .string()
    .optional()
    .transform((value) => (value === undefined || value === '' ? defaultAddress : value))
    .pipe(z.string().regex(/^[^:\s]+:\d{1,5}$/, 'must be host:port'));
}

/** An optional string where an empty value counts as unset. */
export function optionalSetting() {
  return z
    .string()
    .optional()
    .transform((value) => (value === '' ? undefined : value));
}

/** A non-negative integer setting with a default (ports, milliseconds). */
export function integerSetting(defaultValue: number) {
  return z
    .string()
    .optional()
    .transform((value) => (value === undefined || value === '' ? String(defaultValue) : value))
    .pipe(z.string().regex(/^\d+$/, 'must be a non-negative integer'))
    .transform(Number);
}

/** Default loopback addresses of the five services; `npm start` and every service agree on them. */
export const defaultAddresses = {
  registry: '127.0.0.1:50051',
  pool: '127.0.0.1:50052',
  placement: '127.0.0.1:50053',
  execution: '127.0.0.1:50054',
  billing: '127.0.0.1:50055',
} as const;

export type ServiceName = keyof typeof defaultAddresses;

/**
 * Settings every service shares:
 * - `LOG_LEVEL`: pino level (`fatal`..`trace`, `silent`), default `info`.
 * - `DATABASE_URL`: a Postgres URL; unset means embedded PGlite under `ACTOR_DATA_DIR`.
 * - `ACTOR_DATA_DIR`: where embedded PGlite keeps each service's data, default `.actor`.
 */
export const commonSettings = {
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .optional()
    .default('info'),
  DATABASE_URL: optionalSetting().pipe(
    z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional(),
  ),
  ACTOR_DATA_DIR: optionalSetting().transform((value) => value ?? '.actor'),
};
