import { z } from 'zod';
import type { SecretSummary } from '@actor/proto/registry';
import { idempotencyKey } from '../idempotency-key.js';
import { HttpProblem, problems } from '../problem.js';
import { parseWith, readJsonBody } from '../request-body.js';
import type { Route, RouteContext } from '../router.js';
import { sendJson } from '../send-json.js';

/** A secret's name: what webhooks (`secret_ref`) and agent slots (`api_key_secret`) refer to it by. */
const secretNamePattern = /^[a-z0-9][a-z0-9_.-]{0,62}$/;

/**
 * Largest value accepted, in UTF-8 bytes (the registry enforces the same cap). API keys and webhook
 * secrets are a few hundred bytes; the cap keeps a secret from being used as a file store.
 */
export const maxSecretValueBytes = 16 * 1024;

/**
 * The body of PUT /v1/secrets/{name}. Strict: unknown fields are a 400.
 * - `value`: the secret, 1..16 KiB of UTF-8. Stored encrypted; never returned by any route.
 */
const secretBodySchema = z.strictObject({
  value: z
    .string()
    .min(1, 'must not be empty')
    .refine((value) => Buffer.byteLength(value, 'utf8') <= maxSecretValueBytes, `must be at most ${maxSecretValueBytes} bytes`),
});

function secretNameParam(context: RouteContext): string {
  const name = context.params.name!;
  if (!secretNamePattern.test(name)) {
    throw problems.invalid('the secret name is invalid', [
      { path: 'name', message: 'must be 1 to 63 characters of a-z, 0-9, ".", "_" or "-", starting with a letter or digit' },
    ]);
  }
  return name;
}

/** A secret as the REST API shows it: name, version and times, never the value. */
function encodeSecret(secret: Pick<SecretSummary, 'name' | 'version' | 'createTime' | 'updateTime'>) {
  return {
    name: secret.name,
    version: secret.version,
    created_at: secret.createTime?.toISOString() ?? null,
    updated_at: secret.updateTime?.toISOString() ?? null,
  };
}

/** Project secrets (scope `secrets:admin`), always those of the token's project. */
export const secretRoutes: Route[] = [
  {
    method: 'GET',
    pattern: '/v1/secrets',
    access: 'secrets:admin',
    async handle(context) {
      const answer = await context.clients.registry.listSecrets(
        { projectId: context.identity!.projectId },
        { signal: context.signal },
      );
      sendJson(context.response, 200, { data: answer.secrets.map(encodeSecret) });
    },
  },
  {
    method: 'PUT',
    pattern: '/v1/secrets/{name}',
    access: 'secrets:admin',
    /** Creates (201) or rotates (200) a secret; the answer never carries the value. */
    async handle(context) {
      const name = secretNameParam(context);
      const requestId = idempotencyKey(context.request.headers);
      const body = parseWith(secretBodySchema, await readJsonBody(context.request, context.config.GATEWAY_MAX_BODY_BYTES), 'secret');
      const answer = await context.clients.registry.putSecret(
        { projectId: context.identity!.projectId, name, value: body.value, requestId },
        { signal: context.signal },
      );
      sendJson(context.response, answer.created ? 201 : 200, encodeSecret(answer));
    },
  },
  {
    method: 'DELETE',
    pattern: '/v1/secrets/{name}',
    access: 'secrets:admin',
    async handle(context) {
      const name = secretNameParam(context);
      context.request.resume();
      const answer = await context.clients.registry.deleteSecret(
        { projectId: context.identity!.projectId, name },
        { signal: context.signal },
      );
      if (!answer.deleted) throw new HttpProblem(404, 'actor.secret.not_found', `the project has no secret named ${name}`);
      context.response.writeHead(204, { 'Cache-Control': 'no-store' });
      context.response.end();
    },
  },
];
