import { createHmac } from 'node:crypto';

/** The prefix Standard Webhooks gives a symmetric signing secret: `whsec_<base64 key>`. */
export const webhookSecretPrefix = 'whsec_';

/** A project secret that cannot serve as a signing key; the message names no value. */
export class WebhookSecretError extends Error {
  override readonly name = 'WebhookSecretError';
}

/**
 * The HMAC key of a project secret. A value starting with `whsec_` is Standard Webhooks' own format:
 * the rest is base64 and decodes to the key bytes, so any Standard Webhooks library verifies with the
 * same string. Any other value is used as is, its UTF-8 bytes being the key (receivers then pass the
 * raw bytes to their HMAC). An empty key, or a `whsec_` value whose rest is not base64, is refused.
 */
export function webhookSigningKey(secret: string): Buffer {
  if (!secret.startsWith(webhookSecretPrefix)) {
    if (secret.length === 0) throw new WebhookSecretError('the signing secret is empty');
    return Buffer.from(secret, 'utf8');
  }
  const encoded = secret.slice(webhookSecretPrefix.length);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) {
    throw new WebhookSecretError('the signing secret starts with whsec_ but the rest is not base64');
  }
  return Buffer.from(encoded, 'base64');
}

/**
 * The `webhook-signature` header value: `v1,` and the base64 HMAC-SHA256 of `<id>.<timestamp>.<body>`,
 * with `timestamp` in Unix seconds as sent in `webhook-timestamp`.
 */
export function signWebhook(secret: string, id: string, timestampSeconds: number, body: string): string {
  const mac = createHmac('sha256', webhookSigningKey(secret)).update(`${id}.${timestampSeconds}.${body}`).digest('base64');
  return `v1,${mac}`;
}

/** The three Standard Webhooks headers plus the content type, for one try at `now`. */
export function webhookHeaders(secret: string, id: string, body: string, now: Date): Record<string, string> {
  const timestamp = Math.floor(now.getTime() / 1000);
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signWebhook(secret, id, timestamp, body),
  };
}
