import type { IncomingMessage } from 'node:http';
import type { z } from 'zod';
import { problems, type FieldError } from './problem.js';

/** Whether a Content-Type header names JSON (`application/json`, `application/merge-patch+json`...). */
export function isJsonMediaType(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const mediaType = contentType.split(';')[0]!.trim().toLowerCase();
  return mediaType === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(mediaType);
}

/**
 * Reads a JSON body of at most `maxBytes`: 415 unless the Content-Type is JSON, 413 as soon as the
 * declared or received size passes the limit (without buffering the rest), 400 `actor.invalid_json`
 * when it does not parse. The parsed value is untyped: validate it with a schema next.
 */
export async function readJsonBody(request: IncomingMessage, maxBytes: number): Promise<unknown> {
  const contentType = request.headers['content-type'];
  if (!isJsonMediaType(contentType)) {
    discardBody(request);
    throw problems.unsupportedMediaType(contentType);
  }
  const declaredLength = Number(request.headers['content-length']);
  if (Number.isFinite(declaredLength) && declaredLength > maxBytes) {
    discardBody(request);
    throw problems.tooLarge(maxBytes);
  }
  const chunks = await collectBody(request, maxBytes);
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') throw problems.invalidJson('the request body is empty; send a JSON object');
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (error) {
    throw problems.invalidJson(`the request body is not valid JSON: ${(error as Error).message}`);
  }
  if (nestingDepth(value) > maxJsonDepth) {
    throw problems.invalid(`the request body nests more than ${maxJsonDepth} levels deep`);
  }
  return value;
}

/**
 * Deepest nesting accepted. Within the size limit a body can nest 100 000+ levels, which JSON.parse
 * takes but JSON.stringify (forwarding a configuration object) overflows the stack on.
 */
export const maxJsonDepth = 64;

/** How deep arrays and objects nest in a parsed JSON value; iterative, so any depth is safe. */
export function nestingDepth(value: unknown): number {
  let deepest = 0;
  const pending: Array<[unknown, number]> = [[value, 0]];
  while (pending.length > 0) {
    const [current, depth] = pending.pop()!;
    if (current === null || typeof current !== 'object') continue;
    deepest = Math.max(deepest, depth + 1);
    if (deepest > maxJsonDepth) return deepest;
    for (const child of Object.values(current)) pending.push([child, depth + 1]);
  }
  return deepest;
}

// Listeners rather than `for await`: leaving that loop early destroys the request, and with it the
// socket the 413 must still be written to.
function collectBody(request: IncomingMessage, maxBytes: number): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received <= maxBytes) {
        chunks.push(chunk);
        return;
      }
      request.off('data', onData);
      request.off('end', onEnd);
      discardBody(request);
      reject(problems.tooLarge(maxBytes));
    };
    const onEnd = () => resolve(chunks);
    request.on('data', onData);
    request.on('end', onEnd);
    request.on('error', reject);
  });
}

// Leaving an unread body in the socket stalls the client's upload; dropping it lets the client read
// our answer. The answer carries `Connection: close` where the body was refused for its size.
function discardBody(request: IncomingMessage): void {
  request.resume();
}

/** Validates untrusted input with a zod schema; failures become one 400 listing every problem. */
export function parseWith<Schema extends z.ZodType>(schema: Schema, value: unknown, what: string): z.infer<Schema> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw problems.invalid(`the ${what} is invalid`, fieldErrors(result.error));
}

/** Flattens zod issues into `{path, message}` pairs; an unknown field is reported at its own path. */
export function fieldErrors(error: z.ZodError): FieldError[] {
  const errors: FieldError[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) errors.push({ path: formatPath([...issue.path, key]), message: 'unknown field' });
    } else {
      errors.push({ path: formatPath(issue.path), message: issue.message });
    }
  }
  return errors;
}

function formatPath(path: PropertyKey[]): string {
  if (path.length === 0) return '(body)';
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else text += text === '' ? String(segment) : `.${String(segment)}`;
  }
  return text;
}
