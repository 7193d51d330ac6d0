import { z } from 'zod';

/**
 * Reads the `claude` CLI's `--output-format stream-json --verbose --include-partial-messages` output,
 * one JSON object a line: `system` (`init` with the session, model and MCP servers), `stream_event`
 * (the Anthropic Messages stream events of each turn), `assistant` and `user` (whole messages, tool
 * calls and results), and one final `result` (answer, session, turns, usage, cost).
 */

/** What the parser makes of one line. */
export type ClaudeCodeStreamEvent =
  /** Answer text of the main conversation, as it streams. */
  | { kind: 'text'; text: string }
  /** Progress worth a trace line: the session started, a tool was called, a turn ended. */
  | { kind: 'log'; message: string }
  /** The usage so far, after a turn started or grew. */
  | { kind: 'usage'; usage: ClaudeCodeUsage }
  /** The final result line. */
  | { kind: 'result'; result: ClaudeCodeResult };

export interface ClaudeCodeUsage {
  /** Input tokens, cache reads and writes included. */
  inputTokens: number;
  outputTokens: number;
}

/** The CLI's final `result` line. */
export interface ClaudeCodeResult {
  /** `success`, `error_max_turns`, `error_max_budget_usd`, `error_during_execution`... */
  subtype: string;
  isError: boolean;
  /** The final answer text (absent on some errors). */
  text?: string;
  sessionId?: string;
  turns?: number;
  /** The cost the CLI computed, in micro-USD. */
  costMicroUsd?: number;
  /** Token usage over the whole run, side calls included when the CLI lists them per model. */
  usage?: ClaudeCodeUsage;
  /** The value of a `--json-schema` run. */
  structuredOutput?: unknown;
  /** Error texts the CLI listed. */
  errors: string[];
}

const messageUsageSchema = z
  .object({
    input_tokens: z.number().optional(),
    output_tokens: z.number().optional(),
    cache_creation_input_tokens: z.number().nullish(),
    cache_read_input_tokens: z.number().nullish(),
  })
  .loose();

const lineSchema = z.object({ type: z.string(), subtype: z.string().optional(), parent_tool_use_id: z.string().nullish() }).loose();

const initSchema = z
  .object({
    session_id: z.string().optional(),
    model: z.string().optional(),
    mcp_servers: z.array(z.object({ name: z.string(), status: z.string() }).loose()).optional(),
  })
  .loose();

const streamEventSchema = z
  .object({
    event: z
      .object({
        type: z.string(),
        message: z.object({ id: z.string().optional(), usage: messageUsageSchema.optional() }).loose().optional(),
        delta: z.object({ type: z.string().optional(), text: z.string().optional(), stop_reason: z.string().nullish() }).loose().optional(),
        usage: messageUsageSchema.optional(),
      })
      .loose(),
  })
  .loose();

const assistantSchema = z
  .object({
    message: z
      .object({
        id: z.string().optional(),
        content: z.array(z.object({ type: z.string(), text: z.string().optional(), name: z.string().optional(), input: z.unknown() }).loose()).optional(),
      })
      .loose(),
  })
  .loose();

const resultSchema = z
  .object({
    subtype: z.string().default('unknown'),
    is_error: z.boolean().default(false),
    result: z.string().optional(),
    session_id: z.string().optional(),
    num_turns: z.number().optional(),
    total_cost_usd: z.number().optional(),
    usage: messageUsageSchema.optional(),
    modelUsage: z
      .record(
        z.string(),
        z.object({ inputTokens: z.number().default(0), outputTokens: z.number().default(0), cacheReadInputTokens: z.number().default(0), cacheCreationInputTokens: z.number().default(0) }).loose(),
      )
      .optional(),
    structured_output: z.unknown().optional(),
    errors: z.array(z.unknown()).optional(),
  })
  .loose();

/** Parses the CLI's lines in order; keeps what it needs across lines (usage per message, which messages streamed). */
export class ClaudeCodeStreamParser {
  /** Usage of each assistant message by id, so a message counted at start and at its end is counted once. */
  private readonly usageByMessage = new Map<string, ClaudeCodeUsage>();
  /** Messages whose text came as deltas: their whole-message copy must not be emitted twice. */
  private readonly streamedMessages = new Set<string>();
  private currentMessageId: string | undefined;
  private anonymousMessages = 0;
  sessionId: string | undefined;

  /** The events one line yields; a line that is not JSON, or of a kind not listed, yields none. */
  parse(line: string): ClaudeCodeStreamEvent[] {
    const trimmed = line.trim();
    if (!trimmed.startsWith('{')) return [];
    let json: unknown;
    try {
      json = JSON.parse(trimmed);
    } catch {
      return [];
    }
    const parsed = lineSchema.safeParse(json);
    if (!parsed.success) return [];
    const head = parsed.data;
    // Lines of subagents (Task tool) carry their parent's tool id: their text is not the answer.
    const mainConversation = !head.parent_tool_use_id;
    switch (head.type) {
      case 'system':
        return head.subtype === 'init' ? this.init(json) : [];
      case 'stream_event':
        return mainConversation ? this.streamEvent(json) : [];
      case 'assistant':
        return mainConversation ? this.assistant(json) : [];
      case 'result':
        return this.result(json);
      default:
        return [];
    }
  }

  /** The usage of every assistant message seen so far. */
  runningUsage(): ClaudeCodeUsage {
    let inputTokens = 0;
    let outputTokens = 0;
    for (const usage of this.usageByMessage.values()) {
      inputTokens += usage.inputTokens;
      outputTokens += usage.outputTokens;
    }
    return { inputTokens, outputTokens };
  }

  private init(json: unknown): ClaudeCodeStreamEvent[] {
    const init = initSchema.safeParse(json);
    if (!init.success) return [];
    this.sessionId = init.data.session_id ?? this.sessionId;
    const servers = init.data.mcp_servers ?? [];
    const mcp = servers.length > 0 ? `; MCP servers: ${servers.map((server) => `${server.name} (${server.status})`).join(', ')}` : '';
    return [{ kind: 'log', message: `claude-code: session ${init.data.session_id ?? '(unknown)'} started, model ${init.data.model ?? '(default)'}${mcp}` }];
  }

  private streamEvent(json: unknown): ClaudeCodeStreamEvent[] {
    const parsed = streamEventSchema.safeParse(json);
    if (!parsed.success) return [];
    const event = parsed.data.event;
    if (event.type === 'message_start') {
      this.currentMessageId = event.message?.id ?? `anonymous-${(this.anonymousMessages += 1)}`;
      const usage = event.message?.usage;
      this.usageByMessage.set(this.currentMessageId, {
        inputTokens: inputTokensOf(usage),
        outputTokens: usage?.output_tokens ?? 0,
      });
      return [{ kind: 'usage', usage: this.runningUsage() }];
    }
    if (event.type === 'content_block_delta' && event.delta?.type === 'text_delta' && event.delta.text) {
      if (this.currentMessageId) this.streamedMessages.add(this.currentMessageId);
      return [{ kind: 'text', text: event.delta.text }];
    }
    if (event.type === 'message_delta' && this.currentMessageId) {
      const known = this.usageByMessage.get(this.currentMessageId) ?? { inputTokens: 0, outputTokens: 0 };
      // message_delta's output_tokens is the message's running total, not an increment.
      this.usageByMessage.set(this.currentMessageId, {
        inputTokens: Math.max(known.inputTokens, inputTokensOf(event.usage)),
        outputTokens: event.usage?.output_tokens ?? known.outputTokens,
      });
      return [{ kind: 'usage', usage: this.runningUsage() }];
    }
    return [];
  }

  private assistant(json: unknown): ClaudeCodeStreamEvent[] {
    const parsed = assistantSchema.safeParse(json);
    if (!parsed.success) return [];
    const { id, content = [] } = parsed.data.message;
    const events: ClaudeCodeStreamEvent[] = [];
    for (const block of content) {
      if (block.type === 'tool_use') {
        events.push({ kind: 'log', message: `claude-code: tool ${block.name ?? '(unnamed)'} called with ${truncate(JSON.stringify(block.input ?? {}), 300)}` });
      } else if (block.type === 'text' && block.text && !(id && this.streamedMessages.has(id))) {
        // A CLI run without partial messages sends each text block whole, once.
        events.push({ kind: 'text', text: block.text });
      }
    }
    return events;
  }

  private result(json: unknown): ClaudeCodeStreamEvent[] {
    const parsed = resultSchema.safeParse(json);
    if (!parsed.success) return [];
    const line = parsed.data;
    this.sessionId = line.session_id ?? this.sessionId;
    let usage: ClaudeCodeUsage | undefined;
    if (line.modelUsage && Object.keys(line.modelUsage).length > 0) {
      usage = { inputTokens: 0, outputTokens: 0 };
      for (const model of Object.values(line.modelUsage)) {
        usage.inputTokens += model.inputTokens + model.cacheReadInputTokens + model.cacheCreationInputTokens;
        usage.outputTokens += model.outputTokens;
      }
    } else if (line.usage) {
      usage = { inputTokens: inputTokensOf(line.usage), outputTokens: line.usage.output_tokens ?? 0 };
    }
    return [
      {
        kind: 'result',
        result: {
          subtype: line.subtype,
          isError: line.is_error,
          text: line.result,
          sessionId: line.session_id,
          turns: line.num_turns,
          costMicroUsd: line.total_cost_usd === undefined ? undefined : Math.ceil(Number((line.total_cost_usd * 1_000_000).toFixed(3))),
          usage,
          structuredOutput: line.structured_output,
          errors: (line.errors ?? []).map((error) => (typeof error === 'string' ? error : JSON.stringify(error))),
        },
      },
    ];
  }
}

function inputTokensOf(usage: z.infer<typeof messageUsageSchema> | undefined): number {
  return (usage?.input_tokens ?? 0) + (usage?.cache_creation_input_tokens ?? 0) + (usage?.cache_read_input_tokens ?? 0);
}

function truncate(text: string, length: number): string {
  return text.length > length ? `${text.slice(0, length)}...` : text;
}
