import { parseArgs, type ParseArgsConfig } from 'node:util';
import { z } from 'zod';
import type { Mode } from '@actor/engine';

/** A mistake in how the CLI was called: printed with a pointer to `--help`, exit code 2. */
export class UsageError extends Error {
  constructor(
    message: string,
    /** The command whose help to point at, when there is one. */
    readonly command?: string,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The process's exit codes. */
export const exitCodes = { succeeded: 0, failed: 1, usage: 2, cancelled: 130 } as const;

export const modes: readonly Mode[] = ['cheapest', 'balanced', 'best', 'fastest', 'private'];

/** `actor run`'s options as the user gives them; see `runHelp` for what each means. */
const runOptions = {
  mode: { type: 'string', short: 'm' },
  'budget-usd': { type: 'string' },
  'day-budget-usd': { type: 'string' },
  backend: { type: 'string', short: 'b', multiple: true },
  repo: { type: 'string' },
  ref: { type: 'string' },
  test: { type: 'string' },
  json: { type: 'boolean' },
  'no-judge': { type: 'boolean' },
  'max-attempts': { type: 'string' },
  classifier: { type: 'string' },
  'timeout-s': { type: 'string' },
  'agent-config': { type: 'string' },
  concurrency: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options'];

const usd = (name: string) =>
  z.coerce
    .number({ error: `${name} must be a number of US dollars, such as 0.50` })
    .refine((value) => Number.isFinite(value) && value > 0, `${name} must be more than 0`);

const wholeNumber = (name: string, min: number, max: number) =>
  z.coerce
    .number({ error: `${name} must be a whole number` })
    .int(`${name} must be a whole number`)
    .min(min, `${name} must be at least ${min}`)
    .max(max, `${name} must be at most ${max}`);

const runSchema = z.object({
  mode: z.enum(modes as [Mode, ...Mode[]], { error: `--mode must be one of ${modes.join(', ')}` }).default('balanced'),
  'budget-usd': usd('--budget-usd').default(0.5),
  'day-budget-usd': usd('--day-budget-usd').default(10),
  backend: z.array(z.string().trim().min(1, '--backend needs an adapter type')).default([]),
  repo: z.string().trim().min(1, '--repo needs a path').optional(),
  ref: z.string().trim().min(1, '--ref needs a ref').optional(),
  test: z.string().trim().min(1, '--test needs a shell command').optional(),
  json: z.boolean().default(false),
  'no-judge': z.boolean().default(false),
  'max-attempts': wholeNumber('--max-attempts', 1, 10).default(3),
  classifier: z.string().trim().min(1, '--classifier needs an adapter type').optional(),
  'timeout-s': wholeNumber('--timeout-s', 1, 86_400).default(120),
  'agent-config': z
    .string()
    .transform((text, context) => {
      try {
        const value: unknown = JSON.parse(text);
        if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
      } catch {
        // reported below
      }
      context.addIssue({ code: 'custom', message: '--agent-config must be a JSON object, such as \'{"latency_ms": 2000}\'' });
      return z.NEVER;
    })
    .optional(),
  concurrency: wholeNumber('--concurrency', 1, 64).default(4),
});

/** `actor run`, parsed and checked. */
export interface RunArguments {
  prompt: string;
  mode: Mode;
  budgetUsd: number;
  dayBudgetUsd: number;
  backends: string[];
  repo?: string;
  ref?: string;
  testCommand?: string;
  json: boolean;
  judge: boolean;
  maxAttempts: number;
  /** The adapter type asked to classify the task after the local classifier; unset: local only. */
  classifierBackend?: string;
  timeoutMs: number;
  agentConfiguration?: Record<string, unknown>;
  concurrency: number;
}

function parse<T extends ParseArgsConfig['options']>(command: string, args: string[], options: T) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    // Node's messages name the flag ("Unknown option '--mdoe'"); its advice about `--` does not fit here.
    const message = (error as Error).message.replace(/\. To specify a positional argument.*$/s, '').replace(/^Unknown option/, 'unknown option');
    throw new UsageError(message, command);
  }
}

/** Parses `actor run` arguments; `help` true means only `--help` was asked for. */
export function parseRunArguments(args: string[]): { help: true } | { help: false; run: RunArguments } {
  const { values, positionals } = parse('run', args, runOptions);
  if (values.help) return { help: true };
  const checked = runSchema.safeParse(values);
  if (!checked.success) throw new UsageError(checked.error.issues.map((issue) => issue.message).join('; '), 'run');
  const options = checked.data;
  const prompt = positionals.join(' ').trim();
  if (prompt === '') throw new UsageError('the task is missing: actor run "<what to do>"', 'run');
  if (options.ref && !options.repo && !options.test) throw new UsageError('--ref needs --repo (or --test, which works in the current directory)', 'run');
  return {
    help: false,
    run: {
      prompt,
      mode: options.mode,
      budgetUsd: options['budget-usd'],
      dayBudgetUsd: options['day-budget-usd'],
      backends: [...new Set(options.backend)],
      repo: options.repo,
      ref: options.ref,
      testCommand: options.test,
      json: options.json,
      judge: !options['no-judge'],
      maxAttempts: options['max-attempts'],
      classifierBackend: options.classifier,
      timeoutMs: options['timeout-s'] * 1000,
      agentConfiguration: options['agent-config'],
      concurrency: options.concurrency,
    },
  };
}

/** Parses `actor adapters` arguments. */
export function parseAdaptersArguments(args: string[]): { help: boolean; json: boolean } {
  const { values, positionals } = parse('adapters', args, { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } });
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`, 'adapters');
  return { help: values.help ?? false, json: values.json ?? false };
}

export const mainHelp = `actor: run a task on the best agent backend, on this machine

Usage:
  actor run "<task>" [options]   run a task through the engine (place, budget, execute, verify, escalate)
  actor adapters [--json]        list the backends found here, ready or not and why
  actor help [command]           this help, or a command's

Runs the same engine as the Actor service, with local ports: placement over the adapters found on
this machine (the built-in demo backends always, so it works offline with nothing configured), a
budget enforced in memory and a per-day spend kept under $ACTOR_HOME (default ~/.actor), traces
written to $ACTOR_HOME/runs/<task id>.jsonl.

Exit codes: 0 succeeded, 1 failed, 2 bad usage, 130 cancelled (Ctrl-C).
Run 'actor <command> --help' for a command's options.
`;

export const runHelp = `Usage: actor run "<task>" [options]

Runs the task in this process: classify, place a backend (and a judge of another model family),
reserve the worst case against the budget, execute, verify, escalate to a stronger backend when the
answer is rejected. Progress goes to stderr, the answer to stdout.

Options:
  -m, --mode <mode>          cheapest | balanced | best | fastest | private (default balanced)
      --budget-usd <usd>     most this task may cost, in US dollars (default 0.50)
      --day-budget-usd <usd> most all runs of today (UTC) may cost together (default 10.00)
  -b, --backend <type>       only this adapter type may do the work; repeat for several
                             (see 'actor adapters'; judges are still chosen from all)
      --repo <path>          a local git repository for a code task (default: the current
                             directory when --test is given)
      --ref <ref>            the commit to start from (default HEAD)
      --test "<command>"     a shell command that must pass in the attempt's working copy
                             (an isolated git worktree) before the answer is judged
      --no-judge             accept the answer without a judge (it is reported as not verified)
      --max-attempts <n>     first run plus escalations and failovers (default 3)
      --classifier <type>    also ask this adapter type to classify the task (class, difficulty),
                             billed to the task; its valid answer wins over the local classifier,
                             which stands on any failure (default: local classifier only)
      --timeout-s <s>        longest a single backend call may run, in seconds (default 120)
      --agent-config <json>  configuration handed to every agent slot, e.g. for the demo
                             backends '{"latency_ms": 2000, "quality": 0}'
      --concurrency <n>      backend calls this process runs at once (default 4)
      --json                 print one JSON object (result, error, cost, attempts, explanation)
  -h, --help                 this help

Environment: ACTOR_HOME (default ~/.actor); ACTOR_OPENAI_BASE_URL, ACTOR_OPENAI_API_KEY,
ACTOR_OPENAI_MODEL, ... and ACTOR_CLAUDE_CODE_BIN, ... declare real backends as in the service.

Exit codes: 0 succeeded, 1 failed (the error code is printed, e.g. actor.budget.exceeded),
2 bad usage, 130 cancelled (Ctrl-C stops the run through the engine; Ctrl-C again quits at once).
`;

export const adaptersHelp = `Usage: actor adapters [--json]

Lists the backends this machine's discovery found: each ready one with its model family, quality
tier and prices, and each one that is not ready with why (a missing key, binary or setting).

Options:
      --json       print the list as JSON
  -h, --help       this help
`;
