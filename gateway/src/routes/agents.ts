import { z } from 'zod';
import type { Agent } from '@actor/proto/pool';
import { idempotencyKey } from '../idempotency-key.js';
import { problems } from '../problem.js';
import { parseWith, readJsonBody } from '../request-body.js';
import type { Route, RouteContext } from '../router.js';
import { sendJson } from '../send-json.js';

/**
 * The body of POST /api/v1/agents and PUT /api/v1/agents/{id} (PUT replaces every field, so the same
 * defaults apply). Strict: unknown fields are a 400.
 * - `name`: unique, 1..200 characters. Required.
 * - `agent_type`: the adapter type the slot runs (`demo:alpha-mini`). Required.
 * - `description`: default "". `capabilities`: `["*"]` (default, everything) or a list.
 * - `configuration`: the adapter's configuration object, default {} (demo agents: latency_ms,
 *   failure_rate, quality). `enabled`: default true. `concurrency`: leases at once, 1..1000, default 1.
 * - `id`, `created_at`, `updated_at`: read-only and ignored, so that an agent as GET returns it can be
 *   edited and PUT back; an `id` other than the path's is a 400.
 */
export const agentBodySchema = z.strictObject({
  name: z.string().min(1).max(200),
  agent_type: z.string().min(1).max(200),
  description: z.string().max(4_000).default(''),
  capabilities: z.array(z.string().min(1).max(200)).max(100).default(['*']),
  configuration: z.record(z.string(), z.unknown()).default({}),
  enabled: z.boolean().default(true),
  concurrency: z.number().int().min(1).max(1_000).default(1),
  id: z.string().optional(),
  created_at: z.string().nullable().optional(),
  updated_at: z.string().nullable().optional(),
});

export type AgentBody = z.infer<typeof agentBodySchema>;

function agentFromBody(body: AgentBody, id = ''): Agent {
  return {
    id,
    name: body.name,
    description: body.description,
    agentType: body.agent_type,
    capabilities: body.capabilities,
    configurationJson: JSON.stringify(body.configuration),
    enabled: body.enabled,
    concurrency: body.concurrency,
    createTime: undefined,
    updateTime: undefined,
  };
}

/** An agent as the REST API shows it; `configuration` is the parsed object ({} when empty). */
export function encodeAgent(agent: Agent) {
  let configuration: unknown = {};
  try {
    if (agent.configurationJson) configuration = JSON.parse(agent.configurationJson);
  } catch {
    configuration = {};
  }
  return {
    id: agent.id,
    name: agent.name,
    description: agent.description,
    agent_type: agent.agentType,
    capabilities: agent.capabilities,
    configuration,
    enabled: agent.enabled,
    concurrency: agent.concurrency,
    created_at: agent.createTime?.toISOString() ?? null,
    updated_at: agent.updateTime?.toISOString() ?? null,
  };
}

function agentIdParam(context: RouteContext): string {
  const id = context.params.id!;
  if (!/^agt_[0-9A-HJKMNP-TV-Z]{26}$/i.test(id)) throw problems.notFound(`no agent ${id}`);
  return id;
}

export const agentRoutes: Route[] = [
  {
    method: 'GET',
    pattern: '/api/v1/agents',
    access: 'authenticated',
    async handle(context) {
      const agentType = context.url.searchParams.get('agent_type') ?? '';
      const answer = await context.clients.pool.listAgents({ agentType }, { signal: context.signal });
      sendJson(context.response, 200, { data: answer.agents.map(encodeAgent) });
    },
  },
  {
    method: 'POST',
    pattern: '/api/v1/agents',
    access: 'agents:admin',
    async handle(context) {
      const requestId = idempotencyKey(context.request.headers);
      const body = parseWith(agentBodySchema, await readJsonBody(context.request, context.config.GATEWAY_MAX_BODY_BYTES), 'agent');
      const answer = await context.clients.pool.createAgent({ agent: agentFromBody(body), requestId }, { signal: context.signal });
      const agent = encodeAgent(answer.agent!);
      sendJson(context.response, 201, agent, { Location: `/api/v1/agents/${agent.id}` });
    },
  },
  {
    method: 'GET',
    pattern: '/api/v1/agents/{id}',
    access: 'authenticated',
    async handle(context) {
      const answer = await context.clients.pool.getAgent({ id: agentIdParam(context) }, { signal: context.signal });
      sendJson(context.response, 200, encodeAgent(answer.agent!));
    },
  },
  {
    method: 'PUT',
    pattern: '/api/v1/agents/{id}',
    access: 'agents:admin',
    async handle(context) {
      const id = agentIdParam(context);
      const requestId = idempotencyKey(context.request.headers);
      const body = parseWith(agentBodySchema, await readJsonBody(context.request, context.config.GATEWAY_MAX_BODY_BYTES), 'agent');
      if (body.id !== undefined && body.id !== id) {
        throw problems.invalid('the agent id in the body differs from the one in the path', [
          { path: 'id', message: `must be ${id} or absent` },
        ]);
      }
      const answer = await context.clients.pool.updateAgent({ agent: agentFromBody(body, id), requestId }, { signal: context.signal });
      sendJson(context.response, 200, encodeAgent(answer.agent!));
    },
  },
  {
    method: 'DELETE',
    pattern: '/api/v1/agents/{id}',
    access: 'agents:admin',
    async handle(context) {
      const id = agentIdParam(context);
      context.request.resume();
      const answer = await context.clients.pool.deleteAgent({ id }, { signal: context.signal });
      if (!answer.deleted) throw problems.notFound(`no agent ${id}`);
      context.response.writeHead(204, { 'Cache-Control': 'no-store' });
      context.response.end();
    },
  },
];
