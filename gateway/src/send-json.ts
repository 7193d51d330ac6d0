import type { ServerResponse } from 'node:http';

/** Writes a JSON answer with an exact Content-Length; API answers are never cached by intermediaries. */
export function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'Cache-Control': 'no-store',
    ...headers,
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(text),
  });
  response.end(text);
}
