import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local stand-in for an OpenAI-compatible Chat Completions endpoint as coding-agent CLIs use it
 * (the Copilot CLI's BYOK mode, `COPILOT_PROVIDER_BASE_URL`): `POST /v1/chat/completions`, streamed
 * (SSE `data:` chunks: a role chunk, content deltas or `tool_calls` deltas, a chunk with the finish
 * reason, a usage chunk when `stream_options.include_usage` is set, then `data: [DONE]`) or plain, with
 * OpenAI's error body `{ error: { message, type, param, code } }`. Unlike `openai-fake-server.ts` it
 * answers with tool calls and hands each reply function the whole conversation (tool results
 * included), so that a test can drive an agent's tool round trip. Wire format:
 * https://platform.openai.com/docs/api-reference/chat-streaming
 */

/** One reply. The default is a short plain answer. */
export interface AgentFakeReply {
  /** The answer text. */
  text?: string;
  /** Instead of text: call these tools (one assistant turn ending with `finish_reason: tool_calls`). */
  toolCalls?: Array<{ name: string; arguments: Record<string, unknown> }>;
  /** Streamed text pieces; default: pieces of about 12 characters of `text`. */
  chunks?: string[];
  /** Wait before each streamed piece, in ms. */
  delayMs?: number;
  /** Token usage to report; default: about four characters a token of the request and the answer. */
  usage?: { promptTokens: number; completionTokens: number };
  /** Answer with this HTTP status and an OpenAI error body instead. */
  status?: number;
  /** The error body's message, with `status`. */
  errorMessage?: string;
}

/** A completion request as the fake saw it. */
export interface AgentFakeRequest {
  path: string;
  /** The bearer token presented, if any. */
  apiKey?: string;
  body: Record<string, unknown>;
  /** Whether the request offered tools (the agent's main conversation) or not (side calls). */
  hasTools: boolean;
  /** The text of every system and user message, in order. */
  texts: string[];
  /** The content of every `role: tool` message, in order. */
  toolResults: string[];
}

export interface OpenAiAgentFakeServerOptions {
  /** The only bearer token accepted; any other gets a 401. Unset: every token is accepted. */
  apiKey?: string;
  /** Chooses the reply to each completion request. */
  respond: (request: AgentFakeRequest) => AgentFakeReply;
}

export interface OpenAiAgentFakeServer {
  /** `http://127.0.0.1:<port>/v1`. */
  baseURL: string;
  /** Every completion request received, in order. */
  requests: AgentFakeRequest[];
  close(): Promise<void>;
}

export async function startOpenAiAgentFakeServer(options: OpenAiAgentFakeServerOptions): Promise<OpenAiAgentFakeServer> {
  const requests: AgentFakeRequest[] = [];
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
    const presented = /^Bearer (.*)$/.exec(request.headers.authorization ?? '')?.[1];
    if (options.apiKey !== undefined && presented !== options.apiKey) {
      return sendError(response, 401, `Incorrect API key provided: ${presented ?? '(none)'}.`, 'invalid_request_error', 'invalid_api_key');
    }
    if (request.method !== 'POST' || path !== '/v1/chat/completions' || !text) {
      return sendError(response, 404, `Unknown request URL: ${request.method} ${path}.`, 'invalid_request_error', 'unknown_url');
    }
    const body = JSON.parse(text) as Record<string, unknown>;
    const messages = Array.isArray(body.messages) ? (body.messages as Array<{ role?: string; content?: unknown }>) : [];
    const record: AgentFakeRequest = {
      path,
      apiKey: presented,
      body,
      hasTools: Array.isArray(body.tools) && body.tools.length > 0,
      texts: messages.filter((message) => message.role === 'system' || message.role === 'user').map((message) => contentText(message.content)),
      toolResults: messages.filter((message) => message.role === 'tool').map((message) => contentText(message.content)),
    };
    requests.push(record);
    const reply = options.respond(record);
    sequence += 1;
    if (reply.status !== undefined) {
      return sendError(response, reply.status, reply.errorMessage ?? `scripted HTTP ${reply.status}`, reply.status >= 500 ? 'server_error' : 'invalid_request_error');
    }
    const id = `chatcmpl-agentfake${sequence}`;
    return body.stream === true ? stream(response, body, reply, id, sequence) : answer(response, body, reply, id, sequence);
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((part) => (typeof part === 'object' && part !== null && typeof (part as { text?: unknown }).text === 'string' ? (part as { text: string }).text : '')).join('');
  }
  return '';
}

function toolCallsOf(reply: AgentFakeReply, sequence: number) {
  return (reply.toolCalls ?? []).map((call, index) => ({
    index,
    id: `call_fake${sequence}_${index}`,
    type: 'function' as const,
    function: { name: call.name, arguments: JSON.stringify(call.arguments) },
  }));
}

function usageOf(body: Record<string, unknown>, reply: AgentFakeReply) {
  const promptTokens = reply.usage?.promptTokens ?? Math.ceil(JSON.stringify(body.messages ?? []).length / 4);
  const completionTokens = reply.usage?.completionTokens ?? Math.max(1, Math.ceil(((reply.text ?? '') + (reply.toolCalls ? JSON.stringify(reply.toolCalls) : '')).length / 4));
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

async function answer(response: ServerResponse, body: Record<string, unknown>, reply: AgentFakeReply, id: string, sequence: number): Promise<void> {
  if (reply.delayMs) await wait(reply.delayMs);
  const toolCalls = toolCallsOf(reply, sequence).map(({ index: _index, ...call }) => call);
  sendJson(response, 200, {
    id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: String(body.model),
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: toolCalls.length ? null : (reply.text ?? 'A fake answer.'), ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
        finish_reason: toolCalls.length ? 'tool_calls' : 'stop',
      },
    ],
    usage: usageOf(body, reply),
  });
}

async function stream(response: ServerResponse, body: Record<string, unknown>, reply: AgentFakeReply, id: string, sequence: number): Promise<void> {
  const includeUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
  const created = Math.floor(Date.now() / 1000);
  const chunkOf = (choices: unknown[], usage?: unknown) => ({ id, object: 'chat.completion.chunk', created, model: String(body.model), choices, ...(usage ? { usage } : {}) });
  let closed = false;
  response.on('close', () => (closed = true));
  const send = (value: unknown) =>
    new Promise<void>((resolve) => {
      if (closed) return resolve();
      response.write(`data: ${JSON.stringify(value)}\n\n`, () => resolve());
    });

  response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
  await send(chunkOf([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]));
  const toolCalls = toolCallsOf(reply, sequence);
  if (toolCalls.length) {
    if (reply.delayMs) await wait(reply.delayMs);
    await send(chunkOf([{ index: 0, delta: { tool_calls: toolCalls }, finish_reason: null }]));
  } else {
    const text = reply.text ?? 'A fake answer.';
    for (const piece of reply.chunks ?? (text.match(/[\s\S]{1,12}/g) ?? [''])) {
      if (reply.delayMs) await wait(reply.delayMs);
      if (closed) return;
      await send(chunkOf([{ index: 0, delta: { content: piece }, finish_reason: null }]));
    }
  }
  await send(chunkOf([{ index: 0, delta: {}, finish_reason: toolCalls.length ? 'tool_calls' : 'stop' }]));
  if (includeUsage) await send(chunkOf([], usageOf(body, reply)));
  if (!closed) response.end('data: [DONE]\n\n');
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
