import type { AgentEvent, AgentRequest, AgentResult } from '../agent.js';
import { readJudgePrompt } from '../judge.js';
import {
  PortRefusal,
  type AgentsPort,
  type AttemptRecord,
  type BillingPort,
  type CheckResult,
  type Classification,
  type EngineTask,
  type EnginePorts,
  type ExplanationEntry,
  type Lease,
  type MemoryPort,
  type Outcome,
  type PlaceRequest,
  type Placement,
  type PlacementPort,
  type PoolPort,
  type PreparedWorkspace,
  type RecallContext,
  type Reservation,
  type TaskClass,
  type TracePort,
  type UsageSample,
  type WorkspaceDiff,
  type WorkspaceFile,
  type WorkspacePort,
} from '../ports.js';

/**
 * In-process implementations of the engine's ports: the engine's tests run on them, and the local
 * `actor` CLI can run on them too. They keep the real ports' promises (budgets are enforced, a slot
 * is held by one lease at a time, placement excludes and escalates), only without a network or a
 * database, and they keep everything they saw for inspection.
 */

// ---------------------------------------------------------------------------------------------
// Placement

/** A backend placement may choose. */
export interface BackendProfile {
  backend: string;
  modelFamily: string;
  /** 1 (cheap, weak) and up. */
  qualityTier: number;
  /** The worst case of one call, in micro-USD (what the engine reserves). */
  worstCaseCostMicroUsd: number;
  demo?: boolean;
  rateCardRevision?: number;
  /** Task classes it serves; default all. */
  taskClasses?: TaskClass[];
  /** Features it has (`vision`, `tools`); default none. */
  capabilities?: string[];
  /** What placement may use it for; default all (`classify` calls are taken by `judge` backends too). */
  purposes?: Array<PlaceRequest['purpose']>;
}

export interface InMemoryPlacementOptions {
  /**
   * Whether candidates whose worst case exceeds the budget left are excluded; default true. Off, it
   * behaves like a placement working from stale spend figures, leaving billing to refuse.
   */
  enforceBudget?: boolean;
}

/**
 * Picks from a fixed list. Work: cheapest first (lowest tier, then lowest price), `best` mode the
 * highest tier; an escalation needs a higher tier than the rejected backend. Judges: another model
 * family than the worker's when there is one, else the same family; highest tier, then cheapest.
 */
export class InMemoryPlacement implements PlacementPort {
  readonly requests: PlaceRequest[] = [];
  readonly decisions: Placement[] = [];
  readonly outcomes: Outcome[] = [];
  private readonly byRequestId = new Map<string, Placement>();
  private decisionCount = 0;

  constructor(
    readonly backends: BackendProfile[],
    private readonly options: InMemoryPlacementOptions = {},
  ) {}

  async place(request: PlaceRequest, signal: AbortSignal): Promise<Placement> {
    signal.throwIfAborted();
    this.requests.push(request);
    const earlier = this.byRequestId.get(request.requestId);
    if (earlier) return earlier;

    const exclusions: Array<{ backend: string; reason: string }> = [];
    const escalateFrom = this.backends.find((profile) => profile.backend === request.escalateFromBackend);
    let candidates = this.backends.filter((profile) => {
      const reason = this.exclusionReason(profile, request, escalateFrom);
      if (reason) exclusions.push({ backend: profile.backend, reason });
      return !reason;
    });
    if (candidates.length === 0) {
      throw new PortRefusal(
        'actor.no_capable_backend',
        `no capable backend: ${exclusions.map((exclusion) => `${exclusion.backend} ${exclusion.reason}`).join('; ') || 'none registered'}`,
      );
    }

    if (this.options.enforceBudget !== false) {
      const room = Math.min(request.taskBudgetLeftMicroUsd, request.dayBudgetLeftMicroUsd);
      const affordable = candidates.filter((profile) => profile.worstCaseCostMicroUsd <= room);
      for (const profile of candidates) {
        if (!affordable.includes(profile)) exclusions.push({ backend: profile.backend, reason: `costs up to ${profile.worstCaseCostMicroUsd} micro-USD, more than the ${room} left` });
      }
      if (affordable.length === 0) {
        throw new PortRefusal('actor.budget.exceeded', `every capable backend costs more than the ${room} micro-USD the budget leaves`);
      }
      candidates = affordable;
    }

    let sameFamily = false;
    if (request.purpose === 'judge' && request.avoidModelFamily !== undefined) {
      const otherFamily = candidates.filter((profile) => profile.modelFamily !== request.avoidModelFamily);
      sameFamily = otherFamily.length === 0;
      if (!sameFamily) candidates = otherFamily;
    }

    const byPrice = (left: BackendProfile, right: BackendProfile) => left.worstCaseCostMicroUsd - right.worstCaseCostMicroUsd;
    const strongestFirst = request.purpose === 'judge' || request.mode === 'best';
    const ranked = [...candidates].sort((left, right) =>
      strongestFirst ? right.qualityTier - left.qualityTier || byPrice(left, right) : left.qualityTier - right.qualityTier || byPrice(left, right),
    );
    const winner = ranked[0]!;
    this.decisionCount += 1;
    const placement: Placement = {
      decisionId: `dec_${this.decisionCount}`,
      backend: winner.backend,
      modelFamily: winner.modelFamily,
      qualityTier: winner.qualityTier,
      demo: winner.demo ?? false,
      worstCaseCostMicroUsd: winner.worstCaseCostMicroUsd,
      rateCardRevision: winner.rateCardRevision ?? 1,
      explanation: `Chose ${winner.backend} out of ${ranked.length} candidate${ranked.length === 1 ? '' : 's'}, ${strongestFirst ? 'the strongest' : 'the cheapest'}${sameFamily ? ', of the same family because no other family was available' : ''}.`,
      detail: { purpose: request.purpose, winner: winner.backend, candidates: ranked.map((profile) => profile.backend), exclusions },
    };
    this.byRequestId.set(request.requestId, placement);
    this.decisions.push(placement);
    return placement;
  }

  async reportOutcome(outcome: Outcome): Promise<void> {
    this.outcomes.push(outcome);
  }

  private exclusionReason(profile: BackendProfile, request: PlaceRequest, escalateFrom: BackendProfile | undefined): string | undefined {
    if (request.allowedBackends.length > 0 && !request.allowedBackends.includes(profile.backend)) return 'is not among the task\'s backends';
    if (request.excludeBackends.includes(profile.backend)) return 'was excluded';
    if (profile.purposes && !profile.purposes.includes(request.purpose) && !(request.purpose === 'classify' && profile.purposes.includes('judge'))) {
      return `does not take ${request.purpose === 'work' ? 'work' : request.purpose === 'judge' ? 'judging' : 'classifying'}`;
    }
    if (profile.taskClasses && !profile.taskClasses.includes(request.taskClass)) return `does not serve ${request.taskClass} tasks`;
    const missing = request.requiredCapabilities.filter((capability) => !(profile.capabilities ?? []).includes(capability));
    if (missing.length > 0) return `lacks ${missing.join(', ')}`;
    if (request.purpose === 'work' && request.escalateFromBackend !== undefined) {
      const floor = escalateFrom?.qualityTier ?? 0;
      if (profile.qualityTier <= floor) return `is not stronger than ${request.escalateFromBackend}`;
    }
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Billing

/** Prices of one backend, in micro-USD. */
export interface RateCard {
  inputMicroUsdPerMtok: number;
  outputMicroUsdPerMtok: number;
  microUsdPerCall: number;
}

interface StoredReservation {
  reservationId: string;
  requestId: string;
  projectId: string;
  taskId: string;
  attemptId: string;
  amountMicroUsd: number;
  state: 'held' | 'settled' | 'released';
  costMicroUsd: number;
  backend?: string;
}

export interface InMemoryBillingOptions {
  /** Prices per backend; a backend without one costs its reported cost, else nothing. */
  rates?: Record<string, RateCard>;
}

/**
 * Holds reservations against per-task and per-day limits (one day: it never rolls over). A settled
 * call costs its reported cost or its usage at the backend's rates, never more than was reserved.
 */
export class InMemoryBilling implements BillingPort {
  readonly reservations: StoredReservation[] = [];
  private count = 0;

  constructor(private readonly options: InMemoryBillingOptions = {}) {}

  async reserve(request: Parameters<BillingPort['reserve']>[0]): Promise<Reservation> {
    const earlier = this.reservations.find((reservation) => reservation.requestId === request.requestId);
    if (earlier) return { reservationId: earlier.reservationId, amountMicroUsd: earlier.amountMicroUsd };
    if (!Number.isInteger(request.amountMicroUsd) || request.amountMicroUsd < 0) {
      throw new Error(`a reservation amount is a non-negative integer, not ${request.amountMicroUsd}`);
    }
    // Checked and recorded without an await in between, so concurrent reservations cannot both fit.
    const spend = this.spendNow(request.projectId, request.taskId);
    if (spend.taskMicroUsd + request.amountMicroUsd > request.perTaskLimitMicroUsd) {
      throw new PortRefusal(
        'actor.budget.exceeded',
        `the task's budget of ${request.perTaskLimitMicroUsd} micro-USD has ${Math.max(0, request.perTaskLimitMicroUsd - spend.taskMicroUsd)} left, ${request.amountMicroUsd} are needed`,
      );
    }
    if (spend.dayMicroUsd + request.amountMicroUsd > request.perDayLimitMicroUsd) {
      throw new PortRefusal(
        'actor.budget.exceeded',
        `the project's day budget of ${request.perDayLimitMicroUsd} micro-USD has ${Math.max(0, request.perDayLimitMicroUsd - spend.dayMicroUsd)} left, ${request.amountMicroUsd} are needed`,
      );
    }
    this.count += 1;
    const stored: StoredReservation = {
      reservationId: `res_${this.count}`,
      requestId: request.requestId,
      projectId: request.projectId,
      taskId: request.taskId,
      attemptId: request.attemptId,
      amountMicroUsd: request.amountMicroUsd,
      state: 'held',
      costMicroUsd: 0,
    };
    this.reservations.push(stored);
    return { reservationId: stored.reservationId, amountMicroUsd: stored.amountMicroUsd };
  }

  async settle(request: Parameters<BillingPort['settle']>[0]): Promise<{ costMicroUsd: number }> {
    const stored = this.find(request.reservationId);
    if (stored.state === 'settled') return { costMicroUsd: stored.costMicroUsd };
    if (stored.state === 'released') throw new Error(`reservation ${request.reservationId} was released; it cannot be settled`);
    const priced = request.reportedCostMicroUsd ?? this.price(request.backend, request.usage);
    stored.costMicroUsd = Math.min(stored.amountMicroUsd, Math.max(0, Math.ceil(priced)));
    stored.state = 'settled';
    stored.backend = request.backend;
    return { costMicroUsd: stored.costMicroUsd };
  }

  async release(reservationId: string): Promise<void> {
    const stored = this.find(reservationId);
    if (stored.state === 'held') stored.state = 'released';
  }

  async spend(projectId: string, taskId: string): Promise<{ taskMicroUsd: number; dayMicroUsd: number }> {
    return this.spendNow(projectId, taskId);
  }

  private spendNow(projectId: string, taskId: string): { taskMicroUsd: number; dayMicroUsd: number } {
    const amount = (reservation: StoredReservation) =>
      reservation.state === 'held' ? reservation.amountMicroUsd : reservation.state === 'settled' ? reservation.costMicroUsd : 0;
    let taskMicroUsd = 0;
    let dayMicroUsd = 0;
    for (const reservation of this.reservations) {
      if (reservation.projectId !== projectId) continue;
      dayMicroUsd += amount(reservation);
      if (reservation.taskId === taskId) taskMicroUsd += amount(reservation);
    }
    return { taskMicroUsd, dayMicroUsd };
  }

  /** Reservations neither settled nor released. */
  held(): StoredReservation[] {
    return this.reservations.filter((reservation) => reservation.state === 'held');
  }

  /** What was settled for a task, in micro-USD. */
  settledMicroUsd(taskId: string): number {
    return this.reservations
      .filter((reservation) => reservation.taskId === taskId && reservation.state === 'settled')
      .reduce((sum, reservation) => sum + reservation.costMicroUsd, 0);
  }

  private find(reservationId: string): StoredReservation {
    const stored = this.reservations.find((reservation) => reservation.reservationId === reservationId);
    if (!stored) throw new Error(`no reservation ${reservationId}`);
    return stored;
  }

  private price(backend: string, usage: UsageSample): number {
    const rate = this.options.rates?.[backend];
    if (!rate) return 0;
    return (
      (usage.inputTokens * rate.inputMicroUsdPerMtok + usage.outputTokens * rate.outputMicroUsdPerMtok) / 1_000_000 +
      usage.calls * rate.microUsdPerCall
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Pool

/** One agent slot: it serves one lease at a time. */
export interface AgentSlot {
  agentId: string;
  agentType: string;
  /** `*` or a list (task classes, features). */
  capabilities?: string[];
  configuration?: Record<string, unknown>;
}

interface Waiter {
  request: Parameters<PoolPort['acquire']>[0];
  grant: (lease: Lease) => void;
}

/**
 * Slots of agents with first-come, first-served waiting. An acquire names an agent (explicit
 * assignment) or an agent type; among free slots of that type one with the capability wins, else any.
 */
export class InMemoryPool implements PoolPort {
  /** Every lease ever granted, in order. */
  readonly granted: Lease[] = [];
  private readonly active = new Map<string, { lease: Lease; requestId: string }>();
  private waiters: Waiter[] = [];
  private leaseCount = 0;

  constructor(readonly agents: AgentSlot[]) {}

  acquire(request: Parameters<PoolPort['acquire']>[0], signal: AbortSignal): Promise<Lease> {
    signal.throwIfAborted();
    const earlier = [...this.active.values()].find((held) => held.requestId === request.requestId);
    if (earlier) return Promise.resolve(earlier.lease);
    if (this.matching(request).length === 0) {
      const who = request.agentId ? `agent ${request.agentId} of type ${request.agentType}` : `agent of type ${request.agentType}`;
      return Promise.reject(new PortRefusal('actor.pool.no_matching_agent', `no ${who} exists`));
    }
    const lease = this.grantFree(request);
    if (lease) return Promise.resolve(lease);
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = {
        request,
        grant: (granted) => {
          signal.removeEventListener('abort', onAbort);
          resolve(granted);
        },
      };
      const onAbort = () => {
        this.waiters = this.waiters.filter((other) => other !== waiter);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  async release(lease: Lease): Promise<void> {
    const held = this.active.get(lease.agentId);
    if (!held || held.lease.leaseId !== lease.leaseId) return;
    this.active.delete(lease.agentId);
    // Oldest waiter first; a waiter whose agents are all still busy keeps its place.
    for (const waiter of [...this.waiters]) {
      const granted = this.grantFree(waiter.request);
      if (!granted) continue;
      this.waiters = this.waiters.filter((other) => other !== waiter);
      waiter.grant(granted);
    }
  }

  /** Leases not released yet. */
  held(): Lease[] {
    return [...this.active.values()].map((held) => held.lease);
  }

  /** Acquires still waiting for a slot. */
  waiting(): number {
    return this.waiters.length;
  }

  private matching(request: Parameters<PoolPort['acquire']>[0]): AgentSlot[] {
    if (request.agentId) return this.agents.filter((agent) => agent.agentId === request.agentId);
    return this.agents.filter((agent) => agent.agentType === request.agentType);
  }

  private grantFree(request: Parameters<PoolPort['acquire']>[0]): Lease | undefined {
    const free = this.matching(request).filter((agent) => !this.active.has(agent.agentId));
    const capable = request.capability
      ? free.find((agent) => agent.capabilities?.includes('*') || agent.capabilities?.includes(request.capability!))
      : undefined;
    const agent = capable ?? free[0];
    if (!agent) return undefined;
    this.leaseCount += 1;
    const lease: Lease = {
      leaseId: `lse_${this.leaseCount}`,
      epoch: this.leaseCount,
      agentId: agent.agentId,
      agentType: agent.agentType,
      configuration: { ...agent.configuration },
    };
    this.active.set(agent.agentId, { lease, requestId: request.requestId });
    this.granted.push(lease);
    return lease;
  }
}

// ---------------------------------------------------------------------------------------------
// Agents

/** One call of a scripted agent, as its script sees it. */
export interface ScriptedCall {
  backend: string;
  request: AgentRequest;
  signal: AbortSignal;
  /** Set for `executeWithSchema`. */
  jsonSchema?: Record<string, unknown>;
  /** Streams an `output` event (a no-op for `executeWithSchema`). */
  emit(text: string): void;
}

export type AgentScript = (call: ScriptedCall) => AgentResult | Promise<AgentResult>;

/** What a call to the scripted agents port looked like. */
export interface RecordedAgentCall {
  backend: string;
  method: 'execute' | 'executeWithSchema';
  request: AgentRequest;
}

/**
 * Runs scripts instead of adapters. A backend's script is one function, or a list played one per
 * call (the last one repeating). A backend without a script answers like a missing adapter.
 */
export class ScriptedAgents implements AgentsPort {
  readonly calls: RecordedAgentCall[] = [];
  private readonly played = new Map<string, number>();

  constructor(private readonly scripts: Record<string, AgentScript | AgentScript[]>) {}

  async execute(backend: string, request: AgentRequest, signal: AbortSignal, onEvent: (event: AgentEvent) => void): Promise<AgentResult> {
    this.calls.push({ backend, method: 'execute', request });
    return this.play({ backend, request, signal, emit: (text) => onEvent({ kind: 'output', text }) });
  }

  async executeWithSchema(
    backend: string,
    request: AgentRequest,
    jsonSchema: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<AgentResult> {
    this.calls.push({ backend, method: 'executeWithSchema', request });
    return this.play({ backend, request, signal, jsonSchema, emit: () => undefined });
  }

  private async play(call: ScriptedCall): Promise<AgentResult> {
    const script = this.scripts[call.backend];
    if (!script) {
      return { ...emptyResult(), success: false, errorKind: 'unavailable', errorMessage: `no adapter for ${call.backend}` };
    }
    const index = this.played.get(call.backend) ?? 0;
    this.played.set(call.backend, index + 1);
    const step = Array.isArray(script) ? script[Math.min(index, script.length - 1)] : script;
    if (!step) return { ...emptyResult(), success: false, errorKind: 'unavailable', errorMessage: `empty script for ${call.backend}` };
    return step(call);
  }
}

function emptyResult(): AgentResult {
  return { success: true, output: '', executionLog: [], inputTokens: 0, outputTokens: 0, durationMs: 0 };
}

export interface ScriptUsage {
  inputTokens?: number;
  outputTokens?: number;
  durationMs?: number;
  reportedCostMicroUsd?: number;
}

function usageOf(usage: ScriptUsage, request: AgentRequest, output: string) {
  return {
    inputTokens: usage.inputTokens ?? Math.ceil(request.prompt.length / 4),
    outputTokens: usage.outputTokens ?? Math.ceil(output.length / 4),
    durationMs: usage.durationMs ?? 10,
    reportedCostMicroUsd: usage.reportedCostMicroUsd,
  };
}

/** Answers `text`, streamed in two halves. */
export function answers(text: string, usage: ScriptUsage = {}): AgentScript {
  return (call) => {
    const middle = Math.ceil(text.length / 2);
    if (text.length > 0) call.emit(text.slice(0, middle));
    if (text.length > middle) call.emit(text.slice(middle));
    return { ...emptyResult(), output: text, executionLog: ['answered'], ...usageOf(usage, call.request, text) };
  };
}

/** Fails with `errorKind`, after streaming `partialOutput` when given. */
export function fails(errorKind: NonNullable<AgentResult['errorKind']>, message: string, partialOutput = '', usage: ScriptUsage = {}): AgentScript {
  return (call) => {
    if (partialOutput) call.emit(partialOutput);
    return {
      ...emptyResult(),
      success: false,
      output: partialOutput,
      errorKind,
      errorMessage: message,
      executionLog: [message],
      ...usageOf(usage, call.request, partialOutput),
    };
  };
}

/** A judge that returns this verdict as structured output. */
export function judges(pass: boolean, reasons: string[] = [pass ? 'The answer does what the task asks.' : 'The answer is wrong.'], usage: ScriptUsage = {}): AgentScript {
  return (call) => {
    const structured = {
      pass,
      reasons,
      scores: { correctness: pass ? 0.9 : 0.2, completeness: pass ? 0.9 : 0.3, relevance: pass ? 1 : 0.5 },
    };
    const output = JSON.stringify(structured);
    return { ...emptyResult(), output, structured, executionLog: ['judged'], ...usageOf(usage, call.request, output) };
  };
}

/**
 * A deterministic judge for demos: reads the task and the answer from the judge prompt and passes an
 * answer that is not empty and shares a word of four letters or more with the task.
 */
export function keywordJudge(usage: ScriptUsage = {}): AgentScript {
  return (call) => {
    const sections = readJudgePrompt(call.request.prompt);
    const taskWords = new Set((sections?.task.toLowerCase().match(/[a-z]{4,}/g) ?? []));
    const answerWords = sections?.answer.toLowerCase().match(/[a-z]{4,}/g) ?? [];
    const shared = answerWords.filter((word) => taskWords.has(word));
    const pass = sections !== undefined && sections.answer.trim() !== '' && shared.length > 0;
    const reasons = pass
      ? [`The answer addresses the task (it speaks of ${[...new Set(shared)].slice(0, 3).join(', ')}).`]
      : ['The answer is empty or does not address the task.'];
    return judges(pass, reasons, usage)(call);
  };
}

/**
 * Streams `partialOutput`, calls `onStarted` (a test aborts there), then waits for the abort and
 * resolves as a cancelled run that consumed `usage`.
 */
export function runsUntilCancelled(partialOutput: string, onStarted: () => void = () => undefined, usage: ScriptUsage = {}): AgentScript {
  return async (call) => {
    if (partialOutput) call.emit(partialOutput);
    await new Promise<void>((resolve) => {
      if (call.signal.aborted) return resolve();
      call.signal.addEventListener('abort', () => resolve(), { once: true });
      onStarted();
    });
    return {
      ...emptyResult(),
      success: false,
      output: partialOutput,
      errorKind: 'cancelled',
      errorMessage: 'cancelled',
      ...usageOf(usage, call.request, partialOutput),
    };
  };
}

// ---------------------------------------------------------------------------------------------
// Trace and memory

/** Keeps everything the engine recorded. */
export class InMemoryTrace implements TracePort {
  classification: Classification | undefined;
  readonly states: Array<'running' | 'verifying'> = [];
  readonly outputs: Array<{ attempt: number; text: string }> = [];
  readonly explanations: ExplanationEntry[] = [];
  /** The latest version of each attempt, by id, in the order they were first written. */
  readonly attempts = new Map<string, AttemptRecord>();
  /** Every write of an attempt, in order. */
  readonly attemptWrites: AttemptRecord[] = [];

  async classified(classification: Classification): Promise<void> {
    this.classification = classification;
  }

  async state(state: 'running' | 'verifying'): Promise<void> {
    this.states.push(state);
  }

  async output(attempt: number, text: string): Promise<void> {
    this.outputs.push({ attempt, text });
  }

  async explain(entry: ExplanationEntry): Promise<void> {
    this.explanations.push(entry);
  }

  async attempt(record: AttemptRecord): Promise<void> {
    const copy = structuredClone(record);
    this.attempts.set(record.id, copy);
    this.attemptWrites.push(copy);
  }

  /** The steps of the explanation, in order. */
  steps(): ExplanationEntry['step'][] {
    return this.explanations.map((entry) => entry.step);
  }
}

/** Notes per project, returned for every task of it; every call is recorded. */
export class InMemoryMemory implements MemoryPort {
  readonly calls: Array<{ projectId: string; input: string; context?: RecallContext }> = [];

  constructor(private readonly notes: Record<string, string[]> = {}) {}

  async recall(projectId: string, input: string, context?: RecallContext): Promise<string[]> {
    this.calls.push({ projectId, input, context });
    return [...(this.notes[projectId] ?? [])];
  }
}

// ---------------------------------------------------------------------------------------------
// Workspace

/** Decides a test command's result from the files of a working copy. */
export type InMemoryCheck = (files: ReadonlyMap<string, string>, command: string) => { passed: boolean; output: string };

/**
 * Working copies as maps of file name to content, each starting from the same files. Scripted agents
 * change a copy with `write(workingDirectory, ...)`; `check` decides the test command's result.
 */
export class InMemoryWorkspace implements WorkspacePort {
  readonly prepared: string[] = [];
  readonly disposed: string[] = [];
  readonly checksRun: Array<{ path: string; command: string; timeoutMs?: number }> = [];
  /** Runs before each check resolves (to cancel mid-check in a test). */
  beforeCheckResult: (() => void) | undefined;
  private readonly copies = new Map<string, Map<string, string>>();

  constructor(
    private readonly files: Record<string, string>,
    private readonly check: InMemoryCheck,
  ) {}

  async prepare(task: EngineTask, attemptId: string): Promise<PreparedWorkspace> {
    const path = `/workspaces/${task.id}/${attemptId}`;
    this.copies.set(path, new Map(Object.entries(this.files)));
    this.prepared.push(path);
    return { path, attemptId };
  }

  write(path: string | undefined, file: string, content: string): void {
    const copy = path === undefined ? undefined : this.copies.get(path);
    if (!copy) throw new Error(`no working copy at ${path}`);
    copy.set(file, content);
  }

  async runCheck(workspace: PreparedWorkspace, command: string, signal: AbortSignal, options?: { timeoutMs?: number }): Promise<CheckResult> {
    this.checksRun.push({ path: workspace.path, command, ...(options?.timeoutMs ? { timeoutMs: options.timeoutMs } : {}) });
    if (signal.aborted) return { passed: false, exitCode: null, outputTail: '', timedOut: false };
    this.beforeCheckResult?.();
    if (signal.aborted) return { passed: false, exitCode: null, outputTail: '', timedOut: false };
    const { passed, output } = this.check(this.copy(workspace), command);
    return { passed, exitCode: passed ? 0 : 1, outputTail: output, timedOut: false };
  }

  async diff(workspace: PreparedWorkspace): Promise<WorkspaceDiff> {
    const copy = this.copy(workspace);
    const changedFiles = [...copy.keys()].filter((file) => this.files[file] !== copy.get(file)).sort();
    return { diff: changedFiles.map((file) => `${file} | changed`).join('\n'), changedFiles };
  }

  async dispose(workspace: PreparedWorkspace): Promise<void> {
    this.copies.delete(workspace.path);
    this.disposed.push(workspace.path);
  }

  /** The repository's files at the task's ref (the starting files); paths that climb out are left out. */
  async readFiles(_task: EngineTask, paths: string[], maxCharacters: number): Promise<WorkspaceFile[]> {
    return paths
      .filter((path) => !path.split('/').includes('..') && !path.startsWith('/') && this.files[path] !== undefined)
      .map((path) => {
        const content = this.files[path]!;
        return {
          path,
          content: content.slice(0, maxCharacters),
          truncated: content.length > maxCharacters,
          sizeBytes: Buffer.byteLength(content),
        };
      });
  }

  /** Copies not disposed yet. */
  open(): string[] {
    return [...this.copies.keys()];
  }

  private copy(workspace: PreparedWorkspace): Map<string, string> {
    const copy = this.copies.get(workspace.path);
    if (!copy) throw new Error(`no working copy at ${workspace.path}`);
    return copy;
  }
}

// ---------------------------------------------------------------------------------------------
// All together

export interface InMemoryPortsOptions {
  backends: BackendProfile[];
  scripts: Record<string, AgentScript | AgentScript[]>;
  /** Agent slots; default one per backend, `agt_<backend>`, serving every capability. */
  agents?: AgentSlot[];
  rates?: Record<string, RateCard>;
  memory?: Record<string, string[]>;
  placement?: InMemoryPlacementOptions;
  workspace?: InMemoryWorkspace;
}

export interface InMemoryPorts {
  ports: EnginePorts;
  placement: InMemoryPlacement;
  billing: InMemoryBilling;
  pool: InMemoryPool;
  agents: ScriptedAgents;
  trace: InMemoryTrace;
  workspace?: InMemoryWorkspace;
}

/** A complete set of in-memory ports, each also returned for inspection. */
export function createInMemoryPorts(options: InMemoryPortsOptions): InMemoryPorts {
  const placement = new InMemoryPlacement(options.backends, options.placement);
  const billing = new InMemoryBilling({ rates: options.rates });
  const pool = new InMemoryPool(
    options.agents ??
      options.backends.map((profile) => ({ agentId: `agt_${profile.backend}`, agentType: profile.backend, capabilities: ['*'] })),
  );
  const agents = new ScriptedAgents(options.scripts);
  const trace = new InMemoryTrace();
  let attempts = 0;
  const ports: EnginePorts = {
    placement,
    billing,
    pool,
    agents,
    trace,
    memory: options.memory ? new InMemoryMemory(options.memory) : undefined,
    workspace: options.workspace,
    newAttemptId: () => {
      attempts += 1;
      return `att_${attempts}`;
    },
  };
  return { ports, placement, billing, pool, agents, trace, workspace: options.workspace };
}
