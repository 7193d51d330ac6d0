import type { AgentEvent, AgentRequest, AgentResult } from './agent.js';

/**
 * The engine's ports. The execution service implements them with gRPC clients and Postgres; the
 * local CLI with in-process ones. The engine itself imports no gRPC, no database, no service code.
 */

/** Stable error codes of a task's failure. */
export type TaskErrorCode =
  | 'actor.budget.exceeded'
  | 'actor.no_capable_backend'
  | 'actor.verification.failed'
  | 'actor.verification.unavailable'
  | 'actor.backend.failed'
  | 'actor.cancelled';

/**
 * What ports throw for an expected refusal (budget, no backend, lost lease). Any other error from a
 * port is unexpected (a peer down) and ends the engine run with a rejection, for the caller to
 * retry the task later.
 */
export class PortRefusal extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'PortRefusal';
  }
}

export type Mode = 'cheapest' | 'balanced' | 'best' | 'fastest' | 'private';
export type TaskClass = 'code' | 'research' | 'action' | 'general';

/** The task as the engine sees it. */
export interface EngineTask {
  id: string;
  projectId: string;
  input: string;
  mode: Mode;
  /** Hard limits in micro-USD. */
  budget: { perTaskMicroUsd: number; perDayMicroUsd: number };
  /** An explicitly assigned pool agent. */
  agentId?: string;
  /** The only adapter types the task may use (empty: any). */
  backends: string[];
  /** Required features (`vision`, `tools`). */
  capabilities: string[];
  /** Media types of attachments (an `image/*` one makes the task need vision). */
  attachmentMediaTypes: string[];
  verify: TaskVerify;
  /** Where a code task works: a repository and the ref to start from (what `repo` means is the workspace port's). */
  workspace?: { repo: string; ref: string };
}

/**
 * How a task's answer is checked besides the judge. The task's own checks run first, in the order
 * below; the first that fails rejects the attempt (escalation, as after a judge's rejection) and the
 * judge is not run for it.
 */
export interface TaskVerify {
  /** Whether a judge of another model family checks the answer (after the task's own checks). */
  judge: boolean;
  /** A shell command that must exit 0 in the attempt's working copy (needs a workspace). */
  testCommand?: string;
  /** Citations the answer text must carry (checked by the engine itself, no workspace needed). */
  citations?: CitationRequirement;
  /**
   * Shell commands run one by one in the attempt's working copy after the work; each must exit 0.
   * They need a workspace: without a workspace port the task fails `actor.verification.unavailable`
   * before anything runs (the execution service refuses such tasks at creation).
   */
  postconditions?: string[];
  /**
   * Time limit of each command above (test command, each postcondition), in ms. It can only lower
   * the workspace port's own limit, never raise it. Unset: the port's limit.
   */
  checkTimeoutMs?: number;
}

/**
 * Citations an answer must carry. What counts as one citation depends on `style`:
 * - `url`: a distinct http(s) URL anywhere in the answer.
 * - `numbered`: a distinct marker `[n]` in the text that also has its entry, a line starting with
 *   `[n]` followed by the source. A marker in the text without an entry fails the check.
 * - `regex`: a distinct match of `pattern`.
 */
export interface CitationRequirement {
  style: 'url' | 'numbered' | 'regex';
  /** For `regex` only (required there): a JavaScript regular expression, matched with flags `gm`. */
  pattern?: string;
  /** How many distinct citations are needed at least; >= 1. */
  min: number;
}

export interface Classification {
  taskClass: TaskClass;
  vision: boolean;
  /** 1 (easy) .. 3 (hard). */
  difficulty: number;
  reason: string;
  /**
   * Who decided it: `local` (the engine's regular-expression classifier) or `model` (the answer of the
   * configured classifier backend, `EngineOptions.classifierBackend`).
   */
  source: 'local' | 'model';
}

/** The part of a placement decision the engine acts on; `detail` is the whole decision, stored as is. */
export interface Placement {
  decisionId: string;
  backend: string;
  modelFamily: string;
  qualityTier: number;
  demo: boolean;
  worstCaseCostMicroUsd: number;
  rateCardRevision: number;
  /** One or two sentences, for the explanation. */
  explanation: string;
  /** The whole decision as a JSON-able object (candidates, scores, exclusions). */
  detail: unknown;
}

export interface PlaceRequest {
  taskId: string;
  projectId: string;
  /** Idempotency key of the call (task id + attempt + purpose). */
  requestId: string;
  taskClass: TaskClass;
  requiredCapabilities: string[];
  estimatedInputTokens: number;
  mode: Mode;
  taskBudgetLeftMicroUsd: number;
  dayBudgetLeftMicroUsd: number;
  allowedBackends: string[];
  excludeBackends: string[];
  /** For an escalation: the backend whose answer failed verification; the winner must be stronger. */
  escalateFromBackend?: string;
  /**
   * `work`: the task's own work (restricted to the task's backends). `judge`: a verdict on an answer
   * (the task's backend list does not apply; placed by family and trust). `classify`: the optional
   * model call of the evaluate step, placed like a judge (it moves no incumbent, is no work sample)
   * but restricted to `allowedBackends`, which then names the classifier backend alone.
   */
  purpose: 'work' | 'judge' | 'classify';
  /** For a judge: the worker's family, to avoid. */
  avoidModelFamily?: string;
}

export interface Outcome {
  requestId: string;
  backend: string;
  taskClass: TaskClass;
  success: boolean;
  verified: boolean;
  latencyMs: number;
  costMicroUsd: number;
  errorKind?: string;
  decisionId: string;
  judge: boolean;
}

/** Placement: throws PortRefusal(`actor.no_capable_backend`) when nothing fits. */
export interface PlacementPort {
  place(request: PlaceRequest, signal: AbortSignal): Promise<Placement>;
  reportOutcome(outcome: Outcome): Promise<void>;
}

export interface Reservation {
  reservationId: string;
  amountMicroUsd: number;
}

export interface UsageSample {
  inputTokens: number;
  outputTokens: number;
  durationMs: number;
  calls: number;
}

/** Billing: `reserve` throws PortRefusal(`actor.budget.exceeded`) when the limits leave no room. */
export interface BillingPort {
  reserve(request: {
    requestId: string;
    projectId: string;
    taskId: string;
    attemptId: string;
    amountMicroUsd: number;
    perTaskLimitMicroUsd: number;
    perDayLimitMicroUsd: number;
  }): Promise<Reservation>;
  settle(request: {
    reservationId: string;
    backend: string;
    rateCardRevision: number;
    usage: UsageSample;
    reportedCostMicroUsd?: number;
    producedOutput: boolean;
  }): Promise<{ costMicroUsd: number }>;
  release(reservationId: string): Promise<void>;
  /** What the task has spent and holds so far, and what the project has today, in micro-USD. */
  spend(projectId: string, taskId: string): Promise<{ taskMicroUsd: number; dayMicroUsd: number }>;
}

export interface Lease {
  leaseId: string;
  epoch: number;
  agentId: string;
  agentType: string;
  /** The agent slot's configuration JSON, parsed. */
  configuration: Record<string, unknown>;
}

/** Pool: `acquire` waits for a slot (fairly); throws PortRefusal when no agent can ever match. */
export interface PoolPort {
  acquire(
    request: {
      requestId: string;
      /** `classify` is the optional model call of the evaluate step (`EngineOptions.classifierBackend`). */
      workType: 'task' | 'judge' | 'classify';
      workId: string;
      projectId: string;
      agentId?: string;
      agentType: string;
      capability?: string;
    },
    signal: AbortSignal,
  ): Promise<Lease>;
  release(lease: Lease): Promise<void>;
}

/** The AI call: runs an adapter of the given type under a lease. */
export interface AgentsPort {
  execute(
    backend: string,
    request: AgentRequest,
    signal: AbortSignal,
    onEvent: (event: AgentEvent) => void,
  ): Promise<AgentResult>;
  executeWithSchema(
    backend: string,
    request: AgentRequest,
    jsonSchema: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<AgentResult>;
}

/** One entry of the task's stored explanation. */
export interface ExplanationEntry {
  step: 'evaluate' | 'enhance' | 'place' | 'reserve' | 'lease' | 'execute' | 'verify' | 'escalate' | 'failover' | 'settle' | 'finish';
  attempt: number;
  message: string;
  backend?: string;
  decisionId?: string;
  detail?: unknown;
}

export interface AttemptRecord {
  id: string;
  number: number;
  backend: string;
  modelFamily: string;
  agentId?: string;
  decisionId: string;
  state: 'running' | 'verifying' | 'passed' | 'rejected' | 'errored' | 'cancelled';
  output: string;
  error?: string;
  costMicroUsd: number;
  inputTokens: number;
  outputTokens: number;
  latencyMs: number;
  verdict?: Verdict;
}

export interface Verdict {
  pass: boolean;
  reasons: string[];
  judgeBackend: string;
  judgeModelFamily: string;
  scores: Record<string, number>;
  checks: string[];
}

/**
 * The trace: where the engine records what happened. The execution service stores each call in the
 * task's own rows and events (gapless seqs); the CLI writes a file.
 */
export interface TracePort {
  classified(classification: Classification): Promise<void>;
  state(state: 'running' | 'verifying'): Promise<void>;
  output(attempt: number, text: string): Promise<void>;
  explain(entry: ExplanationEntry): Promise<void>;
  /** Creates or updates an attempt row (same id = update). */
  attempt(record: AttemptRecord): Promise<void>;
}

/** What the engine knows of the task when it asks memory. */
export interface RecallContext {
  /** The task asking (so that its own row is left out). */
  taskId: string;
  taskClass: TaskClass;
}

/**
 * Memory: what earlier tasks of the project taught, as short lines (may return nothing). The
 * engine keeps at most a few of them and cuts long ones (see `enhanceLimits`).
 */
export interface MemoryPort {
  recall(projectId: string, input: string, context?: RecallContext): Promise<string[]>;
}

/** A file of the task's repository read for the enhance step. */
export interface WorkspaceFile {
  /** The path as asked, relative to the repository root. */
  path: string;
  /** The text, at most the asked number of characters. */
  content: string;
  /** Whether the file was longer than what `content` holds. */
  truncated: boolean;
  /** The file's whole size in bytes. */
  sizeBytes: number;
}

/** An isolated working copy made for one attempt. */
export interface PreparedWorkspace {
  /** The directory the backend works in (handed to the adapter as `workingDirectory`). */
  path: string;
  /** The attempt it was made for. */
  attemptId: string;
}

export interface CheckResult {
  passed: boolean;
  /** The exit code; null when the command was stopped by a signal (timeout, cancel). */
  exitCode: number | null;
  /** The end of the command's combined stdout and stderr. */
  outputTail: string;
  timedOut: boolean;
}

export interface WorkspaceDiff {
  /** The change against the starting ref (possibly shortened). */
  diff: string;
  changedFiles: string[];
}

/**
 * The workspace of a task with its own checks: every attempt works in a fresh copy, whose change is
 * collected and where the task's test command must pass. `prepare` throws PortRefusal when the
 * task's workspace cannot be made (the repository or ref is gone).
 */
export interface WorkspacePort {
  prepare(task: EngineTask, attemptId: string): Promise<PreparedWorkspace>;
  /**
   * Runs `command` in the copy; stopped when `signal` aborts, or after the port's time limit
   * (`options.timeoutMs` can lower it, never raise it). Never throws for a failing command.
   */
  runCheck(workspace: PreparedWorkspace, command: string, signal: AbortSignal, options?: { timeoutMs?: number }): Promise<CheckResult>;
  diff(workspace: PreparedWorkspace): Promise<WorkspaceDiff>;
  dispose(workspace: PreparedWorkspace): Promise<void>;
  /**
   * Reads files of the task's repository at its ref (not from a working copy), for the enhance step.
   * Paths are relative to the repository root; a path that leaves it (`..`, absolute), or names no
   * regular file at the ref, is left out of the answer, never an error. Each file's text is cut to
   * `maxCharacters`. Optional: a port without it gives the engine no files.
   */
  readFiles?(task: EngineTask, paths: string[], maxCharacters: number): Promise<WorkspaceFile[]>;
}

export interface EnginePorts {
  placement: PlacementPort;
  billing: BillingPort;
  pool: PoolPort;
  agents: AgentsPort;
  trace: TracePort;
  memory?: MemoryPort;
  /** Without it a task's test command is not run (the explanation says so). */
  workspace?: WorkspacePort;
  /** Makes ids (`att_...`); injected so the engine needs no id library. */
  newAttemptId(): string;
}

/** How a run ended. The caller writes the terminal state. */
export type EngineOutcome =
  | {
      state: 'succeeded';
      result: string;
      costMicroUsd: number;
      /** True when a judge passed the answer; false when the task turned the judge off (never unchecked otherwise). */
      verified?: boolean;
    }
  | { state: 'failed'; code: TaskErrorCode; message: string; costMicroUsd: number }
  | { state: 'cancelled'; code: 'actor.cancelled'; message: string; costMicroUsd: number };

export interface EngineOptions {
  /** Most attempts (first run plus escalations and failovers); default 3. */
  maxAttempts?: number;
  /** Default per-call timeout handed to adapters, in ms; default 120 000. */
  timeoutMs?: number;
  /**
   * Attempts that earlier runs of this task already made (a run resumed after a crash); default 0.
   * Only the idempotency keys of port calls count on from it, so a resumed run never picks up an
   * earlier run's reservation or lease; trace calls still number this run's attempts from 1.
   */
  attemptOffset?: number;
  /**
   * The adapter type (`demo:beta-judge`, `ai-sdk:openai/gpt-4o-mini`) asked to classify each task after
   * the local classifier; unset: the local classifier alone decides. The call is placed (restricted
   * to this backend), reserved, leased and settled to the task like a judge call. A valid answer wins
   * for the task class, difficulty and reason; vision stays what the task carries. Any failure (no
   * placement, no budget, no slot, an error, an invalid answer, the time limit) leaves the local
   * result standing and the `evaluate` explanation says why; it never fails the task.
   */
  classifierBackend?: string;
  /**
   * Time limit of the classifier call in ms, waiting for its slot included; default 15 000. Past
   * it the local result stands.
   */
  classifierTimeoutMs?: number;
}
