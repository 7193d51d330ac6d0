import { mkdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
import { OpencodeClient, messageInfoSchema, partSchema, type OpencodeEvent, type OpencodeMessage, type OpencodePrompt } from './opencode-client.js';
import { startOpencodeServer, type OpencodeEndpoint, type StartedOpencodeServer } from './opencode-server.js';

/** How an `opencode` agent reaches opencode's server. */
export interface OpencodeAgentOptions {
  /** The adapter type, `opencode`. */
  type: string;
  /**
   * Path of the `opencode` executable: each run starts its own `opencode serve` in the run's working
   * directory (with the request's environment, so bring-your-own keys work) and stops it afterwards.
   * Ignored when `server` is set.
   */
  binaryPath?: string;
  /** An already running `opencode serve` to use instead (`ACTOR_OPENCODE_URL`); runs then share it. */
  server?: OpencodeEndpoint;
  /**
   * Environment for a started server beyond the neutral variables every subprocess gets: provider keys,
   * `OPENCODE_CONFIG`, `OPENCODE_CONFIG_CONTENT`, `OPENCODE_DISABLE_MODELS_FETCH`, `XDG_*` folders.
   * A request's `environment` (bring-your-own keys) overrides it.
   */
  environment?: Record<string, string>;
  /** `provider/model` when the request names none; unset: the server's configured default. */
  model?: string;
  /** The request.environment variable a bring-your-own key arrives in (the provider's key variable); unset: none. */
  byoKeyVariable?: string;
  /** The adapter's declared limits, merged with each caller's (the stricter wins). */
  limits: AdapterLimits;
  /** The rate card's prices, to stop a run whose usage already costs its whole budget. */
  prices: Prices;
  /** Where runs without a working directory run; default `<tmpdir>/actor-opencode`. */
  defaultWorkingDirectory?: string;
}

/** How long the abort call to a shared server may take when a run is stopped, in ms. */
const abortCallMs = 500;

type Failure = { errorKind: NonNullable<AgentResult['errorKind']>; errorMessage: string };

/**
 * Drives `opencode serve` over its HTTP API: a session per run (or the one to resume), one prompt,
 * its text streamed from the server's `/event` stream, usage and cost summed over the turn's
 * assistant messages. Without `server` it starts `opencode serve` for each run in its own process
 * group and kills that group when the run ends, is cancelled or times out.
 */
export class OpencodeAgent implements Agent {
  readonly type: string;
  readonly byoKeyVariable?: string;
  /** A started server gets the MCP servers as opencode `mcp` config; a shared one cannot take them per run. */
  readonly supportsMcp: boolean;
  private readonly runs = new RunRegistry();

  constructor(private readonly options: OpencodeAgentOptions) {
    this.type = options.type;
    this.byoKeyVariable = options.server ? undefined : options.byoKeyVariable;
    this.supportsMcp = !options.server;
  }

  execute(request: AgentRequest, signal: AbortSignal, onEvent: (event: AgentEvent) => void): Promise<AgentResult> {
    return this.run(request, signal, onEvent);
  }

  /** Uses opencode's `format: json_schema`: the model answers through its StructuredOutput tool. */
  async executeWithSchema(request: AgentRequest, jsonSchema: Record<string, unknown>, signal: AbortSignal): Promise<AgentResult> {
    const result = await this.run(request, signal, () => {}, jsonSchema);
    if (!result.success || result.structured !== undefined) return result;
    return { ...result, success: false, errorKind: 'backend', errorMessage: `${this.type}: the server returned no structured output for the schema` };
  }

  async cancel(executionId: string): Promise<void> {
    this.runs.cancel(executionId);
  }

  async healthCheck(): Promise<AgentCheckResult[]> {
    if (this.options.server) {
      const client = new OpencodeClient(this.options.server, this.options.defaultWorkingDirectory ?? tmpdir());
      try {
        const health = await client.health(AbortSignal.timeout(5_000));
        return [
          {
            name: 'server',
            status: health.healthy ? 'ok' : 'fail',
            message: `${this.options.server.url}: ${health.healthy ? 'healthy' : 'unhealthy'}${health.version ? `, opencode ${health.version}` : ''}`,
          },
        ];
      } catch (error) {
        return [{ name: 'server', status: 'fail', message: `${this.options.server.url} does not answer: ${(error as Error).message}` }];
      }
    }
    const binaryPath = this.options.binaryPath ?? 'opencode';
    const started = spawnProcessGroup(binaryPath, ['--version'], { environment: subprocessEnvironment(this.options.environment) });
    let version = '';
    started.child.stdout.on('data', (chunk: Buffer) => (version += chunk.toString('utf8')));
    started.child.stdin.end();
    const timer = setTimeout(() => started.stop(), 10_000);
    const exit = await started.closed;
    clearTimeout(timer);
    if (exit.kind === 'spawn-failed') return [{ name: 'binary', status: 'fail', message: `cannot start ${binaryPath}: ${exit.error.code ?? exit.error.message}` }];
    if (exit.code !== 0) return [{ name: 'binary', status: 'fail', message: `${binaryPath} --version exited with ${exit.code ?? exit.signal}` }];
    return [{ name: 'binary', status: 'ok', message: `${binaryPath}: opencode ${version.trim()}` }];
  }

  private async run(
    request: AgentRequest,
    signal: AbortSignal,
    onEvent: (event: AgentEvent) => void,
    jsonSchema?: Record<string, unknown>,
  ): Promise<AgentResult> {
    const started = Date.now();
    const limits = mergeLimits({ timeoutMs: request.timeoutMs }, this.options.limits);
    const redactor = SecretRedactor.forEnvironment(request.environment, ...Object.values(this.options.environment ?? {}).filter(looksSecret));
    const log: string[] = [];
    const note = (message: string) => {
      const safe = redactor.redact(message);
      log.push(safe);
      onEvent({ kind: 'log', message: safe });
    };
    const textRedactor = redactor.stream();
    let output = '';
    const emitText = (text: string) => {
      if (!text) return;
      output += text;
      onEvent({ kind: 'output', text });
    };
    /** Usage of each assistant message of this turn, by message id, as the server last reported it. */
    const usageByMessage = new Map<string, { inputTokens: number; outputTokens: number; costUsd: number }>();
    let sessionId = request.sessionId;
    let structured: unknown;
    let budgetStop: string | undefined;
    const totals = () => {
      let inputTokens = 0;
      let outputTokens = 0;
      let costUsd = 0;
      for (const usage of usageByMessage.values()) {
        inputTokens += usage.inputTokens;
        outputTokens += usage.outputTokens;
        costUsd += usage.costUsd;
      }
      return { inputTokens, outputTokens, costUsd };
    };
    const finish = (failure?: Failure): AgentResult => {
      emitText(textRedactor.flush());
      const usage = totals();
      const errorMessage = failure ? redactor.redact(failure.errorMessage) : undefined;
      if (errorMessage) log.push(errorMessage);
      return {
        success: failure === undefined,
        output,
        ...(failure ? { errorKind: failure.errorKind, errorMessage } : {}),
        executionLog: log,
        ...(sessionId ? { sessionId } : {}),
        // opencode prices only models its catalog (or config) gives prices for; 0 means "unknown", not free.
        ...(usage.costUsd > 0 ? { reportedCostMicroUsd: Math.round(usage.costUsd * 1_000_000) } : {}),
        inputTokens: usage.inputTokens,
        outputTokens: usage.outputTokens,
        durationMs: Date.now() - started,
        ...(failure === undefined && structured !== undefined ? { structured } : {}),
      };
    };

    const run = this.runs.start(request.executionId, signal, limits.timeoutMs);
    const budget = new AbortController();
    const stopSignal = AbortSignal.any([run.signal, budget.signal]);
    const events = new AbortController();
    let server: StartedOpencodeServer | undefined;
    let client: OpencodeClient | undefined;
    let abortCall: Promise<void> | undefined;
    const onStop = () => {
      // A server of our own dies with the run; a shared one is asked to stop the session.
      if (server) server.group.stop();
      else if (client && sessionId) abortCall = client.abort(sessionId, AbortSignal.timeout(abortCallMs)).catch(() => {});
    };
    const stopped = (): Failure | undefined => {
      const reason = run.stopReason();
      if (reason) return { errorKind: reason, errorMessage: stopMessage(reason, limits.timeoutMs) };
      if (budgetStop) return { errorKind: 'budget', errorMessage: budgetStop };
      return undefined;
    };
    try {
      if (stopped()) return finish(stopped());
      const model = request.model ?? this.options.model;
      const modelRef = model ? splitModel(model) : undefined;
      if (model && !modelRef) return finish({ errorKind: 'unavailable', errorMessage: `${this.type}: model "${model}" is not of the form provider/model` });
      if (this.options.server && request.environment && Object.keys(request.environment).length > 0) {
        return finish({
          errorKind: 'unavailable',
          errorMessage: `${this.type}: the request brings its own environment (a key), which a shared server (ACTOR_OPENCODE_URL) cannot take per run; configure ACTOR_OPENCODE_BIN instead`,
        });
      }
      const mcpServers = await mcpServersOf(request);
      if (this.options.server && mcpServers) {
        return finish({ errorKind: 'unavailable', errorMessage: `${this.type}: MCP servers cannot be given per run to a shared server (ACTOR_OPENCODE_URL)` });
      }

      const cwd = request.workingDirectory ?? this.options.defaultWorkingDirectory ?? join(tmpdir(), 'actor-opencode');
      if (!request.workingDirectory) await mkdir(cwd, { recursive: true });
      stopSignal.addEventListener('abort', onStop, { once: true });

      let endpoint: OpencodeEndpoint;
      if (this.options.server) {
        endpoint = this.options.server;
        note(`${this.type}: using the server at ${endpoint.url} in ${cwd}${model ? `, model ${model}` : ''}, time limit ${limits.timeoutMs} ms`);
      } else {
        const binaryPath = this.options.binaryPath ?? 'opencode';
        note(`${this.type}: starting ${binaryPath} serve in ${cwd}${model ? `, model ${model}` : ''}${request.sessionId ? `, resuming session ${request.sessionId}` : ''}, time limit ${limits.timeoutMs} ms`);
        const launched = await startOpencodeServer({
          binaryPath,
          cwd,
          environment: subprocessEnvironment(
            { OPENCODE_DISABLE_AUTOUPDATE: '1' },
            withMcp(this.options.environment, mcpServers),
            request.environment,
          ),
          signal: stopSignal,
        });
        if ('failure' in launched) {
          if (launched.failure === 'aborted') return finish(stopped());
          if (launched.failure.kind === 'spawn-failed') {
            return finish({
              errorKind: 'unavailable',
              errorMessage: `${this.type}: cannot start ${binaryPath}: ${launched.failure.error.code ?? launched.failure.error.message} (install opencode-ai or set ACTOR_OPENCODE_BIN)`,
            });
          }
          const how = launched.failure.code === null ? `was killed by ${launched.failure.signal}` : `exited with code ${launched.failure.code}`;
          return finish({ errorKind: 'backend', errorMessage: `${this.type}: opencode serve ${how} before listening${launched.stderr ? `; stderr: ${launched.stderr}` : ''}` });
        }
        server = launched.server;
        endpoint = server.endpoint;
        if (stopSignal.aborted) return finish(stopped());
      }
      client = new OpencodeClient(endpoint, cwd);

      // Parts and messages of this turn, learned from the event stream.
      const assistantMessages = new Set<string>();
      const nonTextParts = new Set<string>();
      const loggedToolStates = new Set<string>();
      const onServerEvent = (event: OpencodeEvent) => {
        const properties = event.properties;
        if (!sessionId || properties.sessionID !== sessionId) return;
        if (event.type === 'message.updated') {
          const info = messageInfoSchema.safeParse(properties.info);
          if (!info.success || info.data.role !== 'assistant') return;
          assistantMessages.add(info.data.id);
          if (info.data.tokens) {
            usageByMessage.set(info.data.id, {
              inputTokens: info.data.tokens.input + (info.data.tokens.cache?.read ?? 0) + (info.data.tokens.cache?.write ?? 0),
              outputTokens: info.data.tokens.output + info.data.tokens.reasoning,
              costUsd: info.data.cost ?? 0,
            });
            checkBudget();
          }
        } else if (event.type === 'message.part.updated') {
          const part = partSchema.safeParse(properties.part);
          if (!part.success || part.data.type === 'text') return;
          nonTextParts.add(part.data.id);
          if (part.data.type === 'tool' && part.data.state?.status && part.data.state.status !== 'pending') {
            const key = `${part.data.id}:${part.data.state.status}`;
            if (loggedToolStates.has(key)) return;
            loggedToolStates.add(key);
            if (part.data.state.status === 'running') note(`${this.type}: tool ${part.data.tool} called with ${JSON.stringify(part.data.state.input ?? {})}`);
            else if (part.data.state.status === 'error') note(`${this.type}: tool ${part.data.tool} failed: ${part.data.state.error ?? '?'}`);
            else note(`${this.type}: tool ${part.data.tool} ${part.data.state.status}`);
          }
        } else if (event.type === 'message.part.delta') {
          if (properties.field !== 'text' || typeof properties.delta !== 'string') return;
          if (!assistantMessages.has(String(properties.messageID)) || nonTextParts.has(String(properties.partID))) return;
          emitText(textRedactor.push(properties.delta));
        } else if (event.type === 'permission.asked' && typeof properties.id === 'string') {
          // Nobody can answer a permission prompt in a headless run: refuse it, so the turn goes on without it.
          note(`${this.type}: refused the permission "${String(properties.permission)}" the agent asked for (${JSON.stringify(properties.patterns ?? [])})`);
          void client?.replyPermission(properties.id, 'reject', 'not allowed in this run', AbortSignal.timeout(5_000)).catch(() => {});
        } else if (event.type === 'session.error') {
          const error = properties.error as { name?: string; data?: { message?: string } } | undefined;
          if (error?.name !== 'MessageAbortedError') note(`${this.type}: session error ${error?.name ?? '?'}: ${error?.data?.message ?? ''}`);
        }
      };
      const checkBudget = () => {
        const limit = request.maxBudgetMicroUsd;
        if (limit === undefined || limit <= 0 || budgetStop) return;
        const usage = totals();
        const cost = priceUsage(this.options.prices, { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, durationMs: Date.now() - started, calls: 1 });
        if (cost >= limit) {
          budgetStop = `${this.type}: the run was stopped when its cost reached its budget of ${limit} micro-USD (${cost} micro-USD for ${usage.inputTokens} input and ${usage.outputTokens} output tokens so far)`;
          budget.abort();
        }
      };

      const subscription = await client.subscribe(onServerEvent, AbortSignal.any([events.signal, stopSignal]));
      sessionId ??= await client.createSession(stopSignal);
      const prompt: OpencodePrompt = { parts: [{ type: 'text', text: request.prompt }] };
      if (modelRef) prompt.model = modelRef;
      if (request.systemPrompt) prompt.system = request.systemPrompt;
      if (jsonSchema) prompt.format = { type: 'json_schema', schema: jsonSchema };
      const tools = await this.toolSwitches(client, request, stopSignal);
      if (tools) prompt.tools = tools;

      const answer = await client.prompt(sessionId, prompt, stopSignal);
      // The turn may have finished while a budget stop was on its way.
      if (stopped()) return finish(stopped());
      // Every step of the turn is its own assistant message with the same parent (the prompt).
      let turn: OpencodeMessage[] | undefined;
      try {
        turn = (await client.messages(sessionId, stopSignal)).filter(
          (message) => message.info.role === 'assistant' && message.info.parentID === answer.info.parentID,
        );
      } catch (error) {
        if (stopped()) throw error;
        // opencode 1.18.33 answers 400 to this list when the session holds a prompt with `format` (it
        // cannot encode its own stored retryCount): the events' usage and text then stand alone.
        note(`${this.type}: could not list the session's messages (${(error as Error).message.slice(0, 200)}); usage and text come from the event stream`);
      }
      events.abort();
      await subscription.ended;
      const steps = turn && turn.length > 0 ? turn : [answer];
      for (const message of steps) recordUsage(usageByMessage, message);
      const streamedSoFar = output + textRedactor.flush();
      output = streamedSoFar;
      // Without the list, a multi-step turn's streamed text is more complete than the last step's.
      const safeFinal = turn === undefined && streamedSoFar ? streamedSoFar : redactor.redact(textOf(steps));
      if (safeFinal.startsWith(streamedSoFar)) emitText(safeFinal.slice(streamedSoFar.length));
      else {
        note(`${this.type}: the streamed text differs from the session's final text; the result keeps the final text`);
        output = safeFinal;
      }
      const error = answer.info.error;
      if (error) {
        const status = error.data?.statusCode ? ` (HTTP ${error.data.statusCode})` : '';
        return finish({ errorKind: 'backend', errorMessage: `${this.type}: the run ended with ${error.name}${status}${error.data?.message ? `: ${error.data.message}` : ''}` });
      }
      structured = answer.info.structured;
      const usage = totals();
      note(`${this.type}: ${usageByMessage.size || 1} step(s), session ${sessionId}, ${usage.inputTokens} input and ${usage.outputTokens} output tokens, reported cost ${usage.costUsd > 0 ? `${Math.round(usage.costUsd * 1_000_000)} micro-USD` : 'none'}`);
      return finish();
    } catch (error) {
      const stop = stopped();
      if (stop) return finish(stop);
      const detail = error instanceof Error ? error.message : String(error);
      const tail = server?.stderrTail();
      return finish({ errorKind: 'backend', errorMessage: `${this.type}: ${detail}${tail && server && server.group.child.exitCode !== null ? `; server stderr: ${tail}` : ''}` });
    } finally {
      events.abort();
      stopSignal.removeEventListener('abort', onStop);
      run.finish();
      if (abortCall) await abortCall;
      if (server) {
        server.group.stop();
        await server.group.closed;
      }
    }
  }

  /** The prompt's `tools` switches: only the allowed tools on (when a list is given), the disallowed ones off. */
  private async toolSwitches(client: OpencodeClient, request: AgentRequest, signal: AbortSignal): Promise<Record<string, boolean> | undefined> {
    const switches: Record<string, boolean> = {};
    if (request.allowedTools?.length) {
      const allowed = new Set(request.allowedTools);
      for (const id of await client.toolIds(signal)) switches[id] = allowed.has(id);
    }
    for (const id of request.disallowedTools ?? []) switches[id] = false;
    return Object.keys(switches).length > 0 ? switches : undefined;
  }
}

/** `provider/model` as opencode's prompt wants it; the model id may itself contain `/`. */
function splitModel(model: string): { providerID: string; modelID: string } | undefined {
  const slash = model.indexOf('/');
  if (slash <= 0 || slash === model.length - 1) return undefined;
  return { providerID: model.slice(0, slash), modelID: model.slice(slash + 1) };
}

/** The text parts of a turn's assistant messages, in order (synthetic and ignored parts left out). */
function textOf(messages: OpencodeMessage[]): string {
  return messages
    .flatMap((message) => message.parts)
    .filter((part) => part.type === 'text' && part.synthetic !== true && part.ignored !== true)
    .map((part) => part.text ?? '')
    .join('');
}

function recordUsage(usage: Map<string, { inputTokens: number; outputTokens: number; costUsd: number }>, message: OpencodeMessage): void {
  const tokens = message.info.tokens;
  if (!tokens) return;
  usage.set(message.info.id, {
    inputTokens: tokens.input + (tokens.cache?.read ?? 0) + (tokens.cache?.write ?? 0),
    outputTokens: tokens.output + tokens.reasoning,
    costUsd: message.info.cost ?? 0,
  });
}

/** Values of the adapter's environment worth redacting: keys and passwords, not paths or flags. */
function looksSecret(value: string): boolean {
  return value.length >= 16 && !value.includes('/') && !/^(true|false|\d+)$/i.test(value);
}

/** The request's MCP servers (Claude Code's `mcpServers` shape), from its file or its object; undefined for none. */
async function mcpServersOf(request: AgentRequest): Promise<Record<string, Record<string, unknown>> | undefined> {
  let config: Record<string, unknown> | undefined = request.mcpConfig;
  if (request.mcpConfigPath) config = JSON.parse(await readFile(request.mcpConfigPath, 'utf8')) as Record<string, unknown>;
  if (!config) return undefined;
  const servers = ('mcpServers' in config ? config.mcpServers : config) as Record<string, Record<string, unknown>>;
  return Object.keys(servers).length > 0 ? servers : undefined;
}

/**
 * The environment with the MCP servers added to `OPENCODE_CONFIG_CONTENT` (merged over the operator's
 * own inline config) as opencode's `mcp` entries: `local` with the command and its arguments as one
 * list, or `remote` with the URL and headers.
 */
function withMcp(environment: Record<string, string> | undefined, servers: Record<string, Record<string, unknown>> | undefined): Record<string, string> | undefined {
  if (!servers) return environment;
  let inline: Record<string, unknown> = {};
  try {
    if (environment?.OPENCODE_CONFIG_CONTENT) inline = JSON.parse(environment.OPENCODE_CONFIG_CONTENT) as Record<string, unknown>;
  } catch {
    // An unreadable inline config is the operator's to fix; the MCP servers still go in.
  }
  const mcp: Record<string, unknown> = { ...(inline.mcp as Record<string, unknown> | undefined) };
  for (const [name, server] of Object.entries(servers)) {
    mcp[name] =
      server.type === 'http' || server.type === 'sse'
        ? { type: 'remote', url: server.url, ...(server.headers ? { headers: server.headers } : {}), enabled: true }
        : {
            type: 'local',
            command: [server.command, ...((server.args as string[] | undefined) ?? [])],
            ...(server.env ? { environment: server.env } : {}),
            enabled: true,
          };
  }
  return { ...environment, OPENCODE_CONFIG_CONTENT: JSON.stringify({ ...inline, mcp }) };
}
