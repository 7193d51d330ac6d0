import { randomUUID } from 'node:crypto';
import { open, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { priceUsage, type Prices } from '@actor/kit';
import type { AdapterLimits } from '@actor/proto/registry';
import {
  mergeLimits,
  type Agent,
  type AgentCheckResult,
  type AgentEvent,
  type AgentRequest,
  type AgentResult,
} from '../agent.js';
import { RunRegistry, stopMessage } from '../run-registry.js';
import { spawnProcessGroup, subprocessEnvironment } from '../subprocess/process-group.js';
import { SecretRedactor } from '../subprocess/secret-redactor.js';
import { CopilotStreamParser, readCopilotUsageFile, readCopilotUsageRecord, type CopilotResult, type CopilotUsage } from './copilot-stream-parser.js';

/** The variables through which the CLI takes a GitHub token, in the CLI's order of precedence. */
export const copilotTokenVariables = ['COPILOT_GITHUB_TOKEN', 'GH_TOKEN', 'GITHUB_TOKEN'] as const;

/** The variables that hold a custom model provider's credentials (BYOK mode). */
export const copilotProviderSecretVariables = ['COPILOT_PROVIDER_API_KEY', 'COPILOT_PROVIDER_BEARER_TOKEN'] as const;

/** How a `copilot` agent runs the CLI. */
export interface CopilotAgentOptions {
  /** The adapter type, `copilot`. */
  type: string;
  /** Path of the `copilot` executable (the npm package's loader or its platform binary). */
  binaryPath: string;
  /**
   * Environment for the CLI beyond the neutral variables every subprocess gets: a GitHub token
   * (`COPILOT_GITHUB_TOKEN`, `GH_TOKEN` or `GITHUB_TOKEN`), or a custom provider (`COPILOT_PROVIDER_BASE_URL`,
   * `COPILOT_PROVIDER_TYPE`, `COPILOT_PROVIDER_API_KEY`, `COPILOT_PROVIDER_WIRE_API`...), `COPILOT_HOME`,
   * `COPILOT_OFFLINE`. A request's `environment` (bring-your-own keys) overrides it.
   */
  environment?: Record<string, string>;
  /** The model when the request names none; unset: the CLI's (or `COPILOT_MODEL`). */
  model?: string;
  /** The adapter's declared limits, merged with each caller's (the stricter wins). */
  limits: AdapterLimits;
  /** The rate card's prices, to stop a run whose usage so far already costs its whole budget. */
  prices: Prices;
  /** Where runs without a working directory run; default `<tmpdir>/actor-copilot`. */
  defaultWorkingDirectory?: string;
}

/** How much of the CLI's stderr a failed run's error message keeps. */
const stderrTailCharacters = 2_000;

/** How often a run with a budget reads the session's event log for usage, in ms. */
const usagePollMs = 200;

/**
 * Runs the GitHub Copilot CLI (`copilot`) in non-interactive mode with JSONL output, one subprocess
 * per run, in its own process group so that cancel and timeout stop it and every tool it started.
 * The prompt goes on stdin (the CLI reads a piped prompt like `-p`); the answer streams from
 * `assistant.message_delta` lines; token usage comes from `--usage-output-file` at the end and from the
 * session's event log while the run goes (for the budget stop).
 */
export class CopilotAgent implements Agent {
  readonly type: string;
  /** A custom provider's key when one is configured, else a GitHub token. */
  readonly byoKeyVariable: string;
  readonly supportsMcp = true;
  private readonly runs = new RunRegistry();

  constructor(private readonly options: CopilotAgentOptions) {
    this.type = options.type;
    this.byoKeyVariable = options.environment?.COPILOT_PROVIDER_BASE_URL ? 'COPILOT_PROVIDER_API_KEY' : 'COPILOT_GITHUB_TOKEN';
  }

  execute(request: AgentRequest, signal: AbortSignal, onEvent: (event: AgentEvent) => void): Promise<AgentResult> {
    return this.run(request, signal, onEvent).then(({ result }) => result);
  }

  /**
   * The CLI has no schema option: the prompt asks for a JSON value of the schema, and the last answer
   * message must parse as JSON and match the schema's top level (type, required properties, the
   * primitive types of declared properties), or the call fails as a backend error.
   */
  async executeWithSchema(request: AgentRequest, jsonSchema: Record<string, unknown>, signal: AbortSignal): Promise<AgentResult> {
    const prompt = `${request.prompt}\n\nAnswer with only one JSON value, no prose and no code fences, that is valid against this JSON Schema:\n${JSON.stringify(jsonSchema)}`;
    const { result, lastMessage } = await this.run({ ...request, prompt }, signal, () => {});
    if (!result.success) return result;
    const value = parseJsonAnswer(lastMessage);
    const problem = value.ok ? schemaProblem(value.value, jsonSchema) : 'the answer is not JSON';
    if (problem || !value.ok) {
      return { ...result, success: false, errorKind: 'backend', errorMessage: `${this.type}: no structured output for the schema: ${problem}` };
    }
    return { ...result, structured: value.value };
  }

  async cancel(executionId: string): Promise<void> {
    this.runs.cancel(executionId);
  }

  async healthCheck(): Promise<AgentCheckResult[]> {
    const rows: AgentCheckResult[] = [];
    const started = spawnProcessGroup(this.options.binaryPath, ['--version'], { environment: subprocessEnvironment(this.options.environment) });
    let version = '';
    started.child.stdout.on('data', (chunk: Buffer) => (version += chunk.toString('utf8')));
    started.child.stdin.end();
    const timer = setTimeout(() => started.stop(), 10_000);
    const exit = await started.closed;
    clearTimeout(timer);
    if (exit.kind === 'spawn-failed') {
      rows.push({ name: 'binary', status: 'fail', message: `cannot start ${this.options.binaryPath}: ${exit.error.code ?? exit.error.message}` });
    } else if (exit.code !== 0) {
      rows.push({ name: 'binary', status: 'fail', message: `${this.options.binaryPath} --version exited with ${exit.code ?? exit.signal}` });
    } else {
      rows.push({ name: 'binary', status: 'ok', message: `${this.options.binaryPath}: ${version.trim().split('\n')[0]}` });
    }
    const auth = authenticationOf(this.options.environment ?? {});
    rows.push({
      name: 'credentials',
      status: auth ? 'ok' : 'warn',
      message: auth ?? `no GitHub token (${copilotTokenVariables.join(', ')}) and no COPILOT_PROVIDER_BASE_URL configured: each run needs a bring-your-own token`,
    });
    return rows;
  }

  /** One run; `lastMessage` is the run's last whole answer message, redacted. */
  private async run(request: AgentRequest, signal: AbortSignal, onEvent: (event: AgentEvent) => void): Promise<{ result: AgentResult; lastMessage: string }> {
    const started = Date.now();
    const limits = mergeLimits({ timeoutMs: request.timeoutMs }, this.options.limits);
    const configured = this.options.environment ?? {};
    const redactor = SecretRedactor.forEnvironment(
      request.environment,
      ...[...copilotTokenVariables, ...copilotProviderSecretVariables].map((name) => configured[name]),
    );
    const log: string[] = [];
    const note = (message: string) => {
      const safe = redactor.redact(message);
      log.push(safe);
      onEvent({ kind: 'log', message: safe });
    };
    const parser = new CopilotStreamParser();
    let output = '';
    let final: CopilotResult | undefined;
    let sessionError: string | undefined;
    let usage: CopilotUsage = { inputTokens: 0, outputTokens: 0 };
    let stepStop: string | undefined;
    let budgetStop: string | undefined;
    const finish = (failure?: { errorKind: NonNullable<AgentResult['errorKind']>; errorMessage: string }): { result: AgentResult; lastMessage: string } => {
      const errorMessage = failure ? redactor.redact(failure.errorMessage) : undefined;
      if (errorMessage) log.push(errorMessage);
      const sessionId = final?.sessionId ?? parser.sessionId;
      const result: AgentResult = {
        success: failure === undefined,
        output: redactor.redact(output),
        ...(failure ? { errorKind: failure.errorKind, errorMessage } : {}),
        executionLog: log,
        ...(sessionId ? { sessionId } : {}),
        inputTokens: usage.inputTokens,
        outputTokens: usage.outputTokens,
        durationMs: Date.now() - started,
      };
      return { result, lastMessage: redactor.redact(parser.lastMessage) };
    };

    const run = this.runs.start(request.executionId, signal, limits.timeoutMs);
    let scratch: string | undefined;
    let stopPolling = () => {};
    try {
      if (run.stopReason()) return finish({ errorKind: run.stopReason()!, errorMessage: stopMessage(run.stopReason()!, limits.timeoutMs) });
      const environment = subprocessEnvironment({ COPILOT_AUTO_UPDATE: 'false' }, configured, request.environment);
      if (!authenticationOf(environment)) {
        return finish({
          errorKind: 'unavailable',
          errorMessage: `${this.type}: no GitHub token: set ${copilotTokenVariables.join(', ')} (or COPILOT_PROVIDER_BASE_URL for a custom provider), or send ${this.byoKeyVariable} with the request`,
        });
      }
      scratch = await mkdtemp(join(tmpdir(), 'actor-copilot-'));
      const usageFile = join(scratch, 'usage.json');
      // A new session gets an id chosen here, so that its event log can be found while it runs.
      const sessionId = request.sessionId ?? randomUUID();
      const args = ['--output-format', 'json', '--no-auto-update', '--no-ask-user', '--no-color', '--disable-client-telemetry'];
      args.push(request.sessionId ? `--resume=${request.sessionId}` : `--session-id=${sessionId}`);
      args.push('--usage-output-file', usageFile);
      // The `=` form: these options take a variable number of values and would swallow the next argument.
      for (const tool of request.allowedTools ?? []) args.push(tool === '*' ? '--allow-all-tools' : `--allow-tool=${tool}`);
      for (const tool of request.disallowedTools ?? []) args.push(`--deny-tool=${tool}`);
      const secretNames = [...copilotTokenVariables, ...copilotProviderSecretVariables].filter((name) => environment[name]);
      if (secretNames.length) args.push(`--secret-env-vars=${secretNames.join(',')}`);
      if (request.mcpConfigPath) {
        args.push('--additional-mcp-config', `@${request.mcpConfigPath}`);
      } else if (request.mcpConfig) {
        const file = join(scratch, 'mcp-config.json');
        const config = 'mcpServers' in request.mcpConfig ? request.mcpConfig : { mcpServers: request.mcpConfig };
        await writeFile(file, JSON.stringify(config), { mode: 0o600 });
        args.push('--additional-mcp-config', `@${file}`);
      }
      const model = request.model ?? this.options.model;
      if (model) args.push('--model', model);

      const cwd = request.workingDirectory ?? this.options.defaultWorkingDirectory ?? join(tmpdir(), 'actor-copilot');
      if (!request.workingDirectory) await mkdir(cwd, { recursive: true });
      note(`${this.type}: running ${this.options.binaryPath} in ${cwd}${model ? `, model ${model}` : ''}${request.sessionId ? `, resuming session ${request.sessionId}` : ''}, time limit ${limits.timeoutMs} ms`);

      const group = spawnProcessGroup(this.options.binaryPath, args, { cwd, environment });
      const onStop = () => group.stop();
      run.signal.addEventListener('abort', onStop, { once: true });

      const checkBudget = () => {
        const budget = request.maxBudgetMicroUsd;
        if (budget === undefined || budget <= 0 || budgetStop) return;
        const cost = priceUsage(this.options.prices, { ...usage, durationMs: Date.now() - started, calls: 1 });
        if (cost >= budget) {
          budgetStop = `${this.type}: the run was stopped when its cost reached its budget of ${budget} micro-USD (${cost} micro-USD for ${usage.inputTokens} input and ${usage.outputTokens} output tokens so far)`;
          group.stop();
        }
      };
      if (request.maxBudgetMicroUsd !== undefined && request.maxBudgetMicroUsd > 0) {
        const copilotHome = environment.COPILOT_HOME ?? join(environment.HOME ?? tmpdir(), '.copilot');
        stopPolling = followUsageRecords(join(copilotHome, 'session-state', sessionId, 'events.jsonl'), (record) => {
          usage = { inputTokens: usage.inputTokens + record.inputTokens, outputTokens: usage.outputTokens + record.outputTokens };
          checkBudget();
        });
      }

      const textRedactor = redactor.stream();
      const emitText = (text: string) => {
        if (!text) return;
        output += text;
        onEvent({ kind: 'output', text });
      };
      const handleLine = (line: string) => {
        for (const event of parser.parse(line)) {
          if (event.kind === 'text') emitText(textRedactor.push(event.text));
          else if (event.kind === 'log') note(event.message);
          else if (event.kind === 'error') {
            sessionError = event.message;
            note(`${this.type}: the CLI reported an error: ${event.message}`);
          } else if (event.kind === 'turn') {
            if (request.maxSteps !== undefined && request.maxSteps > 0 && event.turns > request.maxSteps && !stepStop) {
              stepStop = `${this.type}: the run was stopped at its step limit of ${request.maxSteps} model turn(s)`;
              group.stop();
            }
          } else final = event.result;
        }
      };

      let pending = '';
      const stdoutDecoder = new StringDecoder('utf8');
      group.child.stdout.on('data', (chunk: Buffer) => {
        pending += stdoutDecoder.write(chunk);
        let newline: number;
        while ((newline = pending.indexOf('\n')) >= 0) {
          handleLine(pending.slice(0, newline));
          pending = pending.slice(newline + 1);
        }
      });
      let stderr = '';
      group.child.stderr.on('data', (chunk: Buffer) => {
        stderr = (stderr + chunk.toString('utf8')).slice(-stderrTailCharacters * 2);
      });
      // The prompt goes on stdin, not argv: no length limit, and not visible to other users in `ps`.
      // The CLI has no system-prompt option, so a system prompt leads the prompt, marked as such.
      const prompt = request.systemPrompt ? `<system_instructions>\n${request.systemPrompt}\n</system_instructions>\n\n${request.prompt}` : request.prompt;
      group.child.stdin.end(prompt);

      const exit = await group.closed;
      run.signal.removeEventListener('abort', onStop);
      stopPolling();
      handleLine(pending + stdoutDecoder.end());
      emitText(textRedactor.flush());
      const reported = await readFile(usageFile, 'utf8').then(readCopilotUsageFile, () => undefined);
      if (reported) usage = reported;

      const stopped = run.stopReason();
      if (stopped) return finish({ errorKind: stopped, errorMessage: stopMessage(stopped, limits.timeoutMs) });
      if (budgetStop) return finish({ errorKind: 'budget', errorMessage: budgetStop });
      if (stepStop) return finish({ errorKind: 'backend', errorMessage: stepStop });
      if (exit.kind === 'spawn-failed') {
        return finish({
          errorKind: 'unavailable',
          errorMessage: `${this.type}: cannot start ${this.options.binaryPath}: ${exit.error.code ?? exit.error.message} (install @github/copilot or set ACTOR_COPILOT_BIN)`,
        });
      }
      if (!final) {
        const tail = stderr.trim().slice(-stderrTailCharacters);
        const how = exit.code === null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
        return finish({ errorKind: 'backend', errorMessage: `${this.type}: the CLI ${how} without a result${sessionError ? `: ${sessionError}` : ''}${tail ? `; stderr: ${tail}` : ''}` });
      }
      if (sessionError !== undefined || (final.exitCode ?? 0) !== 0 || exit.code !== 0) {
        return finish({ errorKind: 'backend', errorMessage: `${this.type}: the run ended with exit code ${final.exitCode ?? exit.code}${sessionError ? `: ${sessionError}` : ''}` });
      }
      note(`${this.type}: session ${final.sessionId ?? '(none)'}, ${usage.inputTokens} input and ${usage.outputTokens} output tokens, ${final.premiumRequests ?? '?'} premium request(s)`);
      return finish();
    } catch (error) {
      return finish({ errorKind: 'backend', errorMessage: `${this.type}: ${error instanceof Error ? error.message : String(error)}` });
    } finally {
      stopPolling();
      run.finish();
      if (scratch) await rm(scratch, { recursive: true, force: true });
    }
  }
}

/** How the CLI would authenticate with this environment, or undefined when it cannot. */
function authenticationOf(environment: Record<string, string>): string | undefined {
  if (environment.COPILOT_PROVIDER_BASE_URL) return `custom provider at ${environment.COPILOT_PROVIDER_BASE_URL}`;
  const token = copilotTokenVariables.find((name) => environment[name]);
  return token ? `${token} is configured` : undefined;
}

/**
 * Reads the lines a file gains, every `usagePollMs`, and hands on the usage records among them.
 * The file may not exist yet (the CLI creates it when the session starts). Returns the stop function.
 */
function followUsageRecords(path: string, onRecord: (usage: CopilotUsage) => void): () => void {
  let offset = 0;
  let partial = '';
  let reading = false;
  const decoder = new StringDecoder('utf8');
  const poll = async () => {
    if (reading) return;
    reading = true;
    try {
      const handle = await open(path, 'r');
      try {
        const buffer = Buffer.alloc(64 * 1024);
        for (;;) {
          const { bytesRead } = await handle.read(buffer, 0, buffer.length, offset);
          if (bytesRead === 0) break;
          offset += bytesRead;
          partial += decoder.write(buffer.subarray(0, bytesRead));
        }
      } finally {
        await handle.close();
      }
      const lines = partial.split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        const record = readCopilotUsageRecord(line);
        if (record) onRecord(record);
      }
    } catch {
      // Not there yet.
    } finally {
      reading = false;
    }
  };
  const timer = setInterval(() => void poll(), usagePollMs);
  return () => clearInterval(timer);
}

/** The JSON value of an answer, tolerating a Markdown code fence around it. */
function parseJsonAnswer(text: string): { ok: true; value: unknown } | { ok: false } {
  const trimmed = text.trim();
  const fenced = /^```(?:json)?\s*\n([\s\S]*?)\n```$/.exec(trimmed);
  try {
    return { ok: true, value: JSON.parse(fenced ? fenced[1]! : trimmed) };
  } catch {
    return { ok: false };
  }
}

/** Why a value does not match a schema's top level, or undefined when it does. */
function schemaProblem(value: unknown, schema: Record<string, unknown>): string | undefined {
  const typeOf = (item: unknown) => (item === null ? 'null' : Array.isArray(item) ? 'array' : typeof item);
  const matches = (item: unknown, type: unknown) => {
    if (typeof type !== 'string') return true;
    if (type === 'integer') return Number.isInteger(item);
    return typeOf(item) === type;
  };
  if (!matches(value, schema.type)) return `expected ${String(schema.type)}, got ${typeOf(value)}`;
  if (typeOf(value) !== 'object') return undefined;
  const record = value as Record<string, unknown>;
  for (const name of Array.isArray(schema.required) ? (schema.required as string[]) : []) {
    if (!(name in record)) return `property ${name} is missing`;
  }
  const properties = (schema.properties ?? {}) as Record<string, { type?: unknown }>;
  for (const [name, property] of Object.entries(properties)) {
    if (name in record && !matches(record[name], property?.type)) return `property ${name} should be ${String(property.type)}`;
  }
  return undefined;
}
