import { z } from 'zod';
import type { OpencodeEndpoint } from './opencode-server.js';

/**
 * A small client of the `opencode serve` HTTP API (OpenAPI 3.1 at `GET /doc`), only the calls this
 * adapter needs: `POST /session`, `POST /session/{id}/message`, `GET /session/{id}/message`,
 * `POST /session/{id}/abort`, `POST /permission/{id}/reply`, `GET /experimental/tool/ids`,
 * `GET /global/health` and the `GET /event` server-sent events. Every call names the run's working
 * directory (`?directory=`): the server keeps one instance per directory.
 */

/** The error an assistant message carries (`APIError`, `ProviderAuthError`, `MessageAbortedError`, ...). */
const messageErrorSchema = z.looseObject({
  name: z.string(),
  data: z.looseObject({ message: z.string().optional(), statusCode: z.number().optional() }).optional(),
});

const tokensSchema = z.looseObject({
  input: z.number().default(0),
  output: z.number().default(0),
  reasoning: z.number().default(0),
  cache: z.looseObject({ read: z.number().default(0), write: z.number().default(0) }).optional(),
});

/** The fields of a message's `info` this adapter reads. */
export const messageInfoSchema = z.looseObject({
  id: z.string(),
  sessionID: z.string(),
  role: z.string(),
  parentID: z.string().optional(),
  /** USD, as opencode prices it from its model catalog (0 for a model without prices). */
  cost: z.number().optional(),
  tokens: tokensSchema.optional(),
  error: messageErrorSchema.optional(),
  structured: z.unknown().optional(),
  finish: z.string().optional(),
  time: z.looseObject({ created: z.number().optional(), completed: z.number().optional() }).optional(),
});
export type OpencodeMessageInfo = z.infer<typeof messageInfoSchema>;

export const partSchema = z.looseObject({
  id: z.string(),
  messageID: z.string(),
  sessionID: z.string().optional(),
  type: z.string(),
  text: z.string().optional(),
  synthetic: z.boolean().optional(),
  ignored: z.boolean().optional(),
  tool: z.string().optional(),
  state: z.looseObject({ status: z.string().optional(), input: z.unknown().optional(), error: z.string().optional() }).optional(),
});
export type OpencodePart = z.infer<typeof partSchema>;

const messageWithPartsSchema = z.object({ info: messageInfoSchema, parts: z.array(partSchema) });
export type OpencodeMessage = z.infer<typeof messageWithPartsSchema>;

const sessionSchema = z.looseObject({ id: z.string() });

/** One event of `GET /event`: `{ id, type, properties }`. */
export const eventSchema = z.looseObject({ type: z.string(), properties: z.record(z.string(), z.unknown()).default({}) });
export type OpencodeEvent = z.infer<typeof eventSchema>;

/** The body of `POST /session/{id}/message` (SessionPromptRequest). */
export interface OpencodePrompt {
  parts: Array<{ type: 'text'; text: string }>;
  /** `provider/model` split in two. */
  model?: { providerID: string; modelID: string };
  /** Appended to the agent's system prompt. */
  system?: string;
  /** Tool id -> enabled. */
  tools?: Record<string, boolean>;
  /** `json_schema`: the model must answer through its StructuredOutput tool; the value lands in `info.structured`. */
  format?: { type: 'json_schema'; schema: Record<string, unknown> };
}

/** A non-2xx answer of the server. */
export class OpencodeHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export class OpencodeClient {
  constructor(
    private readonly endpoint: OpencodeEndpoint,
    private readonly directory: string,
  ) {}

  async health(signal: AbortSignal): Promise<{ healthy: boolean; version?: string }> {
    return z.looseObject({ healthy: z.boolean(), version: z.string().optional() }).parse(await this.call('GET', '/global/health', undefined, signal));
  }

  async createSession(signal: AbortSignal): Promise<string> {
    return sessionSchema.parse(await this.call('POST', '/session', {}, signal)).id;
  }

  /** Sends the prompt and waits for the whole turn (every step and tool call) to end. */
  async prompt(sessionId: string, prompt: OpencodePrompt, signal: AbortSignal): Promise<OpencodeMessage> {
    return messageWithPartsSchema.parse(await this.call('POST', `/session/${encodeURIComponent(sessionId)}/message`, prompt, signal));
  }

  async messages(sessionId: string, signal: AbortSignal): Promise<OpencodeMessage[]> {
    return z.array(messageWithPartsSchema).parse(await this.call('GET', `/session/${encodeURIComponent(sessionId)}/message`, undefined, signal));
  }

  async abort(sessionId: string, signal: AbortSignal): Promise<void> {
    await this.call('POST', `/session/${encodeURIComponent(sessionId)}/abort`, undefined, signal);
  }

  async replyPermission(requestId: string, reply: 'once' | 'always' | 'reject', message: string, signal: AbortSignal): Promise<void> {
    await this.call('POST', `/permission/${encodeURIComponent(requestId)}/reply`, { reply, message }, signal);
  }

  async toolIds(signal: AbortSignal): Promise<string[]> {
    return z.array(z.string()).parse(await this.call('GET', '/experimental/tool/ids', undefined, signal));
  }

  /**
   * Opens `GET /event` and calls `onEvent` for each event until `signal` aborts or the server closes the
   * stream. Resolves once the stream is open (the server's `server.connected` has not necessarily
   * arrived yet); `ended` settles when it closes.
   */
  async subscribe(onEvent: (event: OpencodeEvent) => void, signal: AbortSignal): Promise<{ ended: Promise<void> }> {
    const response = await fetch(this.url('/event'), { headers: this.headers(), signal });
    if (!response.ok || !response.body) throw new OpencodeHttpError(response.status, `GET /event answered ${response.status}`);
    const body = response.body;
    const ended = (async () => {
      const decoder = new TextDecoder();
      let pending = '';
      try {
        for await (const chunk of body) {
          pending += decoder.decode(chunk as Uint8Array, { stream: true });
          let boundary: number;
          while ((boundary = pending.search(/\r?\n\r?\n/)) >= 0) {
            const block = pending.slice(0, boundary);
            pending = pending.slice(boundary).replace(/^\r?\n\r?\n/, '');
            const data = block
              .split(/\r?\n/)
              .filter((line) => line.startsWith('data:'))
              .map((line) => line.slice(5).replace(/^ /, ''))
              .join('\n');
            if (!data) continue;
            let value: unknown;
            try {
              value = JSON.parse(data);
            } catch {
              continue;
            }
            const event = eventSchema.safeParse(value);
            if (event.success) onEvent(event.data);
          }
        }
      } catch {
        // Aborted or cut: the run's own outcome says what happened.
      }
    })();
    return { ended };
  }

  private url(path: string): string {
    return `${this.endpoint.url}${path}?directory=${encodeURIComponent(this.directory)}`;
  }

  private headers(): Record<string, string> {
    return { accept: 'application/json', ...(this.endpoint.authorization ? { authorization: this.endpoint.authorization } : {}) };
  }

  private async call(method: string, path: string, body: unknown, signal: AbortSignal): Promise<unknown> {
    const response = await fetch(this.url(path), {
      method,
      headers: { ...this.headers(), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
    const text = await response.text();
    if (!response.ok) throw new OpencodeHttpError(response.status, `${method} ${path} answered ${response.status}${text ? `: ${text.slice(0, 500)}` : ''}`);
    return text ? (JSON.parse(text) as unknown) : undefined;
  }
}
