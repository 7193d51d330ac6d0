import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local stand-in for the OpenAI API that speaks the real Chat Completions wire format
 * (https://platform.openai.com/docs/api-reference/chat), as `@ai-sdk/openai`'s chat model parses it:
 * `POST /v1/chat/completions` plain and streaming (SSE `data:` lines, a usage chunk when
 * `stream_options.include_usage` is set, then `data: [DONE]`), `GET /v1/models`, and OpenAI's error
 * body `{ error: { message, type, param, code } }`. Tests script the replies and read back the requests.
 *
 * It also speaks the Responses API (https://platform.openai.com/docs/api-reference/responses):
 * `POST /v1/responses` answers a `response` object (`output[]` with one assistant `message` whose
 * content is an `output_text` part, `usage { input_tokens, output_tokens, ... }`), or with
 * `stream: true` the semantic SSE events (`event:` + `data:` pairs, each with a `sequence_number`):
 * `response.created`, `response.in_progress`, `response.output_item.added`,
 * `response.content_part.added`, `response.output_text.delta`..., `response.output_text.done`,
 * `response.content_part.done`, `response.output_item.done`, then `response.completed` carrying the
 * whole response with its usage (`response.incomplete` when `finishReason` is `max_output_tokens`).
 * That stream has no `[DONE]` line. The same `FakeReply` scripts both APIs (`promptTokens` is reported
 * as `input_tokens`, `completionTokens` as `output_tokens`).
 */

/** One scripted reply. Everything is optional; the default is a short plain answer. */
export interface FakeReply {
  /** The answer text (ignored when `json` is set). */
  content?: string;
  /** For structured-output calls: the value whose JSON text is the answer. */
  json?: unknown;
  /** How the streamed answer is split; default: pieces of about 12 characters. */
  chunks?: string[];
  /** Wait before each streamed chunk (and before a non-streamed answer), in ms. */
  delayMs?: number;
  /** Token usage to report; default: about four characters a token of the prompt and the answer. */
  usage?: { promptTokens: number; completionTokens: number };
  /** `stop` unless set. On the Responses API any other value (`max_output_tokens`) makes the response `incomplete` with that reason. */
  finishReason?: string;
  /** Answer with this HTTP status and an OpenAI error body instead. */
  status?: number;
  /** The error body's message, with `status`. */
  errorMessage?: string;
  /** Streaming only: destroy the socket after sending this many content chunks. */
  cutAfterChunks?: number;
  /** Streaming only: end the response cleanly (as a proxy timing out might) after this many content chunks, with no finish chunk and no `[DONE]`. */
  endAfterChunks?: number;
}

/** A request the fake received. */
export interface FakeRequestRecord {
  method: string;
  path: string;
  authorization?: string;
  body?: Record<string, unknown>;
}

export interface OpenAiFakeServerOptions {
  /** The key the fake accepts; any other bearer token gets a 401. Unset: every token is accepted. */
  apiKey?: string;
  /** Model ids `GET /v1/models` lists; default `['fake-model']`. */
  models?: string[];
  /** Chooses a reply for a completion request when the scripted queue is empty. */
  respond?: (body: Record<string, unknown>) => FakeReply;
  /**
   * When set, the fake also answers Ollama's own `GET /api/tags` (no key asked) with these models,
   * as an Ollama server does beside its OpenAI-compatible `/v1` API. See ollama-fake-server.ts.
   */
  ollamaTags?: () => unknown;
}

export interface OpenAiFakeServer {
  /** `http://127.0.0.1:<port>/v1`, the base URL a client is given. */
  baseURL: string;
  /** Every request received, in order. */
  requests: FakeRequestRecord[];
  /** Queues replies for the next completion requests, first in first out. */
  script(...replies: FakeReply[]): void;
  close(): Promise<void>;
}

export async function startOpenAiFakeServer(options: OpenAiFakeServerOptions = {}): Promise<OpenAiFakeServer> {
  const queue: FakeReply[] = [];
  const requests: FakeRequestRecord[] = [];
  let sequence = 0;

  const server = createServer((request, response) => {
    void handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) sendError(response, 500, `fake server error: ${String(error)}`, 'server_error');
      else response.destroy();
    });
  });

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = (request.url ?? '/').split('?')[0] ?? '/';
    const text = await readBody(request);
    const body = text ? (JSON.parse(text) as Record<string, unknown>) : undefined;
    requests.push({ method: request.method ?? 'GET', path, authorization: request.headers.authorization, body });

    if (options.ollamaTags && request.method === 'GET' && path === '/api/tags') return sendJson(response, 200, options.ollamaTags());
    const presented = /^Bearer (.*)$/.exec(request.headers.authorization ?? '')?.[1];
    if (options.apiKey !== undefined && presented !== options.apiKey) {
      // OpenAI echoes (part of) the presented key in this message; echoing all of it lets tests
      // prove that an adapter never passes a key on in its errors.
      return sendError(response, 401, `Incorrect API key provided: ${presented ?? '(none)'}.`, 'invalid_request_error', 'invalid_api_key');
    }
    if (request.method === 'GET' && path === '/v1/models') {
      return sendJson(response, 200, {
        object: 'list',
        data: (options.models ?? ['fake-model']).map((id) => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'fake' })),
      });
    }
    if (request.method === 'POST' && path === '/v1/responses' && body) {
      const reply = queue.shift() ?? options.respond?.(body) ?? {};
      sequence += 1;
      const id = `resp_fake${String(sequence).padStart(4, '0')}`;
      return reply.status !== undefined
        ? sendError(response, reply.status, reply.errorMessage ?? `scripted HTTP ${reply.status}`, reply.status >= 500 ? 'server_error' : 'invalid_request_error')
        : body.stream === true
          ? streamResponse(response, body, reply, id)
          : answerResponse(response, body, reply, id);
    }
    if (request.method === 'POST' && path === '/v1/chat/completions' && body) {
      const reply = queue.shift() ?? options.respond?.(body) ?? {};
      sequence += 1;
      return reply.status !== undefined
        ? sendError(response, reply.status, reply.errorMessage ?? `scripted HTTP ${reply.status}`, reply.status >= 500 ? 'server_error' : 'invalid_request_error')
        : body.stream === true
          ? streamCompletion(response, body, reply, `chatcmpl-fake${sequence}`)
          : answerCompletion(response, body, reply, `chatcmpl-fake${sequence}`);
    }
    sendError(response, 404, `Unknown request URL: ${request.method} ${path}.`, 'invalid_request_error', 'unknown_url');
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    script: (...replies) => queue.push(...replies),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function answerText(reply: FakeReply): string {
  return reply.json !== undefined ? JSON.stringify(reply.json) : (reply.content ?? 'A fake answer.');
}

function usageOf(body: Record<string, unknown>, reply: FakeReply, answer: string) {
  const promptTokens = reply.usage?.promptTokens ?? Math.ceil(JSON.stringify(body.messages ?? []).length / 4);
  const completionTokens = reply.usage?.completionTokens ?? Math.ceil(answer.length / 4);
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
}

async function answerCompletion(response: ServerResponse, body: Record<string, unknown>, reply: FakeReply, id: string): Promise<void> {
  const answer = answerText(reply);
  if (reply.delayMs) await wait(reply.delayMs);
  if (response.socket === null || response.socket.destroyed) return;
  sendJson(response, 200, {
    id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: String(body.model),
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: answer, refusal: null, annotations: [] },
        logprobs: null,
        finish_reason: reply.finishReason ?? 'stop',
      },
    ],
    usage: usageOf(body, reply, answer),
    service_tier: 'default',
    system_fingerprint: 'fp_fake',
  });
}

async function streamCompletion(response: ServerResponse, body: Record<string, unknown>, reply: FakeReply, id: string): Promise<void> {
  const answer = answerText(reply);
  const chunks = reply.chunks ?? (answer.match(/[\s\S]{1,12}/g) ?? ['']);
  const includeUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
  const created = Math.floor(Date.now() / 1000);
  const chunkOf = (choices: unknown[], usage?: unknown) => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model: String(body.model),
    service_tier: 'default',
    system_fingerprint: 'fp_fake',
    choices,
    ...(includeUsage ? { usage: usage ?? null } : {}),
  });
  let closed = false;
  response.on('close', () => (closed = true));
  // Resolves once the chunk is handed to the socket, so a cut after it really delivers it first.
  const send = (value: unknown) =>
    new Promise<void>((resolve) => {
      if (closed) return resolve();
      response.write(`data: ${JSON.stringify(value)}\n\n`, () => resolve());
    });

  response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
  await send(chunkOf([{ index: 0, delta: { role: 'assistant', content: '', refusal: null }, logprobs: null, finish_reason: null }]));
  for (const [index, chunk] of chunks.entries()) {
    if (reply.cutAfterChunks !== undefined && index >= reply.cutAfterChunks) {
      // Give the client a moment to read what was sent, as a connection dropped mid-answer would.
      await wait(20);
      response.destroy();
      return;
    }
    if (reply.endAfterChunks !== undefined && index >= reply.endAfterChunks) {
      if (!closed) response.end();
      return;
    }
    if (reply.delayMs) await wait(reply.delayMs);
    if (closed) return;
    await send(chunkOf([{ index: 0, delta: { content: chunk }, logprobs: null, finish_reason: null }]));
  }
  await send(chunkOf([{ index: 0, delta: {}, logprobs: null, finish_reason: reply.finishReason ?? 'stop' }]));
  if (includeUsage) await send(chunkOf([], usageOf(body, reply, answer)));
  if (!closed) response.end('data: [DONE]\n\n');
}

/** The Responses API's `usage` object. */
function responsesUsageOf(body: Record<string, unknown>, reply: FakeReply, answer: string) {
  const inputTokens = reply.usage?.promptTokens ?? Math.ceil(JSON.stringify(body.input ?? []).length / 4);
  const outputTokens = reply.usage?.completionTokens ?? Math.ceil(answer.length / 4);
  return {
    input_tokens: inputTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: inputTokens + outputTokens,
  };
}

/**
 * A Responses API `response` object. `finishReason` other than `stop` makes it `incomplete` with that
 * reason (`max_output_tokens`, `content_filter`), as the API reports a cut answer.
 */
function responseObject(body: Record<string, unknown>, reply: FakeReply, id: string, createdAt: number, status: 'in_progress' | 'final') {
  const answer = answerText(reply);
  const incomplete = reply.finishReason !== undefined && reply.finishReason !== 'stop';
  const done = status === 'final';
  return {
    id,
    object: 'response',
    created_at: createdAt,
    status: done ? (incomplete ? 'incomplete' : 'completed') : 'in_progress',
    error: null,
    incomplete_details: done && incomplete ? { reason: reply.finishReason } : null,
    model: String(body.model),
    output: done ? [messageItem(id, answer)] : [],
    parallel_tool_calls: true,
    text: body.text ?? { format: { type: 'text' } },
    usage: done ? responsesUsageOf(body, reply, answer) : null,
    service_tier: 'default',
  };
}

function messageItem(responseId: string, text: string) {
  return {
    type: 'message',
    id: `msg_${responseId}`,
    status: 'completed',
    role: 'assistant',
    content: [{ type: 'output_text', text, annotations: [], logprobs: [] }],
  };
}

async function answerResponse(response: ServerResponse, body: Record<string, unknown>, reply: FakeReply, id: string): Promise<void> {
  if (reply.delayMs) await wait(reply.delayMs);
  if (response.socket === null || response.socket.destroyed) return;
  sendJson(response, 200, responseObject(body, reply, id, Math.floor(Date.now() / 1000), 'final'));
}

async function streamResponse(response: ServerResponse, body: Record<string, unknown>, reply: FakeReply, id: string): Promise<void> {
  const answer = answerText(reply);
  const chunks = reply.chunks ?? (answer.match(/[\s\S]{1,12}/g) ?? ['']);
  const createdAt = Math.floor(Date.now() / 1000);
  const itemId = `msg_${id}`;
  let sequenceNumber = 0;
  let closed = false;
  response.on('close', () => (closed = true));
  // Resolves once the event is handed to the socket, so a cut after it really delivers it first.
  const send = (type: string, fields: Record<string, unknown>) =>
    new Promise<void>((resolve) => {
      if (closed) return resolve();
      const event = { type, sequence_number: sequenceNumber++, ...fields };
      response.write(`event: ${type}\ndata: ${JSON.stringify(event)}\n\n`, () => resolve());
    });

  response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const started = responseObject(body, reply, id, createdAt, 'in_progress');
  await send('response.created', { response: started });
  await send('response.in_progress', { response: started });
  await send('response.output_item.added', { output_index: 0, item: { type: 'message', id: itemId, status: 'in_progress', role: 'assistant', content: [] } });
  await send('response.content_part.added', { item_id: itemId, output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
  for (const [index, chunk] of chunks.entries()) {
    if (reply.cutAfterChunks !== undefined && index >= reply.cutAfterChunks) {
      await wait(20);
      response.destroy();
      return;
    }
    if (reply.endAfterChunks !== undefined && index >= reply.endAfterChunks) {
      if (!closed) response.end();
      return;
    }
    if (reply.delayMs) await wait(reply.delayMs);
    if (closed) return;
    await send('response.output_text.delta', { item_id: itemId, output_index: 0, content_index: 0, delta: chunk, logprobs: [] });
  }
  await send('response.output_text.done', { item_id: itemId, output_index: 0, content_index: 0, text: answer, logprobs: [] });
  await send('response.content_part.done', { item_id: itemId, output_index: 0, content_index: 0, part: { type: 'output_text', text: answer, annotations: [] } });
  await send('response.output_item.done', { output_index: 0, item: messageItem(id, answer) });
  const final = responseObject(body, reply, id, createdAt, 'final');
  await send(final.status === 'completed' ? 'response.completed' : 'response.incomplete', { response: final });
  if (!closed) response.end();
}

function sendJson(response: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  response.end(text);
}

function sendError(response: ServerResponse, status: number, message: string, type: string, code: string | null = null): void {
  sendJson(response, status, { error: { message, type, param: null, code } });
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    request.on('data', (part: Buffer) => parts.push(part));
    request.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    request.on('error', reject);
  });
}

function wait(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
