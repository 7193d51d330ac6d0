import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local stand-in for the Anthropic Messages API (https://docs.anthropic.com/en/api/messages) that
 * speaks the real wire format, as the `claude` CLI uses it: `HEAD /`, `POST /v1/messages` (the CLI adds
 * `?beta=true`) plain or streaming (SSE `event:`/`data:` pairs: `message_start`, `content_block_start`,
 * `content_block_delta` with `text_delta` or `input_json_delta`, `content_block_stop`, `message_delta`
 * with the stop reason and usage, `message_stop`), `GET /v1/models` (the Models API's
 * `{ data: [{ type: 'model', id, display_name, created_at }], has_more, first_id, last_id }`), and
 * Anthropic's error body `{ type: 'error', error: { type, message } }`. Tests choose the replies and
 * read back the requests.
 */

/** One scripted reply: text, or a tool call (the model asking to run a tool). */
export interface AnthropicFakeReply {
  /** The answer text; default `A fake answer.` (ignored when `toolUse` or `json` is set). */
  text?: string;
  /** For structured-output calls: the value whose JSON text is the answer. */
  json?: unknown;
  /** Answer with a `tool_use` block instead (stop reason `tool_use`). */
  toolUse?: { name: string; input: Record<string, unknown> };
  /** How the streamed text is split; default: pieces of about 12 characters. */
  chunks?: string[];
  /** Wait before each streamed chunk (and before a non-streamed answer), in ms. */
  delayMs?: number;
  /** Token usage to report; default: about four characters a token of the request and the answer. */
  usage?: { inputTokens: number; outputTokens: number };
  /** Answer with this HTTP status and an Anthropic error body instead. */
  status?: number;
  /** Streaming only: destroy the socket after this many text chunks. */
  cutAfterChunks?: number;
  /**
   * Streaming only: end the response cleanly (as a proxy timing out might) after this many text
   * chunks, with no `message_delta` and no `message_stop`.
   */
  endAfterChunks?: number;
}

/** A `POST /v1/messages` the fake received, with the parts a test usually looks at. */
export interface AnthropicFakeRequest {
  path: string;
  /** The `x-api-key` header, or the bearer token of `authorization`. */
  apiKey?: string;
  body: Record<string, unknown>;
  /** The text of every message in order, whatever its role (the CLI's last message can be a `system` one). */
  texts: string[];
  /** The `content` of every `tool_result` block in the message list, as text. */
  toolResults: string[];
  /** Whether the request carries a tool list (the CLI's main call does; its short side calls do not). */
  hasTools: boolean;
}

export interface AnthropicFakeServerOptions {
  /** The key the fake accepts; any other gets a 401. Unset: every key is accepted. */
  apiKey?: string;
  /** Chooses the reply for a request when the scripted queue is empty. */
  respond?: (request: AnthropicFakeRequest) => AnthropicFakeReply;
  /** Model ids `GET /v1/models` lists; default `['claude-fake']`. */
  models?: string[];
  /**
   * Put the presented key in the 401 message (the real API does not), so that tests can prove an
   * adapter never passes a key on in its errors. Default false.
   */
  echoKeyInErrors?: boolean;
}

export interface AnthropicFakeServer {
  /** `http://127.0.0.1:<port>`, the value for `ANTHROPIC_BASE_URL`. */
  baseURL: string;
  /** Every `POST /v1/messages` received, in order. */
  requests: AnthropicFakeRequest[];
  /** Queues replies for the next message requests, first in first out. */
  script(...replies: AnthropicFakeReply[]): void;
  close(): Promise<void>;
}

export async function startAnthropicFakeServer(options: AnthropicFakeServerOptions = {}): Promise<AnthropicFakeServer> {
  const queue: AnthropicFakeReply[] = [];
  const requests: AnthropicFakeRequest[] = [];
  let sequence = 0;

  const server = createServer((request, response) => {
    void handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) sendError(response, 500, 'api_error', `fake server error: ${String(error)}`);
      else response.destroy();
    });
  });

  function sendUnauthorized(response: ServerResponse, presented: string | undefined): void {
    sendError(response, 401, 'authentication_error', options.echoKeyInErrors ? `invalid x-api-key: ${presented ?? '(none)'}` : 'invalid x-api-key');
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = (request.url ?? '/').split('?')[0] ?? '/';
    const text = await readBody(request);
    if (request.method === 'HEAD' || (request.method === 'GET' && path === '/')) {
      response.writeHead(200).end();
      return;
    }
    if (request.method === 'GET' && path === '/v1/models') {
      const presented = headerValue(request.headers['x-api-key']) ?? /^Bearer (.*)$/.exec(headerValue(request.headers.authorization) ?? '')?.[1];
      if (options.apiKey !== undefined && presented !== options.apiKey) return sendUnauthorized(response, presented);
      const models = options.models ?? ['claude-fake'];
      return sendJson(response, 200, {
        data: models.map((id) => ({ type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' })),
        has_more: false,
        first_id: models[0] ?? null,
        last_id: models.at(-1) ?? null,
      });
    }
    if (request.method !== 'POST' || path !== '/v1/messages') {
      return sendError(response, 404, 'not_found_error', `Not found: ${request.method} ${path}`);
    }
    const body = JSON.parse(text) as Record<string, unknown>;
    const apiKey = headerValue(request.headers['x-api-key']) ?? /^Bearer (.*)$/.exec(headerValue(request.headers.authorization) ?? '')?.[1];
    const recorded = describeRequest(request.url ?? path, apiKey, body);
    requests.push(recorded);
    if (options.apiKey !== undefined && apiKey !== options.apiKey) return sendUnauthorized(response, apiKey);
    const reply = queue.shift() ?? options.respond?.(recorded) ?? {};
    sequence += 1;
    if (reply.status !== undefined) return sendError(response, reply.status, reply.status >= 500 ? 'api_error' : 'invalid_request_error', `scripted HTTP ${reply.status}`);
    const id = `msg_fake${String(sequence).padStart(4, '0')}`;
    const usage = reply.usage ?? {
      inputTokens: Math.max(1, Math.ceil(text.length / 4)),
      outputTokens: Math.max(1, Math.ceil((reply.toolUse ? JSON.stringify(reply.toolUse.input) : replyText(reply)).length / 4)),
    };
    const model = String(body.model ?? 'claude-fake');
    if (body.stream === true) return streamMessage(response, id, model, reply, usage);
    await sleep(reply.delayMs ?? 0);
    sendJson(response, 200, {
      id,
      type: 'message',
      role: 'assistant',
      model,
      content: [contentBlock(reply, sequence)],
      stop_reason: reply.toolUse ? 'tool_use' : 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: usage.inputTokens, output_tokens: usage.outputTokens },
    });
  }

  async function streamMessage(
    response: ServerResponse,
    id: string,
    model: string,
    reply: AnthropicFakeReply,
    usage: { inputTokens: number; outputTokens: number },
  ): Promise<void> {
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const send = (event: string, data: unknown) => response.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    send('message_start', {
      type: 'message_start',
      message: { id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: usage.inputTokens, output_tokens: 1 } },
    });
    if (reply.toolUse) {
      send('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: `toolu_fake${sequence}`, name: reply.toolUse.name, input: {} } });
      send('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: JSON.stringify(reply.toolUse.input) } });
    } else {
      send('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
      const chunks = reply.chunks ?? splitText(replyText(reply));
      for (const [index, chunk] of chunks.entries()) {
        if (reply.cutAfterChunks !== undefined && index >= reply.cutAfterChunks) {
          // Flush what was sent and give the client a moment to read it, as a connection dropped
          // mid-answer would: destroying at once can discard the chunks still in the socket's buffer.
          await new Promise<void>((resolve) => response.write('', () => resolve()));
          await sleep(20);
          response.destroy();
          return;
        }
        if (reply.endAfterChunks !== undefined && index >= reply.endAfterChunks) {
          response.end();
          return;
        }
        await sleep(reply.delayMs ?? 0);
        if (response.destroyed) return;
        send('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: chunk } });
      }
    }
    send('content_block_stop', { type: 'content_block_stop', index: 0 });
    send('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: reply.toolUse ? 'tool_use' : 'end_turn', stop_sequence: null },
      usage: { output_tokens: usage.outputTokens },
    });
    send('message_stop', { type: 'message_stop' });
    response.end();
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}`,
    requests,
    script: (...replies) => queue.push(...replies),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const defaultText = 'A fake answer.';

function contentBlock(reply: AnthropicFakeReply, sequence: number): Record<string, unknown> {
  return reply.toolUse
    ? { type: 'tool_use', id: `toolu_fake${sequence}`, name: reply.toolUse.name, input: reply.toolUse.input }
    : { type: 'text', text: replyText(reply) };
}

function replyText(reply: AnthropicFakeReply): string {
  return reply.json !== undefined ? JSON.stringify(reply.json) : (reply.text ?? defaultText);
}

/** Reads every message of the list, not just the last: the CLI can end the list with a `system` one. */
function describeRequest(path: string, apiKey: string | undefined, body: Record<string, unknown>): AnthropicFakeRequest {
  const texts: string[] = [];
  const toolResults: string[] = [];
  const messages = Array.isArray(body.messages) ? (body.messages as Array<{ content?: unknown }>) : [];
  for (const message of messages) {
    if (typeof message.content === 'string') {
      texts.push(message.content);
      continue;
    }
    for (const block of Array.isArray(message.content) ? (message.content as Array<Record<string, unknown>>) : []) {
      if (block.type === 'text' && typeof block.text === 'string') texts.push(block.text);
      if (block.type === 'tool_result') toolResults.push(blockText(block.content));
    }
  }
  return { path, apiKey, body, texts, toolResults, hasTools: Array.isArray(body.tools) && body.tools.length > 0 };
}

function blockText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((part: { text?: unknown }) => (typeof part.text === 'string' ? part.text : '')).join('');
  return '';
}

function splitText(text: string): string[] {
  const chunks: string[] = [];
  for (let start = 0; start < text.length; start += 12) chunks.push(text.slice(start, start + 12));
  return chunks.length > 0 ? chunks : [''];
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function sendError(response: ServerResponse, status: number, type: string, message: string): void {
  sendJson(response, status, { type: 'error', error: { type, message } });
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

function sleep(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}
