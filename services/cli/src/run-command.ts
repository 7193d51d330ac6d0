import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { runTask, type AttemptRecord, type EngineOutcome, type EnginePorts, type EngineTask, type ExplanationEntry } from '@actor/engine';
import { costJson, formatUsd, newId, usdToMicro } from '@actor/kit';
import { GitWorkspacePort } from '@actor/execution/src/ports/git-workspace-port.js';
import { actorHome } from './actor-home.js';
import { UsageError, exitCodes, type RunArguments } from './arguments.js';
import { FileTracePort, type TraceLine } from './file-trace-port.js';
import { LocalBillingPort } from './local-billing-port.js';
import { discoverLocalAdapters } from './local-adapters.js';
import { LocalPlacementPort } from './local-placement-port.js';
import { LocalPoolPort } from './local-pool-port.js';

/** The project every local run belongs to (the day budget is this machine's). */
export const localProjectId = 'local';

export interface RunContext {
  env: Record<string, string | undefined>;
  cwd: string;
  stdout: Writable;
  stderr: Writable;
  /** Aborted by Ctrl-C: the engine stops the adapter, settles what ran and releases the rest. */
  signal: AbortSignal;
}

/** Runs one task through the engine with local ports; resolves with the process's exit code. */
export async function runCommand(run: RunArguments, context: RunContext): Promise<number> {
  const adapters = await discoverLocalAdapters(context.env);
  const named = [
    ...run.backends.map((backend) => ({ flag: '--backend', backend })),
    ...(run.classifierBackend ? [{ flag: '--classifier', backend: run.classifierBackend }] : []),
  ];
  for (const { flag, backend } of named) {
    if (!adapters.definitions.some((definition) => definition.declaration.type === backend)) {
      const known = adapters.slotTypes.join(', ');
      throw new UsageError(`${flag} ${backend} is not a backend found here (ready: ${known}); see 'actor adapters'`, 'run');
    }
    if (!adapters.slotTypes.includes(backend)) {
      throw new UsageError(`${flag} ${backend} needs a configured agent slot, which the CLI does not have; see 'actor adapters'`, 'run');
    }
  }

  let workspace: GitWorkspacePort | undefined;
  let repository: { repo: string; ref: string } | undefined;
  if (run.repo !== undefined || run.testCommand !== undefined) {
    workspace = new GitWorkspacePort({ directory: tmpdir() });
    const repo = resolve(context.cwd, run.repo ?? '.');
    const problem = await workspace.problem(repo, run.ref ?? '');
    if (problem) throw new UsageError(run.repo === undefined ? `--test works in a git repository: ${problem} (give --repo)` : problem, 'run');
    repository = { repo, ref: run.ref ?? 'HEAD' };
  }

  const home = actorHome(context.env);
  const task: EngineTask = {
    id: newId('tsk'),
    projectId: localProjectId,
    input: run.prompt,
    mode: run.mode,
    budget: { perTaskMicroUsd: usdToMicro(run.budgetUsd), perDayMicroUsd: usdToMicro(run.dayBudgetUsd) },
    backends: run.backends,
    capabilities: [],
    attachmentMediaTypes: [],
    verify: { judge: run.judge, ...(run.testCommand ? { testCommand: run.testCommand } : {}) },
    ...(repository ? { workspace: repository } : {}),
  };

  const say = (text: string) => context.stderr.write(`${text}\n`);
  const trace = await FileTracePort.create(join(home, 'runs', `${task.id}.jsonl`), progressPrinter(say));
  say(
    `actor: task ${task.id}, mode ${task.mode}, budget ${formatUsd(task.budget.perTaskMicroUsd)}${run.judge ? '' : ', no judge'}; trace ${trace.path}`,
  );
  await trace.write({ kind: 'task', task });

  const placement = new LocalPlacementPort({ definitions: adapters.definitions, slotTypes: adapters.slotTypes });
  const billing = new LocalBillingPort({ directory: join(home, 'spend'), rates: adapters.rates });
  const pool = new LocalPoolPort({ agentTypes: adapters.slotTypes, concurrency: run.concurrency, configuration: run.agentConfiguration });
  const ports: EnginePorts = {
    placement,
    billing,
    pool,
    agents: adapters.agents,
    trace,
    workspace,
    newAttemptId: () => newId('att'),
  };

  let outcome: EngineOutcome;
  try {
    outcome = await runTask(task, ports, context.signal, {
      maxAttempts: run.maxAttempts,
      timeoutMs: run.timeoutMs,
      ...(run.classifierBackend ? { classifierBackend: run.classifierBackend } : {}),
    });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    await trace.write({ kind: 'end', outcome: { state: 'error', message } }).catch(() => undefined);
    await trace.close();
    say(`actor: the run stopped on an unexpected error: ${message}`);
    return exitCodes.failed;
  }
  await trace.write({ kind: 'end', outcome });
  await trace.close();

  const attempts = [...trace.attempts.values()];
  if (run.json) {
    context.stdout.write(`${JSON.stringify(runJson(task, outcome, attempts, trace.explanations, trace.path), null, 2)}\n`);
  }
  const cost = `${formatUsd(outcome.costMicroUsd)} (${outcome.costMicroUsd} micro-USD)`;
  if (outcome.state === 'succeeded') {
    const last = attempts.filter((attempt) => attempt.state === 'passed').at(-1);
    const how = outcome.verified === false ? 'not verified (no judge)' : 'verified';
    say(`actor: succeeded${last ? ` on ${last.backend}` : ''}, ${how}, cost ${cost}`);
    if (!run.json) context.stdout.write(outcome.result.endsWith('\n') ? outcome.result : `${outcome.result}\n`);
    return exitCodes.succeeded;
  }
  if (outcome.state === 'cancelled') {
    say(`actor: cancelled (${outcome.code}), cost ${cost}`);
    return exitCodes.cancelled;
  }
  say(`actor: failed (${outcome.code}): ${outcome.message}`);
  say(`actor: cost ${cost}`);
  return exitCodes.failed;
}

/** Prints the engine's progress as it happens: each explanation entry, one line. */
function progressPrinter(say: (text: string) => void): (line: TraceLine) => void {
  return (line) => {
    if (line.kind === 'explain') say(`  [${line.entry.step}] ${line.entry.message}`);
  };
}

/** `actor run --json`: the task's answer in the REST API's vocabulary (snake_case, cost as usd + micro_usd). */
export function runJson(task: EngineTask, outcome: EngineOutcome, attempts: AttemptRecord[], explanation: ExplanationEntry[], tracePath: string) {
  return {
    id: task.id,
    state: outcome.state,
    mode: task.mode,
    result: outcome.state === 'succeeded' ? outcome.result : null,
    verified: outcome.state === 'succeeded' ? outcome.verified !== false : false,
    error: outcome.state === 'succeeded' ? null : { code: outcome.code, message: outcome.message },
    cost: costJson(outcome.costMicroUsd),
    budget: { per_task: costJson(task.budget.perTaskMicroUsd), per_day: costJson(task.budget.perDayMicroUsd) },
    attempts: attempts.map((attempt) => ({
      id: attempt.id,
      number: attempt.number,
      backend: attempt.backend,
      model_family: attempt.modelFamily,
      state: attempt.state,
      output: attempt.output,
      error: attempt.error ?? null,
      cost: costJson(attempt.costMicroUsd),
      input_tokens: attempt.inputTokens,
      output_tokens: attempt.outputTokens,
      latency_ms: attempt.latencyMs,
      verdict: attempt.verdict ?? null,
    })),
    explanation: explanation.map((entry) => ({
      step: entry.step,
      attempt: entry.attempt,
      message: entry.message,
      ...(entry.backend ? { backend: entry.backend } : {}),
      ...(entry.decisionId ? { decision_id: entry.decisionId } : {}),
      ...(entry.detail !== undefined ? { detail: entry.detail } : {}),
    })),
    trace_file: tracePath,
  };
}
