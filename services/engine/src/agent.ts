/**
 * The Agent SPI: one interface every backend adapter implements (demo, ai-sdk, claude-code, opencode,
 * copilot, script). It lives in the engine package so that the execution service and the local
 * `actor` CLI run the very same adapters; execution's `src/agents/` holds the implementations.
 */

/** One request to an agent. A caller's limits merge with the adapter's declared ones, the stricter winning. */
export interface AgentRequest {
  /** The task text or prompt. */
  prompt: string;
  /** Optional system prompt. */
  systemPrompt?: string;
  /** Model id, for adapters that serve several. */
  model?: string;
  /** Longest run time in ms; default 120 000. On expiry the run is stopped and fails with kind `timeout`. */
  timeoutMs?: number;
  /** Most agent steps (turns, tool round trips); default 50. */
  maxSteps?: number;
  /** Most the run may cost, in micro-USD (its reservation); adapters that report running cost stop there. */
  maxBudgetMicroUsd?: number;
  /** Tools the agent may use (CLI agents). */
  allowedTools?: string[];
  /** Tools the agent must not use (CLI agents). */
  disallowedTools?: string[];
  /** MCP servers config as a JSON object (adapters that support MCP). */
  mcpConfig?: Record<string, unknown>;
  /**
   * Path of a ready-written MCP config file (`{"mcpServers": {...}}`, mode 0600) holding `mcpConfig`,
   * made for this one run by the caller, who deletes it when the run ends. An adapter given both
   * uses the file and writes none of its own.
   */
  mcpConfigPath?: string;
  /** Working directory (CLI and script agents). */
  workingDirectory?: string;
  /** Extra environment for subprocess agents (bring-your-own keys arrive here, never in logs). */
  environment?: Record<string, string>;
  /** The caller's execution id, used by `cancel(executionId)`. */
  executionId: string;
  /** The project the work is for: whose secrets (bring-your-own keys) the caller may resolve. */
  projectId?: string;
  /** A session to resume (CLI agents). */
  sessionId?: string;
  /** The agent slot's configuration JSON (for demo agents: latency, failure rate, quality). */
  configuration?: Record<string, unknown>;
}

/** What a run produced. Adapters never throw for a backend failure: they return `success: false`. */
export interface AgentResult {
  success: boolean;
  /** The answer text (partial output of a failed run is kept here too, but is never a success). */
  output: string;
  /** Why the run failed, when it did. */
  errorMessage?: string;
  /** `timeout`, `cancelled`, `backend`, `budget`, `unavailable` when it failed. */
  errorKind?: 'timeout' | 'cancelled' | 'backend' | 'budget' | 'unavailable';
  /** Step-by-step log lines for the trace. */
  executionLog: string[];
  /** Session id to resume, for adapters that have sessions. */
  sessionId?: string;
  /** The cost the backend itself reported, in micro-USD (CLI agents); undefined when it reports none. */
  reportedCostMicroUsd?: number;
  inputTokens: number;
  outputTokens: number;
  /** Wall-clock time of the run, in ms. */
  durationMs: number;
  /** The structured value, for `executeWithSchema`. */
  structured?: unknown;
}

/** Progress an adapter streams while it runs. */
export type AgentEvent =
  | { kind: 'output'; text: string }
  | { kind: 'log'; message: string };

/** Result of one adapter check (binary present, key present, endpoint answering). */
export interface AgentCheckResult {
  name: string;
  status: 'ok' | 'warn' | 'fail';
  message: string;
}

/** The SPI itself. */
export interface Agent {
  /** The adapter type this instance serves (`demo:alpha-mini`, `ai-sdk:openai-compatible/<model>`). */
  readonly type: string;
  /**
   * The `request.environment` variable through which this adapter takes a bring-your-own key
   * (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`); unset: it takes none. Matches `accepts_byo_key`.
   */
  readonly byoKeyVariable?: string;
  /** True when the adapter passes `mcpConfig` / `mcpConfigPath` on to its backend; unset: it ignores them. */
  readonly supportsMcp?: boolean;
  /** Runs the request, streaming events; resolves (never rejects) with the result. */
  execute(request: AgentRequest, signal: AbortSignal, onEvent: (event: AgentEvent) => void): Promise<AgentResult>;
  /** Runs the request and returns a value valid against the JSON Schema in `result.structured`. */
  executeWithSchema(request: AgentRequest, jsonSchema: Record<string, unknown>, signal: AbortSignal): Promise<AgentResult>;
  /** Stops the run started with this execution id, if it is still going. */
  cancel(executionId: string): Promise<void>;
  /** The adapter's own prerequisite checks. */
  healthCheck(): Promise<AgentCheckResult[]>;
}
