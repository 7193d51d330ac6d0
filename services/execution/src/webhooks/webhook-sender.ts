import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { guardedLookup, WebhookAddressRefusedError, webhookUrlProblem } from './webhook-address-guard.js';

/** What one POST came to. */
export type SendOutcome =
  /** The receiver answered; `retryAfterMs` from its `Retry-After` header, if any. */
  | { kind: 'answered'; statusCode: number; retryAfterMs?: number }
  /** The SSRF guard refused the address; never retried. */
  | { kind: 'refused'; message: string }
  /** No answer: timeout, connection refused or reset, DNS failure. */
  | { kind: 'unreachable'; message: string };

export interface SendOptions {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  allowHosts: readonly string[];
  /** Aborts the request (shutdown). */
  signal?: AbortSignal;
}

/** `Retry-After` as seconds or an HTTP date, in ms from now; undefined when absent or unreadable. */
export function retryAfterMs(header: string | undefined, now = Date.now()): number | undefined {
  if (!header) return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * POSTs one delivery. Redirects are not followed (a 3xx is a failed try, as Standard Webhooks
 * advises); the body of the answer is read and dropped. The whole exchange up to the answer's
 * headers must fit in `timeoutMs`.
 */
export function sendWebhook(options: SendOptions): Promise<SendOutcome> {
  const problem = webhookUrlProblem(options.url, options.allowHosts);
  if (problem) return Promise.resolve({ kind: 'refused', message: problem });
  const url = new URL(options.url);
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
  return new Promise((resolve) => {
    const outgoing = request(
      url,
      {
        method: 'POST',
        headers: {
          ...options.headers,
          'content-length': String(Buffer.byteLength(options.body)),
          'user-agent': 'actor-webhooks/1',
        },
        lookup: guardedLookup(options.allowHosts),
        signal,
        // A fresh connection per try: a kept-alive socket would skip the guarded lookup.
        agent: false,
      },
      (response: IncomingMessage) => {
        response.resume();
        response.on('error', () => undefined);
        const statusCode = response.statusCode ?? 0;
        const header = response.headers['retry-after'];
        resolve({ kind: 'answered', statusCode, retryAfterMs: retryAfterMs(Array.isArray(header) ? header[0] : header) });
      },
    );
    outgoing.on('error', (error: Error) => {
      if (error instanceof WebhookAddressRefusedError) return resolve({ kind: 'refused', message: error.message });
      if (timeout.aborted) return resolve({ kind: 'unreachable', message: `no answer within ${options.timeoutMs} ms` });
      const code = (error as NodeJS.ErrnoException).code;
      resolve({ kind: 'unreachable', message: code ? `${code}: ${error.message}` : error.message });
    });
    outgoing.end(options.body);
  });
}
