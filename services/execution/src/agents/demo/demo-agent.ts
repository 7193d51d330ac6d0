import { createHash } from 'node:crypto';
import { z } from 'zod';
import { readJudgePrompt } from '@actor/engine';
import { estimateTokens } from '@actor/kit';
import type { AdapterLimits } from '@actor/proto/registry';
import {
  mergeLimits,
  type Agent,
  type AgentCheckResult,
  type AgentEvent,
  type AgentRequest,
  type AgentResult,
} from '../agent.js';
import { RunRegistry, pause, stopMessage, type Run } from '../run-registry.js';
import { composeDemoAnswer, demoFlawMarker, splitIntoChunks } from './demo-answer.js';
import type { DemoBackend } from './demo-catalog.js';
import { valueForSchema } from './demo-schema-value.js';

/**
 * How a demo agent slot behaves, from the slot's `configuration` JSON. Every field is optional.
 * - `latency_ms`: run time in ms (default: the backend's typical latency, varied by up to 20 %).
 * - `failure_rate` 0..1: probability that a run fails as a backend error, with no output.
 * - `quality` 0..1: probability that an answer is good (default: the backend's); 0 and 1 are exact.
 * - `stream_chunks`: how many `output` events the answer is streamed in (default 6).
 * - `fail_after_output`: stream part of the answer, then fail (`true`: half the chunks; a number:
 *   that many chunks).
 * - `judge_accuracy` 0..1: probability that a judge verdict is right (default 1).
 * - `seed`: with the execution id, fixes every random draw, so runs are reproducible.
 */
export const demoConfigurationSchema = z.object({
  latency_ms: z.number().int().min(0).max(3_600_000).optional(),
  failure_rate: z.number().min(0).max(1).optional(),
  quality: z.number().min(0).max(1).optional(),
  stream_chunks: z.number().int().min(1).max(10_000).optional(),
  fail_after_output: z.union([z.boolean(), z.number().int().min(1)]).optional(),
  judge_accuracy: z.number().min(0).max(1).optional(),
  seed: z.union([z.string(), z.number()]).optional(),
});

export type DemoConfiguration = z.infer<typeof demoConfigurationSchema>;

const defaultStreamChunks = 6;
const defaultSeed = 'actor-demo';

/**
 * A number in [0, 1) fixed by (seed, execution id, purpose): a hash, not Math.random, so tests and
 * benchmarks replay exactly. `draw < probability` is never true for 0 and always true for 1.
 */
export function demoDraw(seed: string | number, executionId: string, purpose: string): number {
  const digest = createHash('sha256').update(`${seed}\u0000${executionId}\u0000${purpose}`).digest();
  return digest.readUIntBE(0, 6) / 2 ** 48;
}

/** A built-in demo backend: simulated answers with configurable latency, quality and failures. */
export class DemoAgent implements Agent {
  readonly type: string;
  private readonly runs = new RunRegistry();

  constructor(
    private readonly backend: DemoBackend,
    private readonly limits: AdapterLimits,
  ) {
    this.type = backend.type;
  }

  async execute(request: AgentRequest, signal: AbortSignal, onEvent: (event: AgentEvent) => void): Promise<AgentResult> {
    return this.withRun(request, signal, async (run, configuration, log) => {
      const latencyMs = this.latencyFor(configuration, request.executionId);
      const seed = configuration.seed ?? defaultSeed;
      const failed = this.simulatedFailure(configuration, request.executionId, latencyMs, run, log);
      if (failed) return failed;

      const quality = configuration.quality ?? this.backend.quality;
      const good = demoDraw(seed, request.executionId, 'quality') < quality;
      const answer = composeDemoAnswer(this.backend, request.prompt, good);
      const chunks = splitIntoChunks(answer, configuration.stream_chunks ?? defaultStreamChunks);
      const failAfter = failAfterChunks(configuration.fail_after_output, chunks.length);
      log.push(`${this.type}: simulated run, ${latencyMs} ms, ${chunks.length} chunks, ${good ? 'good' : 'flawed'} answer (quality ${quality})`);

      let output = '';
      for (const [index, chunk] of chunks.entries()) {
        await pause(latencyMs / chunks.length, run.signal);
        if (run.stopReason()) return { output };
        output += chunk;
        onEvent({ kind: 'output', text: chunk });
        if (failAfter !== undefined && index + 1 >= failAfter) {
          return {
            output,
            failure: {
              errorKind: 'backend',
              errorMessage: `${this.type} failed after streaming ${index + 1} of ${chunks.length} chunks (simulated: fail_after_output)`,
            },
          };
        }
      }
      return { output };
    });
  }

  async executeWithSchema(request: AgentRequest, jsonSchema: Record<string, unknown>, signal: AbortSignal): Promise<AgentResult> {
    return this.withRun(request, signal, async (run, configuration, log) => {
      const latencyMs = this.latencyFor(configuration, request.executionId);
      const failed = this.simulatedFailure(configuration, request.executionId, latencyMs, run, log);
      if (failed) return failed;
      await pause(latencyMs, run.signal);
      if (run.stopReason()) return { output: '' };

      // The engine's own reader, so the demo judge sees exactly the task and answer the engine framed.
      const judged = readJudgePrompt(request.prompt);
      let structured = valueForSchema(jsonSchema);
      if (judged) {
        const flawed = judged.answer.includes(demoFlawMarker);
        const accuracy = configuration.judge_accuracy ?? 1;
        const misjudged = demoDraw(configuration.seed ?? defaultSeed, request.executionId, 'judge') >= accuracy;
        const pass = misjudged ? flawed : !flawed;
        log.push(`${this.type}: demo judge found ${flawed ? 'the flaw marker' : 'no flaw marker'}${misjudged ? ' and misjudged on purpose (judge_accuracy)' : ''}`);
        structured = {
          ...(typeof structured === 'object' && structured !== null ? structured : {}),
          pass,
          reasons: [pass ? 'the answer addresses every part of the task' : 'the answer ignores part of the task'],
          scores: judgeScores(jsonSchema, pass),
        };
      } else {
        log.push(`${this.type}: simulated structured value from the schema's required properties`);
      }
      return { output: JSON.stringify(structured), structured };
    });
  }

  async cancel(executionId: string): Promise<void> {
    this.runs.cancel(executionId);
  }

  async healthCheck(): Promise<AgentCheckResult[]> {
    return [{ name: 'demo', status: 'ok', message: `${this.type} is a built-in demo backend: simulated answers, no key or network needed` }];
  }

  /** The shared frame of both calls: configuration, limits, cancel/timeout and the result's shape. */
  private async withRun(
    request: AgentRequest,
    signal: AbortSignal,
    body: (run: Run, configuration: DemoConfiguration, log: string[]) => Promise<RunOutcome>,
  ): Promise<AgentResult> {
    const started = Date.now();
    const log: string[] = [];
    const inputTokens = estimateTokens(`${request.systemPrompt ?? ''}${request.prompt}`);
    const finish = (outcome: RunOutcome, inputCounted: boolean): AgentResult => ({
      success: outcome.failure === undefined,
      output: outcome.output,
      ...outcome.failure,
      executionLog: log,
      inputTokens: inputCounted ? inputTokens : 0,
      outputTokens: estimateTokens(outcome.output),
      durationMs: Date.now() - started,
      ...(outcome.structured !== undefined && outcome.failure === undefined ? { structured: outcome.structured } : {}),
    });

    const parsed = demoConfigurationSchema.safeParse(request.configuration ?? {});
    if (!parsed.success) {
      const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`);
      return finish(
        { output: '', failure: { errorKind: 'unavailable', errorMessage: `invalid demo configuration for ${this.type}: ${problems.join('; ')}` } },
        false,
      );
    }
    const limits = mergeLimits({ timeoutMs: request.timeoutMs }, this.limits);
    if (limits.contextTokens !== undefined && inputTokens > limits.contextTokens) {
      return finish(
        {
          output: '',
          failure: { errorKind: 'backend', errorMessage: `the prompt (~${inputTokens} tokens) exceeds ${this.type}'s context of ${limits.contextTokens} tokens` },
        },
        false,
      );
    }
    const run = this.runs.start(request.executionId, signal, limits.timeoutMs);
    try {
      const outcome = await body(run, parsed.data, log);
      const stopped = run.stopReason();
      if (stopped && outcome.failure === undefined) {
        return finish({ output: outcome.output, failure: { errorKind: stopped, errorMessage: stopMessage(stopped, limits.timeoutMs) } }, true);
      }
      return finish(outcome, true);
    } finally {
      run.finish();
    }
  }

  private latencyFor(configuration: DemoConfiguration, executionId: string): number {
    if (configuration.latency_ms !== undefined) return configuration.latency_ms;
    const variation = 0.8 + 0.4 * demoDraw(configuration.seed ?? defaultSeed, executionId, 'latency');
    return Math.round(this.backend.latencyMs * variation);
  }

  /** A run that fails as a backend would (failure_rate), or undefined when this one does not. */
  private simulatedFailure(
    configuration: DemoConfiguration,
    executionId: string,
    latencyMs: number,
    run: Run,
    log: string[],
  ): Promise<RunOutcome> | undefined {
    const rate = configuration.failure_rate ?? 0;
    if (demoDraw(configuration.seed ?? defaultSeed, executionId, 'failure') >= rate) return undefined;
    log.push(`${this.type}: simulated backend failure (failure_rate ${rate})`);
    // A failing backend usually answers its error sooner than a full run takes.
    return pause(latencyMs / 4, run.signal).then(() => ({
      output: '',
      failure: run.stopReason()
        ? undefined
        : { errorKind: 'backend' as const, errorMessage: `${this.type} failed (simulated backend error: failure_rate ${rate})` },
    }));
  }
}

interface RunOutcome {
  output: string;
  structured?: unknown;
  failure?: { errorKind: NonNullable<AgentResult['errorKind']>; errorMessage: string };
}

function failAfterChunks(setting: DemoConfiguration['fail_after_output'], chunkCount: number): number | undefined {
  if (setting === undefined || setting === false) return undefined;
  if (setting === true) return Math.max(1, Math.floor(chunkCount / 2));
  return Math.min(setting, chunkCount);
}

function judgeScores(jsonSchema: Record<string, unknown>, pass: boolean): Record<string, number> {
  const properties = jsonSchema.properties as Record<string, { properties?: Record<string, unknown> }> | undefined;
  const names = Object.keys(properties?.scores?.properties ?? {});
  const score = pass ? 0.9 : 0.3;
  return Object.fromEntries((names.length > 0 ? names : ['overall']).map((name) => [name, score]));
}
