import { z } from 'zod';

/**
 * Reads the Copilot CLI's `-p ... --output-format json` output (JSONL, one session event a line, as
 * `copilot --help` documents it). The lines this adapter uses, as Copilot CLI 1.0.102 writes them:
 * `assistant.turn_start` (a model turn begins), `assistant.message_delta` (`data.deltaContent`, answer
 * text as it streams), `assistant.message` (`data.content`, one whole assistant message, `data.toolRequests`),
 * `tool.execution_start` / `tool.execution_complete` (a tool call and its outcome), `session.mcp_servers_loaded`,
 * `session.error` (`data.message`, e.g. the provider's HTTP error), and one final `result` line
 * (`sessionId`, `exitCode`, `usage.premiumRequests`). Token counts are not on stdout: see `readCopilotUsageFile`.
 * Unknown lines and lines that are not JSON are ignored, so newer CLI versions only lose detail.
 */

/** What the parser makes of one line. */
export type CopilotStreamEvent =
  /** Answer text as it streams (a separator before a later message of the same run included). */
  | { kind: 'text'; text: string }
  /** Progress worth a trace line: a tool call, its outcome, the MCP servers, a failed model call. */
  | { kind: 'log'; message: string }
  /** A model turn began; `turns` counts them from 1. */
  | { kind: 'turn'; turns: number }
  /** The CLI reported an error for the session (the run will end with a non-zero exit code). */
  | { kind: 'error'; message: string }
  /** The final `result` line. */
  | { kind: 'result'; result: CopilotResult };

/** The CLI's final `result` line. */
export interface CopilotResult {
  sessionId?: string;
  /** The exit code the CLI reports for the run (0 on success). */
  exitCode?: number;
  /** Premium requests the run used (0 with a custom provider). */
  premiumRequests?: number;
}

const lineSchema = z.object({ type: z.string(), data: z.record(z.string(), z.unknown()).optional() }).loose();
const deltaSchema = z.object({ messageId: z.string().optional(), deltaContent: z.string(), parentToolCallId: z.string().optional() }).loose();
const messageSchema = z
  .object({ messageId: z.string().optional(), content: z.string().default(''), parentToolCallId: z.string().optional() })
  .loose();
const toolStartSchema = z.object({ toolName: z.string().default('?'), arguments: z.unknown().optional() }).loose();
const toolCompleteSchema = z
  .object({ success: z.boolean().optional(), error: z.object({ message: z.string().optional() }).loose().optional() })
  .loose();
const mcpSchema = z.object({ servers: z.array(z.object({ name: z.string(), status: z.string().optional() }).loose()).default([]) }).loose();
const errorSchema = z.object({ message: z.string().default('unknown error'), statusCode: z.number().optional() }).loose();
const resultSchema = z
  .object({
    sessionId: z.string().optional(),
    exitCode: z.number().optional(),
    usage: z.object({ premiumRequests: z.number().optional() }).loose().optional(),
  })
  .loose();

/** Longest tool-argument text a log line keeps. */
const argumentCharacters = 300;

export class CopilotStreamParser {
  /** The session id, once the result line named it. */
  sessionId: string | undefined;
  /** The text of the last whole assistant message: the final answer of a run. */
  lastMessage = '';
  private turns = 0;
  /** Messages whose text already streamed as deltas, so that the whole message is not emitted twice. */
  private readonly streamedMessages = new Set<string>();
  private anyText = false;
  private currentMessage: string | undefined;

  parse(line: string): CopilotStreamEvent[] {
    if (!line.trim()) return [];
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch {
      return [];
    }
    const parsed = lineSchema.safeParse(json);
    if (!parsed.success) return [];
    const data = parsed.data.data ?? {};
    switch (parsed.data.type) {
      case 'assistant.turn_start':
        this.turns += 1;
        return [{ kind: 'turn', turns: this.turns }];
      case 'assistant.message_delta': {
        const delta = deltaSchema.safeParse(data);
        // Sub-agents' messages carry the tool call that started them: they are not the answer.
        if (!delta.success || delta.data.parentToolCallId) return [];
        const id = delta.data.messageId ?? '';
        this.streamedMessages.add(id);
        return this.text(id, delta.data.deltaContent);
      }
      case 'assistant.message': {
        const message = messageSchema.safeParse(data);
        if (!message.success || message.data.parentToolCallId) return [];
        if (message.data.content) this.lastMessage = message.data.content;
        const id = message.data.messageId ?? '';
        return this.streamedMessages.has(id) ? [] : this.text(id, message.data.content);
      }
      case 'tool.execution_start': {
        const tool = toolStartSchema.parse(data);
        const args = tool.arguments === undefined ? '' : JSON.stringify(tool.arguments).slice(0, argumentCharacters);
        return [{ kind: 'log', message: `tool ${tool.toolName} called with ${args}` }];
      }
      case 'tool.execution_complete': {
        const outcome = toolCompleteSchema.parse(data);
        return [{ kind: 'log', message: outcome.success === false ? `tool call failed: ${outcome.error?.message ?? 'no reason given'}` : 'tool call succeeded' }];
      }
      case 'session.mcp_servers_loaded': {
        const servers = mcpSchema.parse(data).servers.map((server) => (server.status ? `${server.name} (${server.status})` : server.name));
        return servers.length ? [{ kind: 'log', message: `MCP servers: ${servers.join(', ')}` }] : [];
      }
      case 'session.error': {
        const error = errorSchema.parse(data);
        return [{ kind: 'error', message: error.message }];
      }
      case 'result': {
        const result = resultSchema.safeParse(json);
        if (!result.success) return [];
        this.sessionId = result.data.sessionId ?? this.sessionId;
        return [{ kind: 'result', result: { sessionId: result.data.sessionId, exitCode: result.data.exitCode, premiumRequests: result.data.usage?.premiumRequests } }];
      }
      default:
        return [];
    }
  }

  /** Text of a message; a later message of the run starts on a new paragraph. */
  private text(messageId: string, text: string): CopilotStreamEvent[] {
    if (!text) return [];
    const events: CopilotStreamEvent[] = [];
    if (this.anyText && messageId !== this.currentMessage) events.push({ kind: 'text', text: '\n\n' });
    this.currentMessage = messageId;
    this.anyText = true;
    events.push({ kind: 'text', text });
    return events;
  }
}

/** Token usage of a run. */
export interface CopilotUsage {
  /** Prompt tokens as the provider reported them (cached ones included, as OpenAI counts them). */
  inputTokens: number;
  outputTokens: number;
}

const usageFileSchema = z
  .object({
    modelMetrics: z
      .record(z.string(), z.object({ usage: z.object({ inputTokens: z.number().default(0), outputTokens: z.number().default(0) }).loose() }).loose())
      .default({}),
  })
  .loose();

/**
 * The totals of the file `--usage-output-file` writes when the run ends ("final usage statistics as
 * JSON"): `modelMetrics.<model>.usage.{inputTokens,outputTokens}`, summed over models. Undefined when
 * the text is not such a file.
 */
export function readCopilotUsageFile(text: string): CopilotUsage | undefined {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = usageFileSchema.safeParse(json);
  if (!parsed.success) return undefined;
  const models = Object.values(parsed.data.modelMetrics);
  return {
    inputTokens: models.reduce((sum, model) => sum + model.usage.inputTokens, 0),
    outputTokens: models.reduce((sum, model) => sum + model.usage.outputTokens, 0),
  };
}

const usageRecordSchema = z
  .object({
    type: z.literal('session.usage_record'),
    data: z.object({ usage: z.object({ inputTokens: z.number().default(0), outputTokens: z.number().default(0) }).loose() }).loose(),
  })
  .loose();

/**
 * The usage of one line of the session's event log (`<COPILOT_HOME>/session-state/<session>/events.jsonl`),
 * which the CLI appends as the run goes: a `session.usage_record` line per model call. Used to stop a
 * run at its budget before it ends; undefined for any other line.
 */
export function readCopilotUsageRecord(line: string): CopilotUsage | undefined {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch {
    return undefined;
  }
  const parsed = usageRecordSchema.safeParse(json);
  return parsed.success ? { inputTokens: parsed.data.data.usage.inputTokens, outputTokens: parsed.data.data.usage.outputTokens } : undefined;
}
