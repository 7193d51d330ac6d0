import { APICallError, Output, generateText, jsonSchema as toSchema, streamText, type LanguageModel } from 'ai';
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

/** Where and how an `ai-sdk` agent reaches its OpenAI-compatible endpoint. */
export interface AiSdkAgentOptions {
  /** The adapter type, `ai-sdk:openai-compatible/<model>`. */
  type: string;
  /** The endpoint's base URL, up to and including `/v1` (`https://api.openai.com/v1`). */
  baseURL: string;
  /** The endpoint's API key; kept in memory only and removed from every message the agent returns. */
  apiKey: string;
  /** The model id the endpoint serves. */
  model: string;
  /** Provider name the SDK reports (`openai-compatible`). */
  providerName: string;
  /** The adapter's declared limits, merged with each caller's (the stricter wins). */
  limits: AdapterLimits;
  /** How long the health check waits for `GET /models`, in ms; default 3 000. */
  healthTimeoutMs?: number;
}

/**
 * An adapter over the `ai` SDK for any server that speaks OpenAI Chat Completions (OpenAI, Ollama,
 * vLLM, LM Studio). It always uses an explicit provider instance: a bare model string would route
 * to a hosted gateway over the network. `request.model` is not consulted: the adapter type names its
 * one model, and its rate card prices that model.
 */
export class AiSdkAgent implements Agent {
  readonly type: string;
  /** A bring-your-own key arrives as `request.environment.OPENAI_API_KEY` and replaces the configured one. */
  readonly byoKeyVariable = byoKeyVariable;
  private readonly runs = new RunRegistry();
  private readonly model: LanguageModel;
  private readonly baseURL: string;

  constructor(private readonly options: AiSdkAgentOptions) {
    this.type = options.type;
    this.baseURL = options.baseURL.replace(/\/+$/, '');
    this.model = this.chatModel(options.apiKey);
  }

  private chatModel(apiKey: string): LanguageModel {
    const provider = createOpenAI({ baseURL: this.baseURL, apiKey, name: this.options.providerName });
    // Chat Completions, not the Responses API: it is the one every compatible server speaks.
    return provider.chat(this.options.model);
  }

  /** The model for one request: with the request's own key (`environment.OPENAI_API_KEY`) when it brings one. */
  private modelFor(request: AgentRequest): LanguageModel {
    const byoKey = request.environment?.[byoKeyVariable];
    return byoKey ? this.chatModel(byoKey) : this.model;
  }

  async execute(request: AgentRequest, signal: AbortSignal, onEvent: (event: AgentEvent) => void): Promise<AgentResult> {
    return this.withRun(request, signal, async (run, limits, log) => {
      let output = '';
      let streamError: unknown;
      let finished: { rawFinishReason: string | undefined; inputTokens?: number; outputTokens?: number } | undefined;
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
              rawFinishReason: part.rawFinishReason,
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
      if (finished?.rawFinishReason === undefined) {
        return { output, failure: { errorKind: 'backend', errorMessage: `${this.type}: the stream ended before the model finished its answer` } };
      }
      if (finished.rawFinishReason === 'length') log.push(`${this.type}: the answer reached the output token limit`);
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
    try {
      const response = await fetch(url, {
        headers: { authorization: `Bearer ${this.options.apiKey}` },
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
    const log: string[] = [`${this.type}: POST ${this.baseURL}/chat/completions (model ${this.options.model})`];
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
    const byoKey = request.environment?.[byoKeyVariable];
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

/** The request environment variable that carries a bring-your-own key for the endpoint. */
export const byoKeyVariable = 'OPENAI_API_KEY';

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
