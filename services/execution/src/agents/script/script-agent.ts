import { StringDecoder } from 'node:string_decoder';
import { z } from 'zod';
import type { AdapterLimits } from '@actor/proto/registry';
import {
  mergeLimits,
  stricterLimit,
  type Agent,
  type AgentCheckResult,
  type AgentEvent,
  type AgentRequest,
  type AgentResult,
} from '../agent.js';
import { RunRegistry, stopMessage } from '../run-registry.js';
import { SecretRedactor } from '../subprocess/secret-redactor.js';
import { spawnProcessGroup, subprocessEnvironment } from '../subprocess/process-group.js';

/** The adapter type of script-mode work. */
export const scriptAdapterType = 'script';

/**
 * The agent slot's `configuration` for script work, written by an admin (a task can never supply it).
 * - `command` (required): the argv array to run, program first (`["/usr/bin/wc", "-w"]`); no shell
 *   is involved, so nothing in it is interpreted.
 * - `cwd`: the working directory; default: the request's `workingDirectory`, else this process's.
 * - `env`: extra environment variables for the command.
 * - `timeout_ms`: the longest run, in ms; the stricter of this, the caller's and the declared limit wins.
 */
export const scriptConfigurationSchema = z.object({
  command: z.array(z.string().min(1)).min(1),
  cwd: z.string().min(1).optional(),
  env: z.record(z.string(), z.string()).optional(),
  timeout_ms: z.number().int().positive().optional(),
});

export type ScriptConfiguration = z.infer<typeof scriptConfigurationSchema>;

/** How much of stderr a failed run's error message keeps (its end, where the reason usually is). */
const stderrTailCharacters = 2_000;

/**
 * Script-mode work, no AI: runs the command configured on the agent slot with the task text on
 * stdin. The output is stdout; the run succeeds when the command exits with code 0. The command
 * runs in its own process group, which is killed on cancel or timeout.
 */
export class ScriptAgent implements Agent {
  readonly type = scriptAdapterType;
  private readonly runs = new RunRegistry();

  constructor(private readonly limits: AdapterLimits) {}

  async execute(request: AgentRequest, signal: AbortSignal, onEvent: (event: AgentEvent) => void): Promise<AgentResult> {
    const started = Date.now();
    const redactor = SecretRedactor.forEnvironment(request.environment);
    const log: string[] = [];
    const fail = (errorKind: NonNullable<AgentResult['errorKind']>, errorMessage: string, output = ''): AgentResult => {
      const message = redactor.redact(errorMessage);
      log.push(message);
      return { success: false, output, errorKind, errorMessage: message, executionLog: log, inputTokens: 0, outputTokens: 0, durationMs: Date.now() - started };
    };

    const parsed = scriptConfigurationSchema.safeParse(request.configuration ?? {});
    if (!parsed.success) {
      const configured = request.configuration?.command !== undefined;
      return fail(
        'backend',
        configured
          ? `script: the agent slot's configuration is invalid: ${parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'} ${issue.message}`).join('; ')}`
          : 'script: the agent slot\'s configuration names no command; an admin must set configuration.command to an argv array such as ["/usr/bin/wc", "-w"]',
      );
    }
    const configuration = parsed.data;
    const [program, ...args] = configuration.command as [string, ...string[]];
    const timeoutMs = mergeLimits({ timeoutMs: stricterLimit(request.timeoutMs, configuration.timeout_ms) }, this.limits).timeoutMs;
    const cwd = configuration.cwd ?? request.workingDirectory;
    log.push(`script: running ${program} with ${args.length} argument(s)${cwd ? ` in ${cwd}` : ''}, time limit ${timeoutMs} ms`);

    const run = this.runs.start(request.executionId, signal, timeoutMs);
    try {
      if (run.stopReason()) return fail(run.stopReason()!, stopMessage(run.stopReason()!, timeoutMs));
      const group = spawnProcessGroup(program, args, {
        cwd,
        environment: subprocessEnvironment(configuration.env, request.environment),
      });
      const onStop = () => group.stop();
      run.signal.addEventListener('abort', onStop, { once: true });

      let output = '';
      const stdoutDecoder = new StringDecoder('utf8');
      const stdoutRedactor = redactor.stream();
      const emit = (text: string) => {
        if (text.length === 0) return;
        output += text;
        onEvent({ kind: 'output', text });
      };
      group.child.stdout.on('data', (chunk: Buffer) => emit(stdoutRedactor.push(stdoutDecoder.write(chunk))));
      let stderr = '';
      const stderrDecoder = new StringDecoder('utf8');
      group.child.stderr.on('data', (chunk: Buffer) => {
        stderr = (stderr + stderrDecoder.write(chunk)).slice(-stderrTailCharacters * 2);
      });
      group.child.stdin.end(request.prompt);

      const exit = await group.closed;
      run.signal.removeEventListener('abort', onStop);
      emit(stdoutRedactor.push(stdoutDecoder.end()));
      emit(stdoutRedactor.flush());
      stderr += stderrDecoder.end();

      const stopped = run.stopReason();
      if (stopped) return fail(stopped, stopMessage(stopped, timeoutMs), output);
      if (exit.kind === 'spawn-failed') {
        return fail('unavailable', `script: cannot start ${program}: ${exit.error.code ?? exit.error.message}`, output);
      }
      const tail = stderr.trim().slice(-stderrTailCharacters);
      if (exit.code !== 0) {
        const how = exit.code === null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
        return fail('backend', `script: ${program} ${how}${tail ? `; stderr: ${tail}` : ''}`, output);
      }
      log.push(`script: ${program} exited with code 0 after ${Date.now() - started} ms`);
      return { success: true, output, executionLog: log, inputTokens: 0, outputTokens: 0, durationMs: Date.now() - started };
    } finally {
      run.finish();
    }
  }

  /** Script work has no schema to answer with: the command's stdout must be JSON, which is parsed. */
  async executeWithSchema(request: AgentRequest, jsonSchema: Record<string, unknown>, signal: AbortSignal): Promise<AgentResult> {
    const result = await this.execute(request, signal, () => {});
    if (!result.success) return result;
    try {
      const value: unknown = JSON.parse(result.output);
      const required = Array.isArray(jsonSchema.required) ? (jsonSchema.required as string[]) : [];
      const missing = value !== null && typeof value === 'object' ? required.filter((name) => !(name in value)) : required;
      if (typeof value !== 'object' || value === null || missing.length > 0) {
        return { ...result, success: false, errorKind: 'backend', errorMessage: `script: the output lacks the schema's required properties (${missing.join(', ') || 'not an object'})` };
      }
      return { ...result, structured: value };
    } catch {
      return { ...result, success: false, errorKind: 'backend', errorMessage: 'script: the output is not JSON, so it cannot answer a schema' };
    }
  }

  async cancel(executionId: string): Promise<void> {
    this.runs.cancel(executionId);
  }

  async healthCheck(): Promise<AgentCheckResult[]> {
    return [
      {
        name: 'script',
        status: 'ok',
        message: 'runs the command configured on each agent slot (configuration.command); nothing to check until a slot names one',
      },
    ];
  }
}
