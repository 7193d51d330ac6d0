import { APICallError, Output, generateText, jsonSchema as toSchema, streamText, type LanguageModel } from 'ai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { estimateTokens } from '@actor/kit';
import type { AdapterLimits } from '@actor/proto/registry';
import {
  mergeLimits,
  type Agent,
  type AgentCheckResult,
  type AgentEvent,
  type AgentRequest,
  type AgentResult,
  type EffectiveLimits,
} from '../agent.js';
import { RunRegistry, stopMessage, type Run } from '../run-registry.js';

/**
 * The wire protocol an `ai-sdk` agent speaks, each through its own `ai` SDK provider instance:
 * - `openai-chat`: OpenAI Chat Completions (`POST <base>/chat/completions`), the one every
 *   OpenAI-compatible server (Ollama, vLLM, LM Studio) speaks;
 * - `openai-responses`: OpenAI's Responses API (`POST <base>/responses`);
 * - `anthropic-messages`: the Anthropic Messages API (`POST <base>/messages`).
 */
export type AiSdkApi = 'openai-chat' | 'openai-responses' | 'anthropic-messages';

/** Where and how an `ai-sdk` agent reaches its endpoint. */
export interface AiSdkAgentOptions {
  /** The adapter type, `ai-sdk:<provider>/<model>` (`ai-sdk:openai-compatible/llama3.1`, `ai-sdk:anthropic/claude-haiku-4-5`). */
  type: string;
  /**
   * The endpoint's base URL, up to and including `/v1` (`https://api.openai.com/v1`,
   * `https://api.anthropic.com/v1`).
   */
  baseURL: string;
  /** The endpoint's API key; kept in memory only and removed from every message the agent returns. */
  apiKey: string;
  /** The model id the endpoint serves. */
  model: string;
  /** Provider name the SDK reports (`openai-compatible`); ignored for `anthropic-messages`, whose provider keeps its own. */
  providerName: string;
  /** The wire protocol; default `openai-chat`. */
  api?: AiSdkApi;
  /** The adapter's declared limits, merged with each caller's (the stricter wins). */
  limits: AdapterLimits;
  /** How long the health check waits for `GET /models`, in ms; default 3 000. */
  healthTimeoutMs?: number;
}

/**
 * An adapter over the `ai` SDK for OpenAI (Chat Completions or Responses), Anthropic (Messages) and
 * any server that speaks OpenAI Chat Completions (Ollama, vLLM, LM Studio). It always uses an
 * explicit provider instance: a bare model string would route to a hosted gateway over the network.
 * `request.model` is not consulted: the adapter type names its one model, and its rate card prices
 * that model.
 */
export class AiSdkAgent implements Agent {
  readonly type: string;
  /**
   * A bring-your-own key arrives as `request.environment.OPENAI_API_KEY` (`ANTHROPIC_API_KEY` for
   * Anthropic) and replaces the configured one for that request.
   */
  readonly byoKeyVariable: string;
  private readonly runs = new RunRegistry();
  private readonly model: LanguageModel;
  private readonly baseURL: string;
  private readonly api: AiSdkApi;

  constructor(private readonly options: AiSdkAgentOptions) {
    this.type = options.type;
    this.api = options.api ?? 'openai-chat';
    this.byoKeyVariable = byoKeyVariableFor(this.api);
    this.baseURL = options.baseURL.replace(/\/+$/, '');
    this.model = this.languageModel(options.apiKey);
  }

  private languageModel(apiKey: string): LanguageModel {
    switch (this.api) {
      case 'anthropic-messages':
        // No `name`: the Anthropic provider reads its provider options under its own name only.
        return createAnthropic({ baseURL: this.baseURL, apiKey }).languageModel(this.options.model);
      case 'openai-responses':
        return createOpenAI({ baseURL: this.baseURL, apiKey, name: this.options.providerName }).responses(this.options.model);
      case 'openai-chat':
        return createOpenAI({ baseURL: this.baseURL, apiKey, name: this.options.providerName }).chat(this.options.model);
    }
  }

  /** The model for one request: with the request's own key (`environment[byoKeyVariable]`) when it brings one. */
  private modelFor(request: AgentRequest): LanguageModel {
    const byoKey = request.environment?.[this.byoKeyVariable];
    return byoKey ? this.languageModel(byoKey) : this.model;
  }

  async execute(request: AgentRequest, signal: AbortSignal, onEvent: (event: AgentEvent) => void): Promise<AgentResult> {
    return this.withRun(request, signal, async (run, limits, log) => {
      let output = '';
      let streamError: unknown;
      let finished: { complete: boolean; finishReason: string; inputTokens?: number; outputTokens?: number } | undefined;
      try {
        const result = streamText({
          model: this.modelFor(request),
          system: request.systemPrompt,
          prompt: request.prompt,
          maxOutputTokens: limits.maxOutputTokens,
          abortSignal: run.signal,
          // No retries inside the adapter: the engine fails over to another backend at once, and a
          // retry here would spend the caller's time limit on a backend that just failed.
          maxRetries: 0,
          onError: () => {},
        });
        for await (const part of result.fullStream) {
          if (part.type === 'text-delta' && part.text.length > 0) {
            output += part.text;
            onEvent({ kind: 'output', text: part.text });
          } else if (part.type === 'error') {
            streamError ??= part.error;
          } else if (part.type === 'finish') {
            finished = {
              complete: modelFinished(part.finishReason, part.rawFinishReason),
              finishReason: part.finishReason,
              inputTokens: part.totalUsage.inputTokens,
              outputTokens: part.totalUsage.outputTokens,
            };
          }
        }
      } catch (error) {
        streamError ??= error;
      }
      if (run.stopReason()) return { output };
      if (streamError !== undefined) return { output, failure: this.describeFailure(streamError, output, request) };
      // A stream that ends without the model's finish reason was cut short: never a success.
      if (!finished?.complete) {
        return { output, failure: { errorKind: 'backend', errorMessage: `${this.type}: the stream ended before the model finished its answer` } };
      }
      // `length` is the SDK's name for each vendor's own (`length`, `max_tokens`, `max_output_tokens`).
      if (finished.finishReason === 'length') log.push(`${this.type}: the answer reached the output token limit`);
      return { output, usage: this.reportedUsage(finished, log) };
    });
  }

  async executeWithSchema(request: AgentRequest, jsonSchema: Record<string, unknown>, signal: AbortSignal): Promise<AgentResult> {
    return this.withRun(request, signal, async (run, limits, log) => {
      try {
        const result = await generateText({
          model: this.modelFor(request),
          system: request.systemPrompt,
          prompt: request.prompt,
          maxOutputTokens: limits.maxOutputTokens,
          abortSignal: run.signal,
          maxRetries: 0,
          output: Output.object({ schema: toSchema(jsonSchema) }),
          // Strict mode refuses schemas with open objects or optional properties on OpenAI, and many
          // compatible servers do not know it; the schema still goes to the model as its guide.
          providerOptions: { openai: { strictJsonSchema: false } },
        });
        return {
          output: result.text,
          structured: result.output,
          usage: this.reportedUsage({ inputTokens: result.totalUsage.inputTokens, outputTokens: result.totalUsage.outputTokens }, log),
        };
      } catch (error) {
        if (run.stopReason()) return { output: '' };
        return { output: '', failure: this.describeFailure(error, '', request) };
      }
    });
  }

  async cancel(executionId: string): Promise<void> {
    this.runs.cancel(executionId);
  }

  async healthCheck(): Promise<AgentCheckResult[]> {
    const rows: AgentCheckResult[] = [];
    if (!this.options.apiKey) {
      rows.push({ name: 'api-key', status: 'fail', message: 'no API key is configured' });
    } else {
      rows.push({ name: 'api-key', status: 'ok', message: 'an API key is configured' });
    }
    const url = `${this.baseURL}/models`;
    // Both vendors list models at `<base>/models` with the same `data[].id` shape; only the auth differs.
    const headers: Record<string, string> =
      this.api === 'anthropic-messages'
        ? { 'x-api-key': this.options.apiKey, 'anthropic-version': anthropicVersion }
        : { authorization: `Bearer ${this.options.apiKey}` };
    try {
      const response = await fetch(url, {
        headers,
        signal: AbortSignal.timeout(this.options.healthTimeoutMs ?? 3_000),
      });
      if (response.status === 401 || response.status === 403) {
        rows.push({ name: 'endpoint', status: 'fail', message: `GET ${url} refused the API key (HTTP ${response.status})` });
      } else if (!response.ok) {
        rows.push({ name: 'endpoint', status: 'fail', message: `GET ${url} answered HTTP ${response.status}` });
      } else {
        const listed = await listedModels(response);
        if (listed === undefined || listed.includes(this.options.model)) {
          rows.push({ name: 'endpoint', status: 'ok', message: `GET ${url} answered HTTP ${response.status}` });
        } else {
          rows.push({ name: 'endpoint', status: 'warn', message: `GET ${url} answered, but does not list the model ${this.options.model}` });
        }
      }
    } catch (error) {
      rows.push({ name: 'endpoint', status: 'fail', message: `GET ${url} failed: ${this.redact(networkReason(error))}` });
    }
    return rows;
  }

  /** The shared frame of both calls: limits, cancel/timeout, usage and the result's shape. */
  private async withRun(
    request: AgentRequest,
    signal: AbortSignal,
    body: (run: Run, limits: EffectiveLimits, log: string[]) => Promise<RunOutcome>,
  ): Promise<AgentResult> {
    const started = Date.now();
    const log: string[] = [`${this.type}: POST ${this.baseURL}/${endpointPath[this.api]} (model ${this.options.model})`];
    const limits = mergeLimits({ timeoutMs: request.timeoutMs }, this.options.limits);
    const estimatedInput = estimateTokens(`${request.systemPrompt ?? ''}${request.prompt}`);
    if (limits.contextTokens !== undefined && estimatedInput > limits.contextTokens) {
      return {
        success: false,
        output: '',
        errorKind: 'backend',
        errorMessage: `the prompt (~${estimatedInput} tokens) exceeds ${this.type}'s context of ${limits.contextTokens} tokens`,
        executionLog: log,
        inputTokens: 0,
        outputTokens: 0,
        durationMs: Date.now() - started,
      };
    }
    const run = this.runs.start(request.executionId, signal, limits.timeoutMs);
    let outcome: RunOutcome;
    try {
      outcome = await body(run, limits, log);
    } finally {
      run.finish();
    }
    const stopped = run.stopReason();
    const failure = stopped ? { errorKind: stopped, errorMessage: stopMessage(stopped, limits.timeoutMs) } : outcome.failure;
    // A failed call reports no usage; what was sent and received is the best estimate of the bill.
    const inputTokens = outcome.usage?.inputTokens ?? estimatedInput;
    const outputTokens = outcome.usage?.outputTokens ?? estimateTokens(outcome.output);
    if (failure) log.push(failure.errorMessage);
    return {
      success: failure === undefined,
      output: outcome.output,
      ...failure,
      executionLog: log,
      inputTokens,
      outputTokens,
      durationMs: Date.now() - started,
      ...(failure === undefined && outcome.structured !== undefined ? { structured: outcome.structured } : {}),
    };
  }

  /** Usage as the endpoint reported it, estimated (and logged as such) when it reported none. */
  private reportedUsage(usage: { inputTokens?: number; outputTokens?: number }, log: string[]) {
    if (usage.inputTokens === undefined || usage.outputTokens === undefined) {
      log.push(`${this.type}: the endpoint reported no token usage; the usage is estimated`);
    }
    return { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens };
  }

  private describeFailure(error: unknown, output: string, request: AgentRequest): NonNullable<RunOutcome['failure']> {
    const failure = this.describeFailureUnredacted(error, output);
    // A bring-your-own key is as secret as the configured one: the endpoint may echo either.
    const byoKey = request.environment?.[this.byoKeyVariable];
    return byoKey ? { ...failure, errorMessage: failure.errorMessage.split(byoKey).join('[redacted]') } : failure;
  }

  private describeFailureUnredacted(error: unknown, output: string): NonNullable<RunOutcome['failure']> {
    const statusCode = APICallError.isInstance(error) ? error.statusCode : undefined;
    const message = error instanceof Error ? error.message : String(error);
    if (statusCode !== undefined && statusCode >= 400) {
      const hint = statusCode === 401 || statusCode === 403 ? ' (check the API key)' : '';
      return { errorKind: 'backend', errorMessage: this.redact(`${this.type}: the endpoint answered HTTP ${statusCode}${hint}: ${message}`) };
    }
    if (output.length === 0 && statusCode === undefined && connectionRefusedCodes.has(errorCode(error) ?? '')) {
      return { errorKind: 'unavailable', errorMessage: this.redact(`${this.type}: cannot reach ${this.baseURL}: ${rootMessage(error)}`) };
    }
    if (statusCode !== undefined || output.length > 0) {
      return {
        errorKind: 'backend',
        errorMessage: this.redact(`${this.type}: the answer stream broke off after ${output.length} characters: ${rootMessage(error)}`),
      };
    }
    return { errorKind: 'backend', errorMessage: this.redact(`${this.type}: the call failed: ${rootMessage(error)}`) };
  }

  /** Removes the API key from text meant for logs, events and callers. */
  private redact(text: string): string {
    const key = this.options.apiKey;
    return key ? text.split(key).join('[redacted]') : text;
  }
}

/** The request environment variable that carries a bring-your-own key for an OpenAI or OpenAI-compatible endpoint. */
export const byoKeyVariable = 'OPENAI_API_KEY';

/** The request environment variable that carries a bring-your-own key for an Anthropic endpoint. */
export const anthropicByoKeyVariable = 'ANTHROPIC_API_KEY';

function byoKeyVariableFor(api: AiSdkApi): string {
  return api === 'anthropic-messages' ? anthropicByoKeyVariable : byoKeyVariable;
}

/** The path under the base URL each protocol posts to, for the run log. */
const endpointPath: Record<AiSdkApi, string> = {
  'openai-chat': 'chat/completions',
  'openai-responses': 'responses',
  'anthropic-messages': 'messages',
};

/** The `anthropic-version` header the health check sends, as the Anthropic provider does. */
const anthropicVersion = '2023-06-01';

/**
 * Whether the stream's finish part says the model finished, rather than the stream ending early.
 * The SDK starts every stream at finish reason `other` with no raw reason and changes it only when
 * the provider's closing event arrives (Chat's `finish_reason`, Responses' `response.completed`,
 * Anthropic's `message_delta`). A completed Responses call keeps no raw reason, so the unified one
 * must be read too.
 */
function modelFinished(finishReason: string, rawFinishReason: string | undefined): boolean {
  return rawFinishReason !== undefined || finishReason !== 'other';
}

interface RunOutcome {
  output: string;
  structured?: unknown;
  usage?: { inputTokens?: number; outputTokens?: number };
  failure?: { errorKind: NonNullable<AgentResult['errorKind']>; errorMessage: string };
}

async function listedModels(response: Response): Promise<string[] | undefined> {
  try {
    const body = (await response.json()) as { data?: { id?: unknown }[] };
    return Array.isArray(body.data) ? body.data.map((model) => String(model.id)) : undefined;
  } catch {
    return undefined;
  }
}

/** Errors that mean the endpoint was never reached (as opposed to a connection lost mid-answer). */
const connectionRefusedCodes = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/** The first `code` along an error's cause chain (`ECONNREFUSED`, `UND_ERR_SOCKET`). */
function errorCode(error: unknown): string | undefined {
  for (let current = error, depth = 0; current instanceof Object && depth < 5; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The innermost message of an error's cause chain: `other side closed` beats `Failed to process ...`. */
function rootMessage(error: unknown): string {
  let message = error instanceof Error ? error.message : String(error);
  for (let current = error, depth = 0; current instanceof Error && depth < 5; depth += 1) {
    message = current.message || message;
    current = current.cause;
  }
  return message;
}

function networkReason(error: unknown): string {
  if (error instanceof Error) {
    if (error.name === 'TimeoutError') return 'no answer in time';
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return cause?.code ?? cause?.message ?? error.message;
  }
  return String(error);
}
