import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import type { Agent, AgentEvent, AgentRequest, AgentResult, AgentsPort } from '@actor/engine';
import type { SecretResolver } from '../secrets/secret-resolver.js';

/**
 * The keys of an agent slot's configuration JSON (pool `configuration_json`) that this port acts on;
 * every other key goes to the adapter untouched.
 * - `api_key_secret`: the name of a project secret (registry `PutSecret`) holding the backend's key.
 *   The port resolves it for the task's project and hands it to the adapter in memory only, through
 *   `request.environment[agent.byoKeyVariable]`. An adapter that takes no bring-your-own key, a
 *   project without that secret or a registry that cannot be reached fails the attempt (kind
 *   `unavailable`) with a message naming the secret, never its value.
 * - `mcp_servers`: the MCP servers the slot's agent may use, by name, each as Claude Code's
 *   `mcpServers` entries: `{ "command": "...", "args": [...], "env": {...} }` for a stdio server,
 *   `{ "type": "http" | "sse", "url": "...", "headers": {...} }` for a remote one. For each run the
 *   port writes `{"mcpServers": ...}` to a new file (mode 0600, in its own 0700 temporary folder),
 *   passes it as `request.mcpConfigPath` (and the object as `request.mcpConfig`) and deletes it
 *   when the run ends, however it ends. Only those servers are allowed: Claude Code runs with
 *   `--strict-mcp-config`. An adapter that does not support MCP fails the attempt instead of
 *   silently running without its servers.
 */
const slotSettingsSchema = z.object({
  api_key_secret: z.string().trim().min(1, 'must name a project secret').optional(),
  mcp_servers: z
    .record(
      z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'server names are 1-64 letters, digits, ".", "_" or "-"'),
      z.union([
        z.object({
          type: z.literal('stdio').optional(),
          command: z.string().min(1),
          args: z.array(z.string()).optional(),
          env: z.record(z.string(), z.string()).optional(),
        }),
        z.object({
          type: z.enum(['http', 'sse']),
          url: z.url({ protocol: /^https?$/ }),
          headers: z.record(z.string(), z.string()).optional(),
        }),
      ]),
    )
    .optional(),
});

type SlotSettings = z.infer<typeof slotSettingsSchema>;

export interface AdapterAgentsPortOptions {
  /** Resolves `api_key_secret`; without it a slot naming one fails its attempts. */
  secrets?: SecretResolver;
  /** Where the per-run MCP config folders are made; default the OS temporary folder. */
  mcpDirectory?: string;
}

/** A request made ready for its adapter, and what must be undone when the run ends. */
type Prepared = { request: AgentRequest; cleanup: () => Promise<void> } | { failure: AgentResult };

/**
 * The engine's AI call, answered by this process's adapters. One Agent instance per adapter type,
 * kept for the life of the process, so `cancel(executionId)` reaches runs it started. Before each
 * run it applies the slot's `api_key_secret` and `mcp_servers` (see `slotSettingsSchema`).
 */
export class AdapterAgentsPort implements AgentsPort {
  private readonly agents = new Map<string, Agent>();

  constructor(
    private readonly createAgent: (type: string) => Agent | undefined,
    private readonly options: AdapterAgentsPortOptions = {},
  ) {}

  private agentFor(backend: string): Agent | undefined {
    let agent = this.agents.get(backend);
    if (!agent) {
      agent = this.createAgent(backend);
      if (agent) this.agents.set(backend, agent);
    }
    return agent;
  }

  async execute(
    backend: string,
    request: AgentRequest,
    signal: AbortSignal,
    onEvent: (event: AgentEvent) => void,
  ): Promise<AgentResult> {
    const agent = this.agentFor(backend);
    if (!agent) return unavailable(backend);
    return this.withPrepared(agent, request, signal, (prepared) => agent.execute(prepared, signal, onEvent));
  }

  async executeWithSchema(
    backend: string,
    request: AgentRequest,
    jsonSchema: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<AgentResult> {
    const agent = this.agentFor(backend);
    if (!agent) return unavailable(backend);
    return this.withPrepared(agent, request, signal, (prepared) => agent.executeWithSchema(prepared, jsonSchema, signal));
  }

  private async withPrepared(
    agent: Agent,
    request: AgentRequest,
    signal: AbortSignal,
    run: (request: AgentRequest) => Promise<AgentResult>,
  ): Promise<AgentResult> {
    const prepared = await this.prepare(agent, request, signal);
    if ('failure' in prepared) return prepared.failure;
    try {
      return await run(prepared.request);
    } finally {
      await prepared.cleanup();
    }
  }

  private async prepare(agent: Agent, request: AgentRequest, signal: AbortSignal): Promise<Prepared> {
    const started = Date.now();
    const fail = (message: string): Prepared => ({ failure: failed(agent.type, message, Date.now() - started) });
    const parsed = slotSettingsSchema.safeParse(request.configuration ?? {});
    if (!parsed.success) {
      // zod's issues name paths and rules, not the values, so no secret can ride along.
      const issues = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`).join('; ');
      return fail(`the agent slot's configuration is invalid: ${issues}`);
    }
    const settings: SlotSettings = parsed.data;
    let prepared: AgentRequest = request;

    if (settings.api_key_secret !== undefined) {
      const secretName = settings.api_key_secret;
      if (!agent.byoKeyVariable) return fail(`the agent slot names the key secret "${secretName}", but ${agent.type} takes no bring-your-own key`);
      if (!this.options.secrets) return fail(`the agent slot names the key secret "${secretName}", but this execution process cannot read project secrets`);
      if (!request.projectId) return fail(`the agent slot names the key secret "${secretName}", but the run belongs to no project`);
      let key: string;
      try {
        key = await this.options.secrets.resolve(request.projectId, secretName, signal);
      } catch (error) {
        return fail(`the agent slot's key secret could not be used: ${(error as Error).message}`);
      }
      prepared = { ...prepared, environment: { ...prepared.environment, [agent.byoKeyVariable]: key } };
    }

    const servers = settings.mcp_servers;
    if (servers === undefined || Object.keys(servers).length === 0) return { request: prepared, cleanup: async () => {} };
    if (!agent.supportsMcp) {
      return fail(`the agent slot allows MCP servers (${Object.keys(servers).join(', ')}), but ${agent.type} does not support MCP`);
    }
    const config = { mcpServers: servers };
    let folder: string | undefined;
    const cleanup = async () => {
      if (folder) await rm(folder, { recursive: true, force: true });
    };
    try {
      // mkdtemp makes the folder 0700 and a fresh name per run, so no other user or run can read or swap the file.
      folder = await mkdtemp(join(this.options.mcpDirectory ?? tmpdir(), 'actor-mcp-'));
      const path = join(folder, 'mcp-config.json');
      await writeFile(path, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
      return { request: { ...prepared, mcpConfig: config, mcpConfigPath: path }, cleanup };
    } catch (error) {
      await cleanup();
      return fail(`could not write the MCP config file: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
  }
}

function failed(backend: string | undefined, message: string, durationMs: number): AgentResult {
  return {
    success: false,
    output: '',
    errorKind: 'unavailable',
    errorMessage: backend ? `${backend}: ${message}` : message,
    executionLog: [],
    inputTokens: 0,
    outputTokens: 0,
    durationMs,
  };
}

function unavailable(backend: string): AgentResult {
  return failed(undefined, `this execution process has no adapter for backend "${backend}"`, 0);
}
