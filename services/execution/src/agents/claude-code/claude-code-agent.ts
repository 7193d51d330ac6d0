import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
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
import { ClaudeCodeStreamParser, type ClaudeCodeResult, type ClaudeCodeUsage } from './claude-code-stream-parser.js';

/** How a `claude-code` agent runs the CLI. */
export interface ClaudeCodeAgentOptions {
  /** The adapter type, `claude-code`. */
  type: string;
  /** Path of the `claude` executable. */
  binaryPath: string;
  /**
   * Environment for the CLI beyond the neutral variables every subprocess gets: `ANTHROPIC_API_KEY`,
   * `ANTHROPIC_BASE_URL`, `CLAUDE_CONFIG_DIR`. A request's `environment` (bring-your-own keys) overrides it.
   */
  environment?: Record<string, string>;
  /** The model when the request names none; unset: the CLI's default. */
  model?: string;
  /** The adapter's declared limits, merged with each caller's (the stricter wins). */
  limits: AdapterLimits;
  /** The rate card's prices, to stop a run whose streamed usage already costs its whole budget. */
  prices: Prices;
  /** Where runs without a working directory run; default `<tmpdir>/actor-claude-code`. Stable, so sessions resume. */
  defaultWorkingDirectory?: string;
}

/** How much of the CLI's stderr a failed run's error message keeps. */
const stderrTailCharacters = 2_000;

/**
 * Runs the `claude` CLI (Claude Code) in print mode with stream-json output, one subprocess per run,
 * in its own process group so that cancel and timeout stop it and every tool it started.
 */
export class ClaudeCodeAgent implements Agent {
  readonly type: string;
  /** A bring-your-own key arrives as `request.environment.ANTHROPIC_API_KEY` and overrides the configured one. */
  readonly byoKeyVariable = 'ANTHROPIC_API_KEY';
  /** `mcpConfigPath` (or `mcpConfig`) becomes `--mcp-config <file> --strict-mcp-config`. */
  readonly supportsMcp = true;
  private readonly runs = new RunRegistry();

  constructor(private readonly options: ClaudeCodeAgentOptions) {
    this.type = options.type;
  }

  execute(request: AgentRequest, signal: AbortSignal, onEvent: (event: AgentEvent) => void): Promise<AgentResult> {
    return this.run(request, signal, onEvent);
  }

  /** Uses the CLI's `--json-schema`: the model answers through its StructuredOutput tool. */
  async executeWithSchema(request: AgentRequest, jsonSchema: Record<string, unknown>, signal: AbortSignal): Promise<AgentResult> {
    const result = await this.run(request, signal, () => {}, jsonSchema);
    if (!result.success || result.structured !== undefined) return result;
    return { ...result, success: false, errorKind: 'backend', errorMessage: `${this.type}: the CLI returned no structured output for the schema` };
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
      rows.push({ name: 'binary', status: 'ok', message: `${this.options.binaryPath}: ${version.trim()}` });
    }
    const keyed = Boolean(this.options.environment?.ANTHROPIC_API_KEY);
    rows.push({
      name: 'api-key',
      status: keyed ? 'ok' : 'warn',
      message: keyed ? 'ANTHROPIC_API_KEY is configured' : 'no ANTHROPIC_API_KEY configured: each run needs a bring-your-own key',
    });
    return rows;
  }

  private async run(
    request: AgentRequest,
    signal: AbortSignal,
    onEvent: (event: AgentEvent) => void,
    jsonSchema?: Record<string, unknown>,
  ): Promise<AgentResult> {
    const started = Date.now();
    const limits = mergeLimits({ timeoutMs: request.timeoutMs }, this.options.limits);
    const redactor = SecretRedactor.forEnvironment(request.environment, this.options.environment?.ANTHROPIC_API_KEY);
    const log: string[] = [];
    const note = (message: string) => {
      const safe = redactor.redact(message);
      log.push(safe);
      onEvent({ kind: 'log', message: safe });
    };
    const parser = new ClaudeCodeStreamParser();
    let output = '';
    let final: ClaudeCodeResult | undefined;
    let budgetStop: string | undefined;
    const finish = (failure?: { errorKind: NonNullable<AgentResult['errorKind']>; errorMessage: string }): AgentResult => {
      const usage: ClaudeCodeUsage = final?.usage ?? parser.runningUsage();
      const errorMessage = failure ? redactor.redact(failure.errorMessage) : undefined;
      if (errorMessage) log.push(errorMessage);
      const sessionId = final?.sessionId ?? parser.sessionId;
      return {
        success: failure === undefined,
        output: redactor.redact(final && !failure && final.text !== undefined ? final.text : output),
        ...(failure ? { errorKind: failure.errorKind, errorMessage } : {}),
        executionLog: log,
        ...(sessionId ? { sessionId } : {}),
        ...(final?.costMicroUsd !== undefined ? { reportedCostMicroUsd: final.costMicroUsd } : {}),
        inputTokens: usage.inputTokens,
        outputTokens: usage.outputTokens,
        durationMs: Date.now() - started,
        ...(failure === undefined && final?.structuredOutput !== undefined ? { structured: final.structuredOutput } : {}),
      };
    };

    const run = this.runs.start(request.executionId, signal, limits.timeoutMs);
    let mcpDirectory: string | undefined;
    try {
      if (run.stopReason()) return finish({ errorKind: run.stopReason()!, errorMessage: stopMessage(run.stopReason()!, limits.timeoutMs) });
      const args = ['-p'];
      if (request.allowedTools?.length) args.push('--allowedTools', ...request.allowedTools);
      if (request.disallowedTools?.length) args.push('--disallowedTools', ...request.disallowedTools);
      if (request.mcpConfigPath) {
        // The caller wrote the file for this run and deletes it afterwards.
        args.push('--mcp-config', request.mcpConfigPath, '--strict-mcp-config');
      } else if (request.mcpConfig) {
        mcpDirectory = await mkdtemp(join(tmpdir(), 'actor-mcp-'));
        const file = join(mcpDirectory, 'mcp-config.json');
        const config = 'mcpServers' in request.mcpConfig ? request.mcpConfig : { mcpServers: request.mcpConfig };
        await writeFile(file, JSON.stringify(config), { mode: 0o600 });
        args.push('--mcp-config', file, '--strict-mcp-config');
      }
      const model = request.model ?? this.options.model;
      if (model) args.push('--model', model);
      if (request.systemPrompt) args.push('--append-system-prompt', request.systemPrompt);
      if (request.maxSteps !== undefined && request.maxSteps > 0) args.push('--max-turns', String(request.maxSteps));
      if (request.maxBudgetMicroUsd !== undefined && request.maxBudgetMicroUsd > 0) {
        args.push('--max-budget-usd', (request.maxBudgetMicroUsd / 1_000_000).toFixed(6));
      }
      if (request.sessionId) args.push('--resume', request.sessionId);
      if (jsonSchema) args.push('--json-schema', JSON.stringify(jsonSchema));
      // The variadic tool flags above end at the next flag, so the fixed flags come last.
      args.push('--output-format', 'stream-json', '--verbose', '--include-partial-messages');

      const cwd = request.workingDirectory ?? this.options.defaultWorkingDirectory ?? join(tmpdir(), 'actor-claude-code');
      if (!request.workingDirectory) await mkdir(cwd, { recursive: true });
      note(`${this.type}: running ${this.options.binaryPath} in ${cwd}${model ? `, model ${model}` : ''}${request.sessionId ? `, resuming session ${request.sessionId}` : ''}, time limit ${limits.timeoutMs} ms`);

      const group = spawnProcessGroup(this.options.binaryPath, args, {
        cwd,
        environment: subprocessEnvironment(
          { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_AUTOUPDATER: '1' },
          this.options.environment,
          request.environment,
        ),
      });
      const onStop = () => group.stop();
      run.signal.addEventListener('abort', onStop, { once: true });

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
          else if (event.kind === 'usage') checkBudget(event.usage);
          else final = event.result;
        }
      };
      const checkBudget = (usage: ClaudeCodeUsage) => {
        const budget = request.maxBudgetMicroUsd;
        if (budget === undefined || budget <= 0 || budgetStop) return;
        const cost = priceUsage(this.options.prices, { ...usage, durationMs: Date.now() - started, calls: 1 });
        if (cost >= budget) {
          budgetStop = `${this.type}: the run was stopped when its cost reached its budget of ${budget} micro-USD (${cost} micro-USD for ${usage.inputTokens} input and ${usage.outputTokens} output tokens so far)`;
          group.stop();
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
      group.child.stdin.end(request.prompt);

      const exit = await group.closed;
      run.signal.removeEventListener('abort', onStop);
      handleLine(pending + stdoutDecoder.end());
      emitText(textRedactor.flush());

      const stopped = run.stopReason();
      if (stopped) return finish({ errorKind: stopped, errorMessage: stopMessage(stopped, limits.timeoutMs) });
      if (budgetStop) return finish({ errorKind: 'budget', errorMessage: budgetStop });
      if (exit.kind === 'spawn-failed') {
        return finish({
          errorKind: 'unavailable',
          errorMessage: `${this.type}: cannot start ${this.options.binaryPath}: ${exit.error.code ?? exit.error.message} (install @anthropic-ai/claude-code or set ACTOR_CLAUDE_CODE_BIN)`,
        });
      }
      if (final?.subtype === 'error_max_budget_usd') {
        return finish({ errorKind: 'budget', errorMessage: `${this.type}: the CLI stopped the run at its budget of ${request.maxBudgetMicroUsd} micro-USD (it reports ${final.costMicroUsd ?? '?'} micro-USD)` });
      }
      if (final && (final.isError || final.subtype !== 'success')) {
        const detail = [final.text, ...final.errors].filter(Boolean).join('; ');
        return finish({ errorKind: 'backend', errorMessage: `${this.type}: the run ended with ${final.subtype}${detail ? `: ${detail}` : ''}` });
      }
      if (!final) {
        const tail = stderr.trim().slice(-stderrTailCharacters);
        const how = exit.code === null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
        return finish({ errorKind: 'backend', errorMessage: `${this.type}: the CLI ${how} without a result${tail ? `; stderr: ${tail}` : ''}` });
      }
      note(`${this.type}: ${final.turns ?? '?'} turn(s), session ${final.sessionId ?? '(none)'}, reported cost ${final.costMicroUsd ?? '?'} micro-USD`);
      return finish();
    } catch (error) {
      return finish({ errorKind: 'backend', errorMessage: `${this.type}: ${error instanceof Error ? error.message : String(error)}` });
    } finally {
      run.finish();
      if (mcpDirectory) await rm(mcpDirectory, { recursive: true, force: true });
    }
  }
}
