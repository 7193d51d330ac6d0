import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { problems } from './problem.js';

/**
 * The request id of an idempotent write: the `Idempotency-Key` header (1..200 visible ASCII
 * characters; anything else is a 400). Without one, a fresh id is made so that the gateway's own
 * retry of the gRPC call (on UNAVAILABLE) cannot apply the write twice.
 */
export function idempotencyKey(headers: IncomingHttpHeaders): string {
  const header = headers['idempotency-key'];
  if (header === undefined) return `gw_${randomUUID()}`;
  const value = Array.isArray(header) ? header[0]! : header;
  if (!/^[\x21-\x7e]{1,200}$/.test(value)) {
    throw problems.invalid('the Idempotency-Key header is invalid', [
      { path: 'Idempotency-Key', message: 'must be 1 to 200 visible ASCII characters' },
    ]);
  }
  return value;
}
