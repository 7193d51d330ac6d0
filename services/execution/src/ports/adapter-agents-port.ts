import type { Agent, AgentEvent, AgentRequest, AgentResult, AgentsPort } from '@actor/engine';

/**
 * The engine's AI call, answered by this process's adapters. One Agent instance per adapter type,
 * kept for the life of the process, so `cancel(executionId)` reaches runs it started.
 */
export class AdapterAgentsPort implements AgentsPort {
  private readonly agents = new Map<string, Agent>();

  constructor(private readonly createAgent: (type: string) => Agent | undefined) {}

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
    return agent.execute(request, signal, onEvent);
  }

  async executeWithSchema(
    backend: string,
    request: AgentRequest,
    jsonSchema: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<AgentResult> {
    const agent = this.agentFor(backend);
    if (!agent) return unavailable(backend);
    return agent.executeWithSchema(request, jsonSchema, signal);
  }
}

function unavailable(backend: string): AgentResult {
  return {
    success: false,
    output: '',
    errorKind: 'unavailable',
    errorMessage: `this execution process has no adapter for backend "${backend}"`,
    executionLog: [],
    inputTokens: 0,
    outputTokens: 0,
    durationMs: 0,
  };
}
