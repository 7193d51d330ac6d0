import { priceUsage } from '@actor/kit';
import { filterBackends } from '../../services/placement/src/domain/candidate-filter.js';
import { estimate } from '../../services/placement/src/domain/objectives.js';
import type { Backend, ModeName, PlacementRequest, SignalState } from '../../services/placement/src/domain/placement-model.js';
import type { Challenge } from '../../services/placement/src/domain/hysteresis.js';
import { decidePlacement } from '../../services/placement/src/domain/placer.js';
import { applyOutcome, emptySignal, percentile } from '../../services/placement/src/domain/signal-update.js';
import type { Scenario, SimulatedBackend } from './scenario.js';
import { SeededRandom } from './seeded-random.js';

/**
 * The routing simulator. A scenario's world (backends with hidden rates, outages, price changes, a
 * verifier that errs) is replayed for each policy; the policies under test are the placement
 * service's own domain code (decidePlacement, applyOutcome, the circuit breaker and hysteresis inside
 * them), fed in-memory signals, incumbents and challengers exactly as the service feeds them from its
 * tables. Each task goes
 * through the engine's attempt loop: a rejected answer escalates (the next attempt must be strictly
 * stronger than the rejected backend, which is left out), an error fails over (the backend is left
 * out, nothing more is asked), at most `maxAttempts` attempts. Judges are not placed: the verifier
 * stands for them and its cost is charged per answer checked.
 */

const START = Date.parse('2030-01-01T00:00:00Z');
const PROJECT = 'prj_simulated';
const DAY_BUDGET_MICRO_USD = Number.MAX_SAFE_INTEGER;
/** The sigma of an answer's log-normal output size around the backend's hidden mean. */
const OUTPUT_TOKENS_SPREAD = 0.3;

export interface SimulatedTask {
  index: number;
  taskClass: string;
  inputTokens: number;
  startMs: number;
}

/** The draws of one backend for one task: the same for every policy, so policies differ only by choice. */
interface Draws {
  error: number;
  correct: number;
  verify: number;
  latency: number;
  tokens: number;
}

export interface AttemptResult {
  success: boolean;
  /** The verifier accepted the answer. */
  accepted: boolean;
  /** The answer was actually right (hidden from the placer). */
  correct: boolean;
  latencyMs: number;
  costMicroUsd: number;
  errorKind: string;
}

/** The simulated world of one scenario: tasks, declared backends over time, and call outcomes. */
export class SimulatedWorld {
  readonly tasks: SimulatedTask[];
  private readonly draws = new Map<string, Draws>();

  constructor(readonly scenario: Scenario) {
    const random = new SeededRandom(`${scenario.seed}:tasks`);
    const totalWeight = scenario.classes.reduce((sum, item) => sum + item.weight, 0);
    this.tasks = Array.from({ length: scenario.tasks }, (_, index) => {
      let roll = random.next() * totalWeight;
      const chosen = scenario.classes.find((item) => (roll -= item.weight) < 0) ?? scenario.classes.at(-1)!;
      return {
        index,
        taskClass: chosen.name,
        inputTokens: Math.max(50, Math.round(random.logNormal(chosen.inputTokens, 0.5))),
        startMs: START + index * scenario.taskIntervalMs,
      };
    });
  }

  private simulated(type: string): SimulatedBackend {
    return this.scenario.backends.find((backend) => backend.type === type)!;
  }

  /** The backends the registry declares at a task, each with the rate card in force then. */
  backendsAt(taskIndex: number): Backend[] {
    return this.scenario.backends
      .filter((backend) => backend.fromTask <= taskIndex)
      .map((backend) => {
        const changes = backend.priceChanges.filter((change) => change.atTask <= taskIndex);
        const prices = changes.at(-1)?.prices ?? backend.prices;
        return {
          type: backend.type,
          displayName: backend.type,
          modelFamily: backend.modelFamily,
          capabilities: Object.keys(backend.successRate),
          contextTokens: backend.contextTokens,
          maxOutputTokens: backend.maxOutputTokens,
          timeoutMs: backend.timeoutMs,
          trust: 'first-party',
          qualityTier: backend.qualityTier,
          requiresByoKey: false,
          demo: false,
          ready: true,
          readyReason: '',
          rateCard: { revision: 1 + changes.length, ...prices },
        };
      });
  }

  isDown(type: string, taskIndex: number): boolean {
    return this.simulated(type).outages.some((outage) => outage.fromTask <= taskIndex && taskIndex < outage.toTask);
  }

  private drawsOf(task: SimulatedTask, type: string): Draws {
    const key = `${task.index}:${type}`;
    let draws = this.draws.get(key);
    if (!draws) {
      const random = new SeededRandom(`${this.scenario.seed}:${key}`);
      draws = { error: random.next(), correct: random.next(), verify: random.next(), latency: random.normal(), tokens: random.normal() };
      this.draws.set(key, draws);
    }
    return draws;
  }

  /**
   * What a call of `backend` on `task` is expected to do, from the hidden parameters in force at the
   * task (not its draws): the chance it errors, the chance the verifier accepts its answer, and its
   * expected cost with the verifier's when it answers.
   */
  expectedAttempt(task: SimulatedTask, backend: Backend): { errorRate: number; acceptRate: number; costMicroUsd: number } {
    const simulated = this.simulated(backend.type);
    const right = successRateAt(simulated, task.taskClass, task.index);
    const { missBadRate, rejectGoodRate, costMicroUsd: verifierMicroUsd } = this.scenario.verifier;
    const acceptIfAnswered = right * (1 - rejectGoodRate) + (1 - right) * missBadRate;
    // Log-normal draws: the mean is the median times exp(sigma^2 / 2).
    const outputTokens = Math.min(backend.maxOutputTokens, Math.round(simulated.outputTokens * Math.exp((OUTPUT_TOKENS_SPREAD * OUTPUT_TOKENS_SPREAD) / 2)));
    const latencyMs = Math.round(simulated.latencyMs.median * Math.exp((simulated.latencyMs.spread * simulated.latencyMs.spread) / 2));
    const priced = priceUsage(backend.rateCard!, { inputTokens: task.inputTokens, outputTokens, durationMs: latencyMs, calls: 1 });
    return {
      errorRate: simulated.errorRate,
      acceptRate: (1 - simulated.errorRate) * acceptIfAnswered,
      costMicroUsd: (1 - simulated.errorRate) * (priced + verifierMicroUsd),
    };
  }

  /** What one call of `backend` on `task` does, verification included. */
  attempt(task: SimulatedTask, backend: Backend): AttemptResult {
    const simulated = this.simulated(backend.type);
    const draws = this.drawsOf(task, backend.type);
    if (this.isDown(backend.type, task.index)) {
      return { success: false, accepted: false, correct: false, latencyMs: simulated.outageLatencyMs, costMicroUsd: 0, errorKind: 'unavailable' };
    }
    const latencyMs = Math.max(1, Math.round(simulated.latencyMs.median * Math.exp(simulated.latencyMs.spread * draws.latency)));
    if (draws.error < simulated.errorRate) {
      return { success: false, accepted: false, correct: false, latencyMs, costMicroUsd: 0, errorKind: 'backend' };
    }
    const correct = draws.correct < successRateAt(simulated, task.taskClass, task.index);
    const { missBadRate, rejectGoodRate } = this.scenario.verifier;
    const accepted = correct ? draws.verify >= rejectGoodRate : draws.verify < missBadRate;
    const outputTokens = Math.min(backend.maxOutputTokens, Math.max(1, Math.round(simulated.outputTokens * Math.exp(OUTPUT_TOKENS_SPREAD * draws.tokens))));
    const costMicroUsd = priceUsage(backend.rateCard!, { inputTokens: task.inputTokens, outputTokens, durationMs: latencyMs, calls: 1 });
    return { success: true, accepted, correct, latencyMs, costMicroUsd, errorKind: '' };
  }
}

/** What a policy is asked for one attempt. */
export interface PlacementAsk {
  task: SimulatedTask;
  request: PlacementRequest;
  backends: Backend[];
  now: Date;
}

export interface Policy {
  readonly name: string;
  /** The backend for this attempt; undefined when the policy has nothing to place. */
  place(ask: PlacementAsk): Backend | undefined;
  /** The outcome of an attempt (ReportOutcome). */
  report(task: SimulatedTask, backend: string, result: AttemptResult, now: Date): void;
  /**
   * Incumbent changes so far, over every (project, task class, mode): a stored incumbent replaced by
   * another backend (a challenger taking over or a failover), not counting each class's first
   * incumbent. Undefined for policies that keep no incumbent.
   */
  readonly incumbentChanges?: number;
}

/**
 * A mode of the real placer: decidePlacement over in-memory signals and incumbents, applyOutcome
 * after each attempt, and the half-open probe handed out as the repository's claimProbe does.
 */
export class ModePolicy implements Policy {
  readonly name: string;
  incumbentChanges = 0;
  private readonly signals = new Map<string, Map<string, SignalState>>();
  private readonly incumbents = new Map<string, { backend: string; challenge?: Challenge }>();

  constructor(
    private readonly mode: ModeName,
    private readonly scenario: Scenario,
  ) {
    this.name = mode;
  }

  private signalsOf(taskClass: string): Map<string, SignalState> {
    let byBackend = this.signals.get(taskClass);
    if (!byBackend) this.signals.set(taskClass, (byBackend = new Map()));
    return byBackend;
  }

  place(ask: PlacementAsk): Backend | undefined {
    const signals = this.signalsOf(ask.task.taskClass);
    const movesIncumbent = !ask.request.escalateFromBackend;
    const incumbent = movesIncumbent ? this.incumbents.get(ask.task.taskClass) : undefined;
    const result = decidePlacement({
      request: { ...ask.request, mode: this.mode },
      backends: ask.backends,
      signals,
      incumbent: incumbent?.backend,
      challenge: incumbent?.challenge,
      now: ask.now,
      circuitCooldownMs: this.scenario.circuitCooldownMs,
      hysteresisMargin: this.scenario.hysteresisMargin,
      hysteresisWindowMs: this.scenario.hysteresisWindowMs,
    });
    // Stored as the service stores them, a refused placement included.
    if (result.newIncumbent) {
      const previous = this.incumbents.get(ask.task.taskClass)?.backend;
      if (previous !== undefined && previous !== result.newIncumbent) this.incumbentChanges++;
      this.incumbents.set(ask.task.taskClass, { backend: result.newIncumbent });
    }
    else if (incumbent && result.challenge !== undefined) incumbent.challenge = result.challenge ?? undefined;
    if (!result.winner) return undefined;
    if (result.winner.circuitState === 'half-open') {
      // One placement at a time here, so the probe is always this one's (the service claims it in SQL).
      const signal = signals.get(result.winner.backend)!;
      signals.set(result.winner.backend, { ...signal, probeStartedAt: ask.now });
    }
    return ask.backends.find((backend) => backend.type === result.winner!.backend);
  }

  report(task: SimulatedTask, backend: string, result: AttemptResult, now: Date): void {
    const signals = this.signalsOf(task.taskClass);
    const current = signals.get(backend) ?? emptySignal(backend, task.taskClass, now);
    signals.set(
      backend,
      applyOutcome(
        current,
        {
          success: result.success,
          verified: result.accepted,
          latencyMs: result.latencyMs,
          costMicroUsd: result.costMicroUsd,
          errorKind: result.errorKind,
          judge: false,
        },
        now,
        this.scenario.circuitCooldownMs,
      ),
    );
  }
}

/**
 * A baseline: the same hard filters as the placer (capability, budget, tried backends, strictly
 * stronger on escalation) but no signals; `choose` picks among what is left.
 */
export class BaselinePolicy implements Policy {
  constructor(
    readonly name: string,
    private readonly scenario: Scenario,
    private readonly choose: (eligible: Backend[], ask: PlacementAsk) => Backend | undefined,
  ) {}

  place(ask: PlacementAsk): Backend | undefined {
    const { eligible } = filterBackends(ask.backends, ask.request, {
      signals: new Map(),
      now: ask.now,
      circuitCooldownMs: this.scenario.circuitCooldownMs,
    });
    return eligible.length > 0 ? this.choose(eligible.map((item) => item.backend), ask) : undefined;
  }

  report(): void {}
}

/** The declared price of a call of the expected size, as the placer estimates it before any signal. */
export function stickerCost(backend: Backend, inputTokens: number): number {
  return estimate(backend as Parameters<typeof estimate>[0], undefined, inputTokens, 'closed').expectedCostMicroUsd;
}

export function baselines(world: SimulatedWorld): Policy[] {
  const scenario = world.scenario;
  const random = new SeededRandom(`${scenario.seed}:random-policy`);
  const cheapestOf = (items: Backend[], inputTokens: number) =>
    [...items].sort((left, right) => stickerCost(left, inputTokens) - stickerCost(right, inputTokens))[0];
  return [
    new BaselinePolicy('always-cheapest', scenario, (eligible, ask) => cheapestOf(eligible, ask.task.inputTokens)),
    new BaselinePolicy('always-strongest', scenario, (eligible, ask) => {
      const top = Math.max(...eligible.map((backend) => backend.qualityTier));
      return cheapestOf(eligible.filter((backend) => backend.qualityTier === top), ask.task.inputTokens);
    }),
    new BaselinePolicy('random', scenario, (eligible) => random.pick(eligible)),
    // Knows the world's hidden rates and prices at each task (not the task's draws) and which backends
    // are down: the first backend of the chain of attempts the engine would still make that has the
    // lowest expected cost per verified success. What a placer that had learned everything exactly
    // could do with this metric; no policy is expected to beat it except by the luck of the draws.
    new BaselinePolicy('best fixed chain', scenario, (eligible, ask) => {
      const up = eligible.filter((backend) => !world.isDown(backend.type, ask.task.index));
      const attemptsLeft = scenario.maxAttempts - ask.request.excludeBackends.length;
      return bestChain(up.length > 0 ? up : eligible, attemptsLeft, (backend) => world.expectedAttempt(ask.task, backend))[0];
    }),
    // Knows this task's hidden draws: the cheapest backend whose answer would be right and accepted,
    // else one whose answer would be accepted, else the strongest that is up. A bound on correctness,
    // not a policy, and not a bound on cost per verified success: it refuses the cheap wrong answers a
    // verifier would accept, which count as verified successes for every other policy.
    new BaselinePolicy('oracle', scenario, (eligible, ask) => {
      const outcomes = eligible.map((backend) => ({ backend, result: world.attempt(ask.task, backend) }));
      const byCost = (items: typeof outcomes) => [...items].sort((left, right) => left.result.costMicroUsd - right.result.costMicroUsd)[0]?.backend;
      return (
        byCost(outcomes.filter((item) => item.result.accepted && item.result.correct)) ??
        byCost(outcomes.filter((item) => item.result.accepted)) ??
        [...outcomes].filter((item) => item.result.success).sort((left, right) => right.backend.qualityTier - left.backend.qualityTier)[0]?.backend ??
        eligible[0]
      );
    }),
  ];
}

/**
 * The sequence of at most `attemptsLeft` backends, each of a strictly higher tier than the one before
 * (a rejected answer escalates so), with the lowest expected cost per verified success. Only maximal
 * sequences count: the engine asks for another attempt while attempts are left and a stronger backend
 * exists, so a chain may not stop early. Exhaustive: a handful of backends, a few attempts.
 */
export function bestChain(
  backends: Backend[],
  attemptsLeft: number,
  expected: (backend: Backend) => { acceptRate: number; costMicroUsd: number },
): Backend[] {
  const byTier = [...backends].sort((left, right) => left.qualityTier - right.qualityTier);
  const outcomes = new Map(byTier.map((backend) => [backend.type, expected(backend)]));
  let best: { chain: Backend[]; perSuccess: number } | undefined;
  const extend = (chain: Backend[], cost: number, success: number, reach: number) => {
    const last = chain.at(-1);
    const stronger = byTier.filter((backend) => !last || backend.qualityTier > last.qualityTier);
    if (chain.length > 0 && (chain.length === attemptsLeft || stronger.length === 0)) {
      const perSuccess = success > 0 ? cost / success : Number.POSITIVE_INFINITY;
      if (!best || perSuccess < best.perSuccess) best = { chain, perSuccess };
      return;
    }
    for (const backend of stronger) {
      const outcome = outcomes.get(backend.type)!;
      extend([...chain, backend], cost + reach * outcome.costMicroUsd, success + reach * outcome.acceptRate, reach * (1 - outcome.acceptRate));
    }
  };
  extend([], 0, 0, 1);
  return best?.chain ?? [];
}

export interface PolicyReport {
  policy: string;
  tasks: number;
  /** Tasks that ended with an answer the verifier accepted. */
  verified: number;
  /** Accepted answers that were actually right. */
  correct: number;
  costMicroUsd: number;
  latencyP50Ms: number;
  attempts: number;
  escalations: number;
  failovers: number;
  /**
   * Incumbent changes per (project, task class, mode), summed over the classes (see
   * Policy.incumbentChanges); undefined for baselines, which keep no incumbent.
   */
  flips?: number;
  /**
   * Consecutive tasks of a class whose first attempt went to a different backend: flips, plus
   * stand-ins while an incumbent is suspect and trials of a challenger, and every change of a baseline.
   */
  moves: number;
  /** First attempts placed on a backend that was down. */
  downFirst: number;
  /** First attempts on a down backend right after the previous task of the class met the same outage there. */
  downRepeats: number;
  /** Where first attempts went, by backend. */
  firstPlacements: Map<string, number>;
}

/** Runs every task of the world through the engine's attempt loop under one policy. */
export function simulate(world: SimulatedWorld, policy: Policy): PolicyReport {
  const scenario = world.scenario;
  const report: PolicyReport = {
    policy: policy.name,
    tasks: world.tasks.length,
    verified: 0,
    correct: 0,
    costMicroUsd: 0,
    latencyP50Ms: 0,
    attempts: 0,
    escalations: 0,
    failovers: 0,
    moves: 0,
    downFirst: 0,
    downRepeats: 0,
    firstPlacements: new Map(),
  };
  const latencies: number[] = [];
  const lastFirst = new Map<string, { backend: string; down: boolean }>();

  for (const task of world.tasks) {
    const backends = world.backendsAt(task.index);
    const tried: string[] = [];
    let escalateFrom: string | undefined;
    let lastFailure: 'rejected' | 'errored' | undefined;
    let spentMicroUsd = 0;
    let elapsedMs = 0;

    for (let number = 1; number <= scenario.maxAttempts; number++) {
      const now = new Date(task.startMs + elapsedMs);
      const request: PlacementRequest = {
        projectId: PROJECT,
        taskId: `tsk_${task.index}`,
        taskClass: task.taskClass,
        requiredCapabilities: [],
        estimatedInputTokens: task.inputTokens,
        mode: 'balanced',
        purpose: 'work',
        taskBudgetLeftMicroUsd: Math.max(0, scenario.taskBudgetMicroUsd - spentMicroUsd),
        dayBudgetLeftMicroUsd: DAY_BUDGET_MICRO_USD,
        allowedBackends: [],
        excludeBackends: [...tried],
        escalateFromBackend: escalateFrom,
        availableBackends: [],
      };
      const backend = policy.place({ task, request, backends, now });
      if (!backend) break;
      if (lastFailure === 'rejected') report.escalations++;
      if (lastFailure === 'errored') report.failovers++;
      if (number === 1) {
        const down = world.isDown(backend.type, task.index);
        const previous = lastFirst.get(task.taskClass);
        if (previous && previous.backend !== backend.type) report.moves++;
        if (down) report.downFirst++;
        if (down && previous?.down && previous.backend === backend.type) report.downRepeats++;
        lastFirst.set(task.taskClass, { backend: backend.type, down });
        report.firstPlacements.set(backend.type, (report.firstPlacements.get(backend.type) ?? 0) + 1);
      }

      const result = world.attempt(task, backend);
      report.attempts++;
      elapsedMs += result.latencyMs;
      spentMicroUsd += result.costMicroUsd + (result.success ? scenario.verifier.costMicroUsd : 0);
      policy.report(task, backend.type, result, new Date(task.startMs + elapsedMs));
      tried.push(backend.type);
      if (!result.success) {
        lastFailure = 'errored';
        continue;
      }
      if (result.accepted) {
        report.verified++;
        if (result.correct) report.correct++;
        break;
      }
      lastFailure = 'rejected';
      escalateFrom = backend.type;
    }
    report.costMicroUsd += spentMicroUsd;
    latencies.push(elapsedMs);
  }
  report.latencyP50Ms = percentile(latencies, 0.5);
  report.flips = policy.incumbentChanges;
  return report;
}

/** The hidden chance of a right answer for a class at a task index, after any quality change before it. */
function successRateAt(backend: SimulatedBackend, taskClass: string, taskIndex: number): number {
  let rate = backend.successRate[taskClass] ?? 0;
  for (const change of backend.qualityChanges) {
    if (change.atTask <= taskIndex && change.successRate[taskClass] !== undefined) rate = change.successRate[taskClass]!;
  }
  return rate;
}
