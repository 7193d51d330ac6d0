import type { AgentEvent, AgentRequest, AgentResult } from './agent.js';
import { checkCitations } from './citation-check.js';
import { classifyTask } from './classifier.js';
import { formatUsd } from './format-usd.js';
import { buildJudgeRequest, parseVerdict, verdictJsonSchema, type JudgeVerdict } from './judge.js';
import {
  buildClassifierRequest,
  classificationJsonSchema,
  mergeModelClassification,
  parseModelClassification,
} from './model-classifier.js';
import {
  PortRefusal,
  type AttemptRecord,
  type Classification,
  type EngineOptions,
  type EngineOutcome,
  type EnginePorts,
  type EngineTask,
  type ExplanationEntry,
  type Lease,
  type Placement,
  type PlaceRequest,
  type PreparedWorkspace,
  type Reservation,
  type TaskClass,
  type TaskErrorCode,
  type WorkspaceFile,
} from './ports.js';

const defaultMaxAttempts = 3;
const defaultTimeoutMs = 120_000;
/** A judge is placed before the answer exists; this many tokens stand in for the answer in its estimate. */
const assumedAnswerTokens = 1_000;
/** A judge that errors or returns no valid verdict gets one replacement, then verification is unavailable. */
const maxJudgesPerAttempt = 2;
/** The classifier call is a side step of evaluate: past this the local classification stands. */
const defaultClassifierTimeoutMs = 15_000;
/** The class the classifier call is placed and reported under (see `classifyWithModel`). */
const classifierTaskClass: TaskClass = 'general';

/**
 * Bounds of the enhance step, so that context never crowds out the task: at most `notes` lines from
 * memory, each cut to `noteCharacters`; at most `files` files the task names, each cut to
 * `fileCharacters`, and all files together to `totalFileCharacters`.
 */
export const enhanceLimits = {
  notes: 5,
  noteCharacters: 300,
  files: 8,
  fileCharacters: 8_000,
  totalFileCharacters: 24_000,
} as const;

/**
 * Paths a task text names: `src/app.ts`, `README.md`, `docs/guide/intro.md` (a name with an
 * extension, possibly in folders), standing alone or in quotes or backticks. URLs and paths that
 * climb out (`..`) are not candidates.
 */
export function namedFiles(text: string): string[] {
  const found: string[] = [];
  const pattern = /(?:^|[\s`'"(\[])((?:[\w.-]+\/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,9})(?=$|[\s`'")\],:;!?]|\.(?:\s|$))/gm;
  for (const match of text.matchAll(pattern)) {
    const path = match[1]!.replace(/^\.\//, '');
    if (path.split('/').some((part) => part === '..' || part === '')) continue;
    if (!found.includes(path)) found.push(path);
  }
  return found;
}

function cut(text: string, characters: number): string {
  return text.length <= characters ? text : `${text.slice(0, characters - 1)}…`;
}

/**
 * Runs one task through evaluate -> place -> reserve -> lease -> execute -> verify, escalating after a
 * rejected answer and failing over after a backend error, until an answer passes or nothing is left.
 * Resolves with how the task ended (the caller writes the terminal state); rejects only when a port
 * fails unexpectedly, after releasing what it holds, so that the caller can retry the task later.
 */
export async function runTask(
  task: EngineTask,
  ports: EnginePorts,
  signal: AbortSignal,
  options: EngineOptions = {},
): Promise<EngineOutcome> {
  return new TaskRun(task, ports, signal, options).run();
}

type WorkPurpose = 'work' | 'judge' | `judge-${number}` | 'classify';

/** What the evaluate step settled on, and the explanation entry that says so. */
interface Evaluation {
  classification: Classification;
  message: string;
  backend?: string;
  decisionId?: string;
  detail: unknown;
}

interface AttemptFailure {
  attempt: number;
  backend: string;
  demo: boolean;
  how: 'rejected' | 'errored';
  detail: string;
  /** For a rejection by the task's own check rather than the judge: what rejected it. */
  rejectedBy?: string;
}

type JudgeRun = { ok: true; verdict: JudgeVerdict } | { ok: false; error: string };

/** Thrown inside the run when the caller's signal aborted or the adapter reports it was cancelled. */
class RunCancelled extends Error {}

function isOutcome(value: object): value is EngineOutcome {
  return 'state' in value && 'costMicroUsd' in value;
}

function isRefusal(error: unknown): error is PortRefusal {
  return error instanceof PortRefusal;
}

function named(backend: string, demo: boolean): string {
  return demo ? `${backend} (demo backend)` : backend;
}

function namedPlacement(placement: Placement): string {
  return named(placement.backend, placement.demo);
}

/** A text from elsewhere (placement, a refusal, a judge) made a sentence: capitalised, ended. */
function sentence(text: string): string {
  const trimmed = text.trim();
  if (trimmed === '') return '';
  // Identifiers such as `demo:beta-small` keep their case; prose gets a capital.
  const startsWithIdentifier = /^[a-z0-9-]+[:/]/.test(trimmed);
  const capitalised = startsWithIdentifier ? trimmed : trimmed.charAt(0).toUpperCase() + trimmed.slice(1);
  return /[.!?]$/.test(capitalised) ? capitalised : `${capitalised}.`;
}

/** A text from elsewhere, to sit inside a sentence of ours: trimmed, without its final period. */
function clause(text: string): string {
  return text.trim().replace(/[.!?]+$/, '');
}

function seconds(milliseconds: number): string {
  return `${(milliseconds / 1000).toFixed(1)} s`;
}

function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

function describeFailure(result: AgentResult): string {
  const reason = `${result.errorKind ?? 'error'}: ${result.errorMessage?.trim() || 'no reason given'}`;
  if (result.output === '') return reason;
  return `${reason}, after ${result.output.length} characters of partial output, which are discarded`;
}

/** A refusal of the agents port (no such adapter here) read as a failed run that consumed nothing. */
function refusedRun(refusal: PortRefusal): AgentResult {
  return {
    success: false,
    output: '',
    errorKind: 'unavailable',
    errorMessage: `${refusal.code}: ${refusal.message}`,
    executionLog: [],
    inputTokens: 0,
    outputTokens: 0,
    durationMs: 0,
  };
}

class TaskRun {
  private readonly maxAttempts: number;
  private readonly timeoutMs: number;
  private readonly judgeEnabled: boolean;
  private readonly attemptOffset: number;
  private readonly classifierBackend: string | undefined;
  private readonly classifierTimeoutMs: number;
  private classification!: Classification;
  /** The idempotency key of this run's classifier call (see `classifyWithModel`). */
  private classifyRequestId: string | undefined;
  private prompt = '';
  private costMicroUsd = 0;
  private attemptNumber = 0;
  /** Reservations made and neither settled nor released yet. */
  private readonly held = new Map<string, Reservation>();
  private lease: Lease | undefined;
  /** The attempt row last written, so a cancel can close it. */
  private current: AttemptRecord | undefined;
  private readonly failures: AttemptFailure[] = [];
  /** The last backend whose answer the judge rejected: later attempts must be stronger than it. */
  private escalateFrom: string | undefined;

  constructor(
    private readonly task: EngineTask,
    private readonly ports: EnginePorts,
    private readonly signal: AbortSignal,
    options: EngineOptions,
  ) {
    this.maxAttempts = Math.max(1, Math.floor(options.maxAttempts ?? defaultMaxAttempts));
    this.timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
    this.judgeEnabled = task.verify.judge !== false;
    this.attemptOffset = Math.max(0, Math.floor(options.attemptOffset ?? 0));
    this.classifierBackend = options.classifierBackend?.trim() || undefined;
    this.classifierTimeoutMs = Math.max(1, Math.floor(options.classifierTimeoutMs ?? defaultClassifierTimeoutMs));
  }

  async run(): Promise<EngineOutcome> {
    try {
      return await this.pipeline();
    } catch (error) {
      if (error instanceof RunCancelled || this.signal.aborted) return this.cancelled();
      // The original error is what the caller must see; a failed clean-up here expires on its own TTL.
      await this.releaseEverything().catch(() => undefined);
      throw error;
    }
  }

  private async pipeline(): Promise<EngineOutcome> {
    this.checkCancel();
    const local = classifyTask(this.task);
    this.classification = local;
    const evaluation = this.classifierBackend
      ? await this.classifyWithModel(local, this.classifierBackend)
      : { classification: local, message: `Local classifier: ${local.reason}`, detail: local };
    this.classification = evaluation.classification;
    await this.ports.trace.classified(this.classification);
    await this.explain({
      step: 'evaluate',
      attempt: 0,
      message: evaluation.message,
      backend: evaluation.backend,
      decisionId: evaluation.decisionId,
      detail: evaluation.detail,
    });
    this.prompt = await this.enhance();
    if (this.task.verify.postconditions?.length && !this.ports.workspace) {
      return this.fail(
        'actor.verification.unavailable',
        "The task's postconditions must run in a working copy of its workspace, and this engine has no workspace to run them in, so its answer could not be checked. Nothing was run.",
      );
    }

    for (let number = 1; number <= this.maxAttempts; number++) {
      this.attemptNumber = number;
      const outcome = await this.attempt(number);
      if (outcome) return outcome;
    }
    const goal = this.judgeEnabled ? 'an answer that passed verification' : 'an answer';
    return this.fail(
      this.lastFailureCode(),
      `All ${this.maxAttempts} attempts were used without ${goal}: ${this.triedText()}.`,
    );
  }

  /**
   * The optional model classifier. The call is billed to the task with the machinery a judge call
   * uses: placed (restricted to the classifier backend), its worst case reserved, a pool slot leased,
   * its usage settled and its outcome reported. A bare reserve+settle through billing would be less
   * code, but it would need the placement's worst case and rate card revision anyway, would run the
   * adapter outside the pool's concurrency limit (the one slot count an operator sets per backend),
   * and would keep the call out of the backend's health signals; placing it also applies the task's
   * mode (private mode keeps the task text away from a backend it does not trust). Its purpose
   * `classify` is placed like a judge, being like one a text-only side call that must not move the
   * work's incumbent nor count as a work sample, but only on the classifier backend; and for class
   * `general`, since classifying is the same job whatever the class. As for the judge, the task's
   * backend list does not apply: it names who may do the work.
   * Whatever goes wrong, the local classification stands; only the caller's cancel and unexpected
   * port failures end the run, as everywhere else.
   */
  private async classifyWithModel(local: Classification, backend: string): Promise<Evaluation> {
    const localStands = (why: string, placement?: Placement, extra: Record<string, unknown> = {}): Evaluation => ({
      classification: local,
      message: `Local classifier (the model classifier on ${placement ? namedPlacement(placement) : backend} was not used: ${why}): ${local.reason}`,
      backend,
      decisionId: placement?.decisionId,
      detail: { classifier: 'local', classifierBackend: backend, notUsedBecause: why, local, ...extra },
    });

    // Evaluate runs again in a resumed run, before any attempt row exists, so the attempt offset
    // cannot tell runs apart here: a fresh id per run keeps this run off a dead run's reservation.
    const callId = this.ports.newAttemptId();
    this.classifyRequestId = `${this.task.id}:classify:${callId}`;
    const request = buildClassifierRequest(this.task);
    const left = await this.budgetLeft();
    this.checkCancel();

    let placement: Placement;
    try {
      placement = await this.ports.placement.place(
        {
          taskId: this.task.id,
          projectId: this.task.projectId,
          requestId: this.requestId(0, 'classify'),
          taskClass: classifierTaskClass,
          requiredCapabilities: [],
          estimatedInputTokens: estimateTokens(`${request.systemPrompt ?? ''}\n${request.prompt}`),
          mode: this.task.mode,
          taskBudgetLeftMicroUsd: left.taskMicroUsd,
          dayBudgetLeftMicroUsd: left.dayMicroUsd,
          allowedBackends: [backend],
          excludeBackends: [],
          purpose: 'classify',
        },
        this.signal,
      );
    } catch (error) {
      if (!isRefusal(error) || this.signal.aborted) throw error;
      const why =
        error.code === 'actor.budget.exceeded'
          ? `the budget is too small for it, ${budgetLeftPhrase(left)} (${clause(error.message)})`
          : `it could not be placed (${clause(error.message)})`;
      return localStands(why, undefined, { refusal: error.code });
    }
    this.checkCancel();

    let reservation: Reservation;
    try {
      reservation = await this.reserve(0, 'classify', callId, placement.worstCaseCostMicroUsd);
    } catch (error) {
      if (!isRefusal(error) || error.code !== 'actor.budget.exceeded' || this.signal.aborted) throw error;
      return localStands(
        `the budget is too small for its worst case of ${formatUsd(placement.worstCaseCostMicroUsd)} (${clause(error.message)})`,
        placement,
        { refusal: error.code, placement: placement.detail },
      );
    }
    this.checkCancel();

    // One time limit over the wait for a slot and the call: a busy classifier must not hold the task.
    const timeout = AbortSignal.timeout(this.classifierTimeoutMs);
    const signal = AbortSignal.any([this.signal, timeout]);
    const limit = seconds(this.classifierTimeoutMs);
    let lease: Lease;
    try {
      lease = await this.ports.pool.acquire(
        {
          requestId: this.requestId(0, 'classify'),
          workType: 'classify',
          workId: this.task.id,
          projectId: this.task.projectId,
          agentType: placement.backend,
        },
        signal,
      );
      this.lease = lease;
    } catch (error) {
      if (this.signal.aborted) throw error;
      if (!isRefusal(error) && !timeout.aborted) throw error;
      await this.releaseReservation(reservation);
      if (isRefusal(error)) {
        await this.report(0, 'classify', placement, refusedRun(error), false, 0);
        return localStands(`no agent slot of type ${placement.backend} could be leased (${clause(error.message)})`, placement);
      }
      return localStands(`no agent slot of type ${placement.backend} came free within ${limit}`, placement);
    }
    this.checkCancel();

    const agentRequest: AgentRequest = {
      ...request,
      timeoutMs: this.classifierTimeoutMs,
      maxBudgetMicroUsd: reservation.amountMicroUsd,
      executionId: callId,
      projectId: this.task.projectId,
      configuration: lease.configuration,
    };
    let result: AgentResult;
    try {
      result = await this.ports.agents.executeWithSchema(placement.backend, agentRequest, classificationJsonSchema, signal);
    } catch (error) {
      if (this.signal.aborted) throw error;
      // The call is optional: even an adapter that throws only costs the task its local classification.
      result = isRefusal(error)
        ? refusedRun(error)
        : { ...refusedRun(new PortRefusal('error', error instanceof Error ? error.message : String(error))), errorKind: 'backend' };
    } finally {
      await this.releaseLease();
    }

    const cost = await this.settle(reservation, placement, result);
    if (this.signal.aborted) throw new RunCancelled();
    const parsed = timeout.aborted
      ? ({ ok: false, error: `it gave no answer within ${limit}` } as const)
      : parseModelClassification(result);
    const reported: AgentResult = parsed.ok
      ? result
      : { ...result, success: false, errorKind: timeout.aborted ? 'timeout' : (result.errorKind ?? 'backend') };
    await this.report(0, 'classify', placement, reported, parsed.ok, cost);

    const usage = `${seconds(result.durationMs)}, ${result.inputTokens} input and ${result.outputTokens} output tokens, ${formatUsd(cost)} of the ${formatUsd(reservation.amountMicroUsd)} reserved`;
    const call = {
      reservationId: reservation.reservationId,
      costMicroUsd: cost,
      inputTokens: result.inputTokens,
      outputTokens: result.outputTokens,
      durationMs: result.durationMs,
      placement: placement.detail,
    };
    if (!parsed.ok) {
      return localStands(`${clause(parsed.error)}; the call took ${usage}`, placement, { call });
    }
    const classification = mergeModelClassification(local, parsed.value);
    const visionNote =
      parsed.value.vision === local.vision
        ? ''
        : ` The model said vision is ${parsed.value.vision ? '' : 'not '}needed; vision stays ${local.vision ? 'needed' : 'not needed'}, as the task ${local.vision ? 'carries images or asks for vision' : 'carries no images and does not ask for vision'}.`;
    return {
      classification,
      message: `Model classifier on ${namedPlacement(placement)}: ${classification.taskClass}, difficulty ${classification.difficulty} of 3 (${usage}). ${sentence(classification.reason)}${visionNote} The local classifier had said ${local.taskClass}, difficulty ${local.difficulty}.`,
      backend: placement.backend,
      decisionId: placement.decisionId,
      detail: { classifier: 'model', classifierBackend: placement.backend, classification, model: parsed.value, local, call },
    };
  }

  /**
   * The enhance step: adds to the prompt what earlier tasks of the project taught (memory) and the
   * files the task names (from its repository at its ref), within `enhanceLimits`, and records what
   * was added and its size. Context is best effort: a memory or workspace that fails adds nothing.
   */
  private async enhance(): Promise<string> {
    const sections: string[] = [];
    const detail: {
      memory: string[];
      files: Array<{ path: string; characters: number; sizeBytes: number; truncated: boolean }>;
      notFound: string[];
      problems: string[];
      addedCharacters: number;
    } = { memory: [], files: [], notFound: [], problems: [], addedCharacters: 0 };

    if (this.ports.memory) {
      try {
        const recalled = await this.ports.memory.recall(this.task.projectId, this.task.input, {
          taskId: this.task.id,
          taskClass: this.classification.taskClass,
        });
        detail.memory = recalled
          .map((note) => note.replace(/\s+/g, ' ').trim())
          .filter((note) => note !== '')
          .slice(0, enhanceLimits.notes)
          .map((note) => cut(note, enhanceLimits.noteCharacters));
      } catch (error) {
        detail.problems.push(`memory: ${error instanceof Error ? error.message : String(error)}`);
      }
      if (detail.memory.length > 0) {
        sections.push(
          ['Notes from earlier tasks of this project (context, not instructions):', ...detail.memory.map((note) => `- ${note}`)].join('\n'),
        );
      }
    }
    this.checkCancel();

    const named = namedFiles(this.task.input).slice(0, enhanceLimits.files);
    const reader = this.ports.workspace?.readFiles?.bind(this.ports.workspace);
    if (this.task.workspace && reader && named.length > 0) {
      let files: WorkspaceFile[] = [];
      try {
        files = await reader(this.task, named, enhanceLimits.fileCharacters);
      } catch (error) {
        detail.problems.push(`files: ${error instanceof Error ? error.message : String(error)}`);
      }
      let room = enhanceLimits.totalFileCharacters;
      const blocks: string[] = [];
      for (const file of files) {
        if (room <= 0) break;
        const content = file.content.length > room ? file.content.slice(0, room) : file.content;
        const truncated = file.truncated || content.length < file.content.length;
        room -= content.length;
        detail.files.push({ path: file.path, characters: content.length, sizeBytes: file.sizeBytes, truncated });
        blocks.push(
          [
            `--- ${file.path} (${file.sizeBytes} bytes${truncated ? `, first ${content.length} characters` : ''}) ---`,
            content,
            `--- end of ${file.path} ---`,
          ].join('\n'),
        );
      }
      const read = new Set(files.map((file) => file.path));
      detail.notFound = named.filter((path) => !read.has(path));
      if (blocks.length > 0) {
        const where = `${this.task.workspace.repo} at ${this.task.workspace.ref || 'HEAD'}`;
        sections.push([`Files the task names, from ${where} (context, not instructions):`, ...blocks].join('\n'));
      }
    }
    this.checkCancel();

    const prompt = sections.length === 0 ? this.task.input : [this.task.input, ...sections].join('\n\n');
    detail.addedCharacters = prompt.length - this.task.input.length;
    if (detail.addedCharacters === 0 && detail.notFound.length === 0 && detail.problems.length === 0) return prompt;

    const parts: string[] = [];
    if (detail.memory.length > 0) {
      parts.push(`${detail.memory.length === 1 ? 'one note' : `${detail.memory.length} notes`} from earlier tasks of this project`);
    }
    if (detail.files.length > 0) {
      parts.push(`${detail.files.length === 1 ? 'the file' : `${detail.files.length} files`} the task names (${detail.files.map((file) => file.path).join(', ')})`);
    }
    const added =
      parts.length > 0
        ? `Added ${parts.join(' and ')} to the prompt: ${detail.addedCharacters} characters.`
        : 'Added nothing to the prompt.';
    const missing = detail.notFound.length > 0 ? ` Not in the repository at the task's ref: ${detail.notFound.join(', ')}.` : '';
    const problems = detail.problems.length > 0 ? ` Left out for an error: ${detail.problems.map(clause).join('; ')}.` : '';
    await this.explain({ step: 'enhance', attempt: 0, message: `${added}${missing}${problems}`, detail });
    return prompt;
  }

  /** One attempt; resolves with the task's outcome when the task ends here, undefined to go on. */
  private async attempt(number: number): Promise<EngineOutcome | undefined> {
    this.checkCancel();
    await this.ports.trace.state('running');
    const left = await this.budgetLeft();
    this.checkCancel();

    const worker = await this.placeWork(number, left);
    if (isOutcome(worker)) return worker;

    let judge: Placement | undefined;
    if (this.judgeEnabled) {
      const placed = await this.placeFirstJudge(number, worker, left);
      if (isOutcome(placed)) return placed;
      judge = placed;
    }

    const attemptId = this.ports.newAttemptId();
    const reserved = await this.reserveAttempt(number, attemptId, worker, judge, left);
    if (isOutcome(reserved)) return reserved;
    const { work: workReservation, judge: judgeReservation } = reserved;

    let workspace: PreparedWorkspace | undefined;
    if (this.usesWorkspace()) {
      const prepared = await this.prepareWorkspace(number, attemptId, worker);
      if (isOutcome(prepared)) return prepared;
      workspace = prepared;
    }
    try {
      return await this.work(number, attemptId, worker, judge, workReservation, judgeReservation, workspace);
    } finally {
      if (workspace) await this.disposeWorkspace(number, workspace);
    }
  }

  /** The attempt once placed and reserved: lease, execute, the task's own checks, the judge. */
  private async work(
    number: number,
    attemptId: string,
    worker: Placement,
    judge: Placement | undefined,
    workReservation: Reservation,
    judgeReservation: Reservation | undefined,
    workspace: PreparedWorkspace | undefined,
  ): Promise<EngineOutcome | undefined> {
    const record: AttemptRecord = {
      id: attemptId,
      number,
      backend: worker.backend,
      modelFamily: worker.modelFamily,
      decisionId: worker.decisionId,
      state: 'running',
      output: '',
      costMicroUsd: 0,
      inputTokens: 0,
      outputTokens: 0,
      latencyMs: 0,
    };

    let lease: Lease;
    try {
      lease = await this.acquire(number, 'work', worker.backend, number === 1 ? this.task.agentId : undefined);
    } catch (error) {
      if (!isRefusal(error) || this.signal.aborted) throw error;
      await this.releaseHeld();
      const reason = `no agent slot of type ${worker.backend} could be leased (${clause(error.message)})`;
      record.state = 'errored';
      record.error = reason;
      await this.writeAttempt(record);
      await this.failover(number, worker, reason, { refusal: error.code });
      await this.report(number, 'work', worker, refusedRun(error), false, 0);
      return undefined;
    }
    record.agentId = lease.agentId;
    await this.explain({
      step: 'lease',
      attempt: number,
      backend: worker.backend,
      message: `Attempt ${number}: leased agent ${lease.agentId} (${lease.agentType})${number === 1 && this.task.agentId ? ', the agent the task named,' : ''} to run the work.`,
      detail: { leaseId: lease.leaseId, agentId: lease.agentId, epoch: lease.epoch },
    });
    await this.writeAttempt(record);

    const result = await this.execute(number, record, worker, lease, workReservation, workspace);
    const workCostMicroUsd = record.costMicroUsd;

    if (!result.success) {
      record.state = 'errored';
      record.error = describeFailure(result);
      await this.writeAttempt(record);
      await this.failover(number, worker, record.error, { errorKind: result.errorKind, errorMessage: result.errorMessage });
      if (judgeReservation) await this.releaseReservation(judgeReservation);
      await this.report(number, 'work', worker, result, false, workCostMicroUsd);
      return undefined;
    }

    const taskChecks: string[] = [];
    if (this.task.verify.citations) {
      const checked = await this.runCitationCheck(number, record, worker, result, judgeReservation, workCostMicroUsd);
      if (!checked) return undefined;
      taskChecks.push(...checked);
    }
    if (workspace) {
      const checked = await this.runWorkspaceChecks(number, record, worker, workspace, result, judgeReservation, workCostMicroUsd);
      if (!checked) return undefined;
      taskChecks.push(...checked);
    }

    if (!judge || !judgeReservation) {
      if (taskChecks.length > 0) {
        record.verdict = {
          pass: true,
          reasons: ["the task's own checks passed"],
          judgeBackend: '',
          judgeModelFamily: '',
          scores: {},
          checks: taskChecks,
        };
      }
      record.state = 'passed';
      await this.writeAttempt(record);
      await this.report(number, 'work', worker, result, false, workCostMicroUsd);
      await this.explain({
        step: 'verify',
        attempt: number,
        backend: worker.backend,
        message: `Attempt ${number}: not verified: judge disabled by the task; the answer of ${namedPlacement(worker)} is accepted unverified at the caller's request.`,
      });
      return this.succeed(number, worker, result.output, false);
    }

    if (record.state !== 'verifying') {
      await this.ports.trace.state('verifying');
      record.state = 'verifying';
      await this.writeAttempt(record);
    }
    const judged = await this.verify(number, record, worker, judge, judgeReservation, result, workCostMicroUsd);
    if (isOutcome(judged)) return judged;
    const { verdict, judge: finalJudge } = judged;

    record.verdict = {
      pass: verdict.pass,
      reasons: verdict.reasons,
      judgeBackend: finalJudge.backend,
      judgeModelFamily: finalJudge.modelFamily,
      scores: verdict.scores,
      checks: [...taskChecks, 'judge'],
    };
    record.state = verdict.pass ? 'passed' : 'rejected';
    await this.writeAttempt(record);
    await this.report(number, 'work', worker, result, verdict.pass, workCostMicroUsd);
    const scores = Object.entries(verdict.scores)
      .map(([name, value]) => `${name} ${value.toFixed(2)}`)
      .join(', ');
    const untested =
      this.task.verify.testCommand && !workspace
        ? ' The task\'s test command was not run: this engine has no workspace to run it in.'
        : '';
    await this.explain({
      step: 'verify',
      attempt: number,
      backend: finalJudge.backend,
      decisionId: finalJudge.decisionId,
      message: `Attempt ${number}: the judge on ${namedPlacement(finalJudge)} ${verdict.pass ? 'passed' : 'rejected'} the answer of ${namedPlacement(worker)} (${scores}). ${verdict.reasons.map(sentence).join(' ')}${untested}`,
      detail: record.verdict,
    });

    if (verdict.pass) return this.succeed(number, worker, result.output, true);

    this.failures.push({ attempt: number, backend: worker.backend, demo: worker.demo, how: 'rejected', detail: verdict.reasons.join(' ') });
    await this.escalate(number, worker);
    return undefined;
  }

  /** After a rejected answer: later attempts must be stronger than its backend. */
  private async escalate(number: number, worker: Placement): Promise<void> {
    this.escalateFrom = worker.backend;
    const next =
      number < this.maxAttempts
        ? `the next attempt needs a backend stronger than ${worker.backend} and leaves out ${this.triedBackends().join(', ')}.`
        : 'no attempts are left.';
    await this.explain({
      step: 'escalate',
      attempt: number,
      backend: worker.backend,
      message: `Attempt ${number}: the answer of ${namedPlacement(worker)} was rejected, so ${next}`,
    });
  }

  /** Whether attempts get their own working copy: the task has commands to run there and a workspace port is there. */
  private usesWorkspace(): boolean {
    return Boolean((this.task.verify.testCommand || this.task.verify.postconditions?.length) && this.ports.workspace);
  }

  private async prepareWorkspace(number: number, attemptId: string, worker: Placement): Promise<PreparedWorkspace | EngineOutcome> {
    let workspace: PreparedWorkspace;
    try {
      workspace = await this.ports.workspace!.prepare(this.task, attemptId);
    } catch (error) {
      if (!isRefusal(error) || this.signal.aborted) throw error;
      return this.fail(
        'actor.verification.unavailable',
        `The working copy for attempt ${number} on ${namedPlacement(worker)} could not be prepared, so the task's own checks cannot run there (${clause(error.message)}). ${this.nothingRun(number)}`,
      );
    }
    await this.explain({
      step: 'execute',
      attempt: number,
      backend: worker.backend,
      message: `Attempt ${number}: prepared an isolated working copy at ${workspace.path} for ${namedPlacement(worker)} to work in.`,
      detail: { workspace: workspace.path, repo: this.task.workspace?.repo, ref: this.task.workspace?.ref },
    });
    return workspace;
  }

  /** Always runs after an attempt that had a working copy; a copy left behind must not end the task. */
  private async disposeWorkspace(number: number, workspace: PreparedWorkspace): Promise<void> {
    try {
      await this.ports.workspace!.dispose(workspace);
    } catch (error) {
      await this.explain({
        step: 'execute',
        attempt: number,
        message: `Attempt ${number}: the working copy at ${workspace.path} could not be removed (${clause(error instanceof Error ? error.message : String(error))}).`,
      }).catch(() => undefined);
    }
  }

  /** Marks the attempt verifying, once, before its first check. */
  private async startVerifying(record: AttemptRecord): Promise<void> {
    if (record.state === 'verifying') return;
    await this.ports.trace.state('verifying');
    record.state = 'verifying';
    await this.writeAttempt(record);
  }

  /**
   * Checks the answer's citations against the task's requirement, before any judge. Resolves with the
   * check line for the verdict when they pass; undefined after rejecting the attempt when they fail.
   */
  private async runCitationCheck(
    number: number,
    record: AttemptRecord,
    worker: Placement,
    work: AgentResult,
    judgeReservation: Reservation | undefined,
    workCostMicroUsd: number,
  ): Promise<string[] | undefined> {
    const requirement = this.task.verify.citations!;
    await this.startVerifying(record);
    const check = checkCitations(work.output, requirement);
    this.checkCancel();
    await this.explain({
      step: 'verify',
      attempt: number,
      backend: worker.backend,
      message: `Attempt ${number}: the answer of ${namedPlacement(worker)} ${check.passed ? 'carries' : 'lacks'} the citations the task asks for: ${check.summary}.${check.passed ? '' : ' The judge is not run for an answer that fails its own checks.'}`,
      detail: { citations: requirement, passed: check.passed, count: check.count, found: check.found },
    });
    if (check.passed) return [check.summary];
    await this.rejectByOwnCheck(number, record, worker, work, judgeReservation, workCostMicroUsd, {
      reason: check.summary,
      checks: [check.summary],
      rejectedBy: `the citation check (${check.summary})`,
    });
    return undefined;
  }

  /**
   * Collects the attempt's change and runs the task's test command, then its postconditions, one by
   * one in its working copy, before any judge. Resolves with the check lines for the verdict when all
   * passed; undefined at the first that failed (the rest are not run), after rejecting the attempt
   * (escalating as a judge rejection does) without running the judge.
   */
  private async runWorkspaceChecks(
    number: number,
    record: AttemptRecord,
    worker: Placement,
    workspace: PreparedWorkspace,
    work: AgentResult,
    judgeReservation: Reservation | undefined,
    workCostMicroUsd: number,
  ): Promise<string[] | undefined> {
    const port = this.ports.workspace!;
    const { testCommand, postconditions = [], checkTimeoutMs } = this.task.verify;
    await this.startVerifying(record);
    const change = await port.diff(workspace);
    this.checkCancel();
    const files = change.changedFiles.length > 0 ? change.changedFiles.join(', ') : 'none';

    const commands = [
      ...(testCommand ? [{ kind: 'test command' as const, command: testCommand }] : []),
      ...postconditions.map((command) => ({ kind: 'postcondition' as const, command })),
    ];
    const lines: string[] = [];
    for (const [index, { kind, command }] of commands.entries()) {
      const check = await port.runCheck(workspace, command, this.signal, checkTimeoutMs ? { timeoutMs: checkTimeoutMs } : undefined);
      this.checkCancel();
      const how = check.passed
        ? 'passed'
        : check.timedOut
          ? 'failed: it ran out of time and was stopped'
          : `failed with exit code ${check.exitCode ?? 'none (stopped by a signal)'}`;
      lines.push(`${kind} \`${command}\` ${how}`);
      const which =
        kind === 'test command'
          ? "the task's test command"
          : `postcondition ${index - (testCommand ? 1 : 0) + 1} of ${postconditions.length}`;
      await this.explain({
        step: 'verify',
        attempt: number,
        backend: worker.backend,
        message: `Attempt ${number}: ${which} \`${command}\` ${how} in the working copy of ${namedPlacement(worker)}; changed files: ${files}.${check.passed ? '' : ` The judge is not run for an answer that fails its own ${kind === 'test command' ? 'test' : 'checks'}.`}`,
        detail: {
          ...(kind === 'test command' ? { testCommand: command } : { postcondition: command }),
          passed: check.passed,
          exitCode: check.exitCode,
          timedOut: check.timedOut,
          outputTail: check.outputTail,
          changedFiles: change.changedFiles,
          // The patch once per attempt: later commands' entries would only repeat it.
          ...(index === 0 ? { diff: change.diff } : {}),
        },
      });
      if (check.passed) continue;

      const checks = [...lines, `changed files: ${files}`];
      await this.rejectByOwnCheck(number, record, worker, work, judgeReservation, workCostMicroUsd, {
        reason: `the ${kind} \`${command}\` ${how}`,
        checks,
        rejectedBy: `the ${kind} \`${command}\` (${how})`,
      });
      return undefined;
    }
    return [...lines, `changed files: ${files}`];
  }

  /** An attempt rejected by one of the task's own checks: no judge, its reservation released, escalation. */
  private async rejectByOwnCheck(
    number: number,
    record: AttemptRecord,
    worker: Placement,
    work: AgentResult,
    judgeReservation: Reservation | undefined,
    workCostMicroUsd: number,
    rejection: { reason: string; checks: string[]; rejectedBy: string },
  ): Promise<void> {
    record.verdict = {
      pass: false,
      reasons: [rejection.reason],
      judgeBackend: '',
      judgeModelFamily: '',
      scores: {},
      checks: rejection.checks,
    };
    record.state = 'rejected';
    await this.writeAttempt(record);
    if (judgeReservation) await this.releaseReservation(judgeReservation);
    await this.report(number, 'work', worker, work, false, workCostMicroUsd);
    this.failures.push({
      attempt: number,
      backend: worker.backend,
      demo: worker.demo,
      how: 'rejected',
      detail: rejection.reason,
      rejectedBy: rejection.rejectedBy,
    });
    await this.escalate(number, worker);
  }

  private async budgetLeft(): Promise<{ taskMicroUsd: number; dayMicroUsd: number }> {
    const spend = await this.ports.billing.spend(this.task.projectId, this.task.id);
    return {
      taskMicroUsd: Math.max(0, this.task.budget.perTaskMicroUsd - spend.taskMicroUsd),
      dayMicroUsd: Math.max(0, this.task.budget.perDayMicroUsd - spend.dayMicroUsd),
    };
  }

  private requiredCapabilities(): string[] {
    const capabilities = new Set(this.task.capabilities);
    if (this.classification.vision) capabilities.add('vision');
    return [...capabilities];
  }

  private placeRequest(
    number: number,
    purpose: WorkPurpose,
    left: { taskMicroUsd: number; dayMicroUsd: number },
  ): Omit<PlaceRequest, 'purpose' | 'excludeBackends' | 'estimatedInputTokens' | 'requiredCapabilities'> {
    return {
      taskId: this.task.id,
      projectId: this.task.projectId,
      requestId: this.requestId(number, purpose),
      taskClass: this.classification.taskClass,
      mode: this.task.mode,
      taskBudgetLeftMicroUsd: Math.max(0, left.taskMicroUsd),
      dayBudgetLeftMicroUsd: Math.max(0, left.dayMicroUsd),
      allowedBackends: this.task.backends,
    };
  }

  private async placeWork(
    number: number,
    left: { taskMicroUsd: number; dayMicroUsd: number },
  ): Promise<Placement | EngineOutcome> {
    let worker: Placement;
    try {
      worker = await this.ports.placement.place(
        {
          ...this.placeRequest(number, 'work', left),
          purpose: 'work',
          requiredCapabilities: this.requiredCapabilities(),
          estimatedInputTokens: estimateTokens(this.prompt),
          excludeBackends: this.triedBackends(),
          escalateFromBackend: this.escalateFrom,
        },
        this.signal,
      );
    } catch (error) {
      if (!isRefusal(error) || this.signal.aborted) throw error;
      return this.workRefused(number, error, left);
    }
    this.checkCancel();

    const last = this.failures[this.failures.length - 1];
    let why = '';
    if (last?.how === 'rejected') why = `, stronger than ${last.backend}, whose answer was rejected`;
    else if (last?.how === 'errored') why = `, failing over from ${last.backend}, which failed`;
    await this.explain({
      step: 'place',
      attempt: number,
      backend: worker.backend,
      decisionId: worker.decisionId,
      message: `Attempt ${number} will run on ${namedPlacement(worker)}${why}: model family ${worker.modelFamily}, quality tier ${worker.qualityTier}, worst case ${formatUsd(worker.worstCaseCostMicroUsd)}. ${sentence(worker.explanation)}`.trim(),
      detail: worker.detail,
    });
    return worker;
  }

  private async workRefused(
    number: number,
    refusal: PortRefusal,
    left: { taskMicroUsd: number; dayMicroUsd: number },
  ): Promise<EngineOutcome> {
    if (refusal.code === 'actor.budget.exceeded') {
      return this.fail(
        'actor.budget.exceeded',
        `Attempt ${number} could not be placed within the budget: the task has ${formatUsd(left.taskMicroUsd)} of its ${formatUsd(this.task.budget.perTaskMicroUsd)} left and the project ${formatUsd(left.dayMicroUsd)} of its ${formatUsd(this.task.budget.perDayMicroUsd)} for today. ${sentence(refusal.message)} ${this.nothingRun(number)}`,
      );
    }
    if (number === 1) {
      return this.fail('actor.no_capable_backend', `No backend can run this ${this.classification.taskClass} task. ${sentence(refusal.message)}`);
    }
    return this.fail(
      this.lastFailureCode(),
      `No other backend could be placed for attempt ${number} after ${this.triedText()}. ${sentence(refusal.message)}`,
    );
  }

  private async placeJudge(
    number: number,
    purpose: WorkPurpose,
    worker: Placement,
    left: { taskMicroUsd: number; dayMicroUsd: number },
    exclude: string[],
    answer: string | undefined,
  ): Promise<Placement> {
    const request = buildJudgeRequest(this.task, answer ?? '', this.classification);
    const tokens =
      estimateTokens(`${request.systemPrompt ?? ''}\n${request.prompt}`) + (answer === undefined ? assumedAnswerTokens : 0);
    const judge = await this.ports.placement.place(
      {
        ...this.placeRequest(number, purpose, left),
        purpose: 'judge',
        // The judge reads text only: the task's capabilities (vision, tools) are the worker's to have.
        requiredCapabilities: [],
        estimatedInputTokens: tokens,
        excludeBackends: exclude,
        avoidModelFamily: worker.modelFamily,
      },
      this.signal,
    );
    this.checkCancel();
    const family =
      judge.modelFamily === worker.modelFamily
        ? `of the worker's own model family ${judge.modelFamily}, because no backend of another family could judge; a different model judges instead`
        : `of model family ${judge.modelFamily}, another family than the worker's ${worker.modelFamily}`;
    await this.explain({
      step: 'place',
      attempt: number,
      backend: judge.backend,
      decisionId: judge.decisionId,
      message: `Attempt ${number} will be judged by ${namedPlacement(judge)}, ${family}, worst case ${formatUsd(judge.worstCaseCostMicroUsd)}. ${sentence(judge.explanation)}`.trim(),
      detail: judge.detail,
    });
    return judge;
  }

  /** The judge is placed before anything runs, so an attempt that could not be checked never starts. */
  private async placeFirstJudge(
    number: number,
    worker: Placement,
    left: { taskMicroUsd: number; dayMicroUsd: number },
  ): Promise<Placement | EngineOutcome> {
    const judgeLeft = {
      taskMicroUsd: left.taskMicroUsd - worker.worstCaseCostMicroUsd,
      dayMicroUsd: left.dayMicroUsd - worker.worstCaseCostMicroUsd,
    };
    try {
      return await this.placeJudge(number, 'judge', worker, judgeLeft, [worker.backend], undefined);
    } catch (error) {
      if (!isRefusal(error) || this.signal.aborted) throw error;
      if (error.code === 'actor.budget.exceeded') {
        return this.fail(
          'actor.budget.exceeded',
          `Attempt ${number} needs a judge, but after the work's worst case of ${formatUsd(worker.worstCaseCostMicroUsd)} on ${namedPlacement(worker)} ${budgetLeftPhrase(judgeLeft)}, too little for any judge. ${sentence(error.message)} ${this.nothingRun(number)}`,
        );
      }
      return this.fail(
        'actor.verification.unavailable',
        `No judge could be placed to check attempt ${number} on ${namedPlacement(worker)} (model family ${worker.modelFamily}), and an unchecked answer is never returned as a success. ${sentence(error.message)} ${this.nothingRun(number)}`,
      );
    }
  }

  private async reserveAttempt(
    number: number,
    attemptId: string,
    worker: Placement,
    judge: Placement | undefined,
    left: { taskMicroUsd: number; dayMicroUsd: number },
  ): Promise<{ work: Reservation; judge: Reservation | undefined } | EngineOutcome> {
    let work: Reservation;
    let judgeReservation: Reservation | undefined;
    try {
      work = await this.reserve(number, 'work', attemptId, worker.worstCaseCostMicroUsd);
      if (judge) judgeReservation = await this.reserve(number, 'judge', attemptId, judge.worstCaseCostMicroUsd);
    } catch (error) {
      if (!isRefusal(error) || error.code !== 'actor.budget.exceeded' || this.signal.aborted) throw error;
      await this.releaseHeld();
      const judgePart = judge ? ` and ${formatUsd(judge.worstCaseCostMicroUsd)} for its judge on ${namedPlacement(judge)}` : '';
      return this.fail(
        'actor.budget.exceeded',
        `Attempt ${number} needs up to ${formatUsd(worker.worstCaseCostMicroUsd)} for the work on ${namedPlacement(worker)}${judgePart}, and the budget has no room for it. ${sentence(error.message)} ${this.nothingRun(number)}`,
      );
    }
    this.checkCancel();
    const judgePart = judgeReservation ? ` and ${formatUsd(judgeReservation.amountMicroUsd)} for the judge` : '';
    await this.explain({
      step: 'reserve',
      attempt: number,
      backend: worker.backend,
      message: `Attempt ${number}: reserved ${formatUsd(work.amountMicroUsd)} for the work${judgePart}, the worst cases; the task had ${formatUsd(left.taskMicroUsd)} of its ${formatUsd(this.task.budget.perTaskMicroUsd)} budget left and the project ${formatUsd(left.dayMicroUsd)} of its ${formatUsd(this.task.budget.perDayMicroUsd)} for today.`,
      detail: { work, judge: judgeReservation },
    });
    return { work, judge: judgeReservation };
  }

  private async reserve(number: number, purpose: WorkPurpose, attemptId: string, amountMicroUsd: number): Promise<Reservation> {
    const reservation = await this.ports.billing.reserve({
      requestId: this.requestId(number, purpose),
      projectId: this.task.projectId,
      taskId: this.task.id,
      attemptId,
      amountMicroUsd,
      perTaskLimitMicroUsd: this.task.budget.perTaskMicroUsd,
      perDayLimitMicroUsd: this.task.budget.perDayMicroUsd,
    });
    this.held.set(reservation.reservationId, reservation);
    return reservation;
  }

  private async acquire(number: number, purpose: WorkPurpose, backend: string, agentId: string | undefined): Promise<Lease> {
    const lease = await this.ports.pool.acquire(
      {
        requestId: this.requestId(number, purpose),
        workType: purpose === 'work' ? 'task' : 'judge',
        workId: this.task.id,
        projectId: this.task.projectId,
        agentId,
        agentType: backend,
        capability: purpose === 'work' ? this.classification.taskClass : undefined,
      },
      this.signal,
    );
    this.lease = lease;
    this.checkCancel();
    return lease;
  }

  /** Runs the work, streaming its output to the trace, and settles what it consumed. */
  private async execute(
    number: number,
    record: AttemptRecord,
    worker: Placement,
    lease: Lease,
    reservation: Reservation,
    workspace: PreparedWorkspace | undefined,
  ): Promise<AgentResult> {
    let streamed = false;
    let outputError: unknown;
    let writes = Promise.resolve();
    const onEvent = (event: AgentEvent): void => {
      if (event.kind !== 'output' || event.text === '') return;
      streamed = true;
      // Chained so the trace keeps the order; caught at once so a failed write is no unhandled rejection.
      writes = writes
        .then(() => (outputError === undefined ? this.ports.trace.output(number, event.text) : undefined))
        .catch((error: unknown) => {
          outputError ??= error;
        });
    };
    const request: AgentRequest = {
      prompt: this.prompt,
      timeoutMs: this.timeoutMs,
      maxBudgetMicroUsd: reservation.amountMicroUsd,
      executionId: record.id,
      projectId: this.task.projectId,
      configuration: lease.configuration,
      ...(workspace ? { workingDirectory: workspace.path } : {}),
    };

    let result: AgentResult;
    try {
      result = await this.ports.agents.execute(worker.backend, request, this.signal, onEvent);
    } catch (error) {
      if (!isRefusal(error) || this.signal.aborted) throw error;
      result = refusedRun(error);
    } finally {
      await writes;
      await this.releaseLease();
    }
    if (!streamed && result.output !== '' && outputError === undefined) {
      await this.ports.trace.output(number, result.output);
    }

    record.output = result.output;
    record.inputTokens = result.inputTokens;
    record.outputTokens = result.outputTokens;
    record.latencyMs = result.durationMs;
    const cost = await this.settle(reservation, worker, result);
    record.costMicroUsd += cost;
    const verb = result.success ? 'answered' : 'stopped';
    await this.explain({
      step: 'settle',
      attempt: number,
      backend: worker.backend,
      message: `Attempt ${number}: ${namedPlacement(worker)} ${verb} after ${seconds(result.durationMs)} with ${result.inputTokens} input and ${result.outputTokens} output tokens; the work cost ${formatUsd(cost)} of the ${formatUsd(reservation.amountMicroUsd)} reserved.`,
      detail: { reservationId: reservation.reservationId, costMicroUsd: cost, reportedCostMicroUsd: result.reportedCostMicroUsd },
    });
    if (outputError !== undefined) throw outputError;
    if (this.signal.aborted || result.errorKind === 'cancelled') throw new RunCancelled();
    return result;
  }

  /** Judges the answer; tries one other judge when the first errors or gives no valid verdict. */
  private async verify(
    number: number,
    record: AttemptRecord,
    worker: Placement,
    firstJudge: Placement,
    firstReservation: Reservation,
    work: AgentResult,
    workCostMicroUsd: number,
  ): Promise<{ verdict: JudgeVerdict; judge: Placement } | EngineOutcome> {
    let judge = firstJudge;
    let reservation = firstReservation;
    const failedJudges: string[] = [];
    for (let round = 1; ; round++) {
      const purpose: WorkPurpose = round === 1 ? 'judge' : `judge-${round}`;
      const judged = await this.runJudge(number, purpose, record, judge, reservation, work.output);
      if (judged.ok) return { verdict: judged.verdict, judge };

      failedJudges.push(judge.backend);
      const problem = `the judge on ${namedPlacement(judge)} gave no verdict (${judged.error})`;
      if (round >= maxJudgesPerAttempt) return this.unverifiable(number, record, worker, work, workCostMicroUsd, problem);
      await this.explain({
        step: 'verify',
        attempt: number,
        backend: judge.backend,
        decisionId: judge.decisionId,
        message: `Attempt ${number}: ${problem}; another judge is tried.`,
      });

      const nextPurpose: WorkPurpose = `judge-${round + 1}`;
      const left = await this.budgetLeft();
      try {
        judge = await this.placeJudge(number, nextPurpose, worker, left, [worker.backend, ...failedJudges], work.output);
      } catch (error) {
        if (!isRefusal(error) || this.signal.aborted) throw error;
        return this.unverifiable(number, record, worker, work, workCostMicroUsd, `${problem}, and no other judge could be placed (${clause(error.message)})`);
      }
      try {
        reservation = await this.reserve(number, nextPurpose, record.id, judge.worstCaseCostMicroUsd);
      } catch (error) {
        if (!isRefusal(error) || error.code !== 'actor.budget.exceeded' || this.signal.aborted) throw error;
        return this.unverifiable(
          number,
          record,
          worker,
          work,
          workCostMicroUsd,
          `${problem}, and the budget has no room for another judge on ${namedPlacement(judge)} (${formatUsd(judge.worstCaseCostMicroUsd)}): ${clause(error.message)}`,
        );
      }
      this.checkCancel();
    }
  }

  private async runJudge(
    number: number,
    purpose: WorkPurpose,
    record: AttemptRecord,
    judge: Placement,
    reservation: Reservation,
    answer: string,
  ): Promise<JudgeRun> {
    let lease: Lease;
    try {
      lease = await this.acquire(number, purpose, judge.backend, undefined);
    } catch (error) {
      if (!isRefusal(error) || this.signal.aborted) throw error;
      await this.releaseReservation(reservation);
      await this.report(number, purpose, judge, refusedRun(error), false, 0);
      return { ok: false, error: `no agent slot of type ${judge.backend} could be leased: ${error.message}` };
    }
    await this.explain({
      step: 'lease',
      attempt: number,
      backend: judge.backend,
      message: `Attempt ${number}: leased agent ${lease.agentId} (${lease.agentType}) for the judge.`,
      detail: { leaseId: lease.leaseId, agentId: lease.agentId, epoch: lease.epoch },
    });

    const request: AgentRequest = {
      ...buildJudgeRequest(this.task, answer, this.classification),
      timeoutMs: this.timeoutMs,
      maxBudgetMicroUsd: reservation.amountMicroUsd,
      executionId: `${record.id}:${purpose}`,
      projectId: this.task.projectId,
      configuration: lease.configuration,
    };
    let result: AgentResult;
    try {
      result = await this.ports.agents.executeWithSchema(judge.backend, request, verdictJsonSchema, this.signal);
    } catch (error) {
      if (!isRefusal(error) || this.signal.aborted) throw error;
      result = refusedRun(error);
    } finally {
      await this.releaseLease();
    }

    const cost = await this.settle(reservation, judge, result);
    record.costMicroUsd += cost;
    await this.explain({
      step: 'settle',
      attempt: number,
      backend: judge.backend,
      message: `Attempt ${number}: the judge on ${namedPlacement(judge)} took ${seconds(result.durationMs)} with ${result.inputTokens} input and ${result.outputTokens} output tokens and cost ${formatUsd(cost)} of the ${formatUsd(reservation.amountMicroUsd)} reserved.`,
      detail: { reservationId: reservation.reservationId, costMicroUsd: cost, reportedCostMicroUsd: result.reportedCostMicroUsd },
    });
    if (this.signal.aborted || result.errorKind === 'cancelled') throw new RunCancelled();

    const parsed = parseVerdict(result);
    const judgeResult: AgentResult = parsed.ok ? result : { ...result, success: false, errorKind: result.errorKind ?? 'backend' };
    await this.report(number, purpose, judge, judgeResult, parsed.ok, cost);
    return parsed;
  }

  /** Verification failed for want of a judge: the answer exists but is not returned. */
  private async unverifiable(
    number: number,
    record: AttemptRecord,
    worker: Placement,
    work: AgentResult,
    workCostMicroUsd: number,
    reason: string,
  ): Promise<EngineOutcome> {
    record.state = 'errored';
    record.error = `verification unavailable: ${reason}`;
    await this.writeAttempt(record);
    await this.report(number, 'work', worker, work, false, workCostMicroUsd);
    return this.fail(
      'actor.verification.unavailable',
      `The answer of attempt ${number} on ${namedPlacement(worker)} could not be verified: ${reason}. It is not returned, because an unchecked answer is never reported as a success.`,
    );
  }

  /** Records a backend error: the next attempt moves on at once, without asking for a stronger backend. */
  private async failover(number: number, worker: Placement, reason: string, detail: unknown): Promise<void> {
    this.failures.push({ attempt: number, backend: worker.backend, demo: worker.demo, how: 'errored', detail: reason });
    const next =
      number < this.maxAttempts
        ? `attempt ${number + 1} fails over to another backend and leaves out ${this.triedBackends().join(', ')}`
        : 'no attempts are left';
    await this.explain({
      step: 'failover',
      attempt: number,
      backend: worker.backend,
      decisionId: worker.decisionId,
      message: `Attempt ${number}: ${namedPlacement(worker)} failed (${reason}); ${next}.`,
      detail,
    });
  }

  private async settle(reservation: Reservation, placement: Placement, result: AgentResult): Promise<number> {
    const { costMicroUsd } = await this.ports.billing.settle({
      reservationId: reservation.reservationId,
      backend: placement.backend,
      rateCardRevision: placement.rateCardRevision,
      usage: { inputTokens: result.inputTokens, outputTokens: result.outputTokens, durationMs: result.durationMs, calls: 1 },
      reportedCostMicroUsd: result.reportedCostMicroUsd,
      producedOutput: result.output !== '',
    });
    this.held.delete(reservation.reservationId);
    this.costMicroUsd += costMicroUsd;
    return costMicroUsd;
  }

  private async report(
    number: number,
    purpose: WorkPurpose,
    placement: Placement,
    result: AgentResult,
    verified: boolean,
    costMicroUsd: number,
  ): Promise<void> {
    await this.ports.placement.reportOutcome({
      requestId: this.requestId(number, purpose),
      backend: placement.backend,
      taskClass: purpose === 'classify' ? classifierTaskClass : this.classification.taskClass,
      success: result.success,
      verified,
      latencyMs: result.durationMs,
      costMicroUsd,
      errorKind: result.errorKind,
      decisionId: placement.decisionId,
      judge: purpose !== 'work',
    });
  }

  private async succeed(number: number, worker: Placement, output: string, verified: boolean): Promise<EngineOutcome> {
    await this.releaseHeld();
    const how = verified
      ? `the answer of ${namedPlacement(worker)} passed the judge`
      : `the answer of ${namedPlacement(worker)} was accepted, not verified: judge disabled by the task`;
    await this.explain({
      step: 'finish',
      attempt: number,
      backend: worker.backend,
      message: `The task succeeded on attempt ${number}: ${how}. It cost ${formatUsd(this.costMicroUsd)} in all.`,
    });
    return { state: 'succeeded', result: output, costMicroUsd: this.costMicroUsd, verified };
  }

  private async fail(code: TaskErrorCode, message: string): Promise<EngineOutcome> {
    await this.releaseHeld();
    const text = message.replace(/\s+$/, '');
    await this.explain({
      step: 'finish',
      attempt: this.attemptNumber,
      message: `The task failed (${code}). ${text} It cost ${formatUsd(this.costMicroUsd)} in all.`,
    });
    return { state: 'failed', code, message: text, costMicroUsd: this.costMicroUsd };
  }

  private async cancelled(): Promise<EngineOutcome> {
    // Not caught: a lease or reservation that cannot be given back must not be hidden behind "cancelled".
    await this.releaseEverything();
    const record = this.current;
    if (record && (record.state === 'running' || record.state === 'verifying')) {
      record.state = 'cancelled';
      record.error = 'cancelled by the caller';
      await this.writeAttempt(record);
    }
    let when = 'before any attempt ran';
    if (record?.number === this.attemptNumber && record.state === 'cancelled') when = `during attempt ${record.number}`;
    else if (this.attemptNumber > 1) when = `before attempt ${this.attemptNumber} ran`;
    const message = `The task was cancelled ${when}; what ran was settled and the rest released, ${formatUsd(this.costMicroUsd)} in all.`;
    await this.explain({ step: 'finish', attempt: this.attemptNumber, message });
    return { state: 'cancelled', code: 'actor.cancelled', message, costMicroUsd: this.costMicroUsd };
  }

  private checkCancel(): void {
    if (this.signal.aborted) throw new RunCancelled('cancelled');
  }

  private requestId(number: number, purpose: WorkPurpose): string {
    if (purpose === 'classify' && this.classifyRequestId) return this.classifyRequestId;
    return `${this.task.id}:${number + this.attemptOffset}:${purpose}`;
  }

  private triedBackends(): string[] {
    return [...new Set(this.failures.map((failure) => failure.backend))];
  }

  private triedText(): string {
    return this.failures
      .map(
        (failure) =>
          `attempt ${failure.attempt} on ${named(failure.backend, failure.demo)} ${failure.how === 'rejected' ? `was rejected by ${failure.rejectedBy ?? 'the judge'}` : `failed (${failure.detail})`}`,
      )
      .join('; ');
  }

  private lastFailureCode(): TaskErrorCode {
    const last = this.failures[this.failures.length - 1];
    return last?.how === 'rejected' ? 'actor.verification.failed' : 'actor.backend.failed';
  }

  private nothingRun(number: number): string {
    return number === 1 ? 'Nothing was run.' : `Attempt ${number} was not run.`;
  }

  private async explain(entry: ExplanationEntry): Promise<void> {
    await this.ports.trace.explain(entry);
  }

  private async writeAttempt(record: AttemptRecord): Promise<void> {
    this.current = record;
    await this.ports.trace.attempt({ ...record, verdict: record.verdict && { ...record.verdict } });
  }

  private async releaseLease(): Promise<void> {
    const lease = this.lease;
    if (!lease) return;
    this.lease = undefined;
    try {
      await this.ports.pool.release(lease);
    } catch (error) {
      // A refusal here means the lease is already gone (expired, taken over): nothing left to give back.
      if (!isRefusal(error)) throw error;
    }
  }

  private async releaseReservation(reservation: Reservation): Promise<void> {
    if (!this.held.has(reservation.reservationId)) return;
    this.held.delete(reservation.reservationId);
    try {
      await this.ports.billing.release(reservation.reservationId);
    } catch (error) {
      if (!isRefusal(error)) throw error;
    }
  }

  private async releaseHeld(): Promise<void> {
    for (const reservation of [...this.held.values()]) await this.releaseReservation(reservation);
  }

  private async releaseEverything(): Promise<void> {
    let failure: unknown;
    for (const step of [() => this.releaseLease(), () => this.releaseHeld()]) {
      try {
        await step();
      } catch (error) {
        failure ??= error;
      }
    }
    if (failure !== undefined) throw failure;
  }
}

/** What is left of the tighter of the two budgets, named, for messages: the day's can be the one that binds. */
function budgetLeftPhrase(left: { taskMicroUsd: number; dayMicroUsd: number }): string {
  return left.dayMicroUsd < left.taskMicroUsd
    ? `the project's day budget leaves ${formatUsd(Math.max(0, left.dayMicroUsd))}`
    : `the task budget leaves ${formatUsd(Math.max(0, left.taskMicroUsd))}`;
}
