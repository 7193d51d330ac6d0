import { fail, type Logger } from '@actor/kit';
import type { Agent, Lease, PoolServiceImplementation } from '@actor/proto/pool';
import type { AgentRow, LeaseWithAgent, PoolRepository } from './db/pool-repository.js';
import { parseAgentSpec } from './domain/agent-spec.js';
import {
  leaseProblemError,
  parseAcquireRequest,
  parseReleaseRequest,
  parseRenewRequest,
  type LeaseDefaults,
} from './domain/lease-request.js';
import type { LeaseAllocator } from './lease-allocator.js';
import { createLeaseSession, type LeaseOperations } from './lease-session.js';

function encodeAgent(row: AgentRow): Agent {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    agentType: row.agentType,
    capabilities: row.capabilities,
    configurationJson: JSON.stringify(row.configuration),
    enabled: row.enabled,
    concurrency: row.concurrency,
    createTime: row.createdAt,
    updateTime: row.updatedAt,
  };
}

function encodeLease({ lease, agent }: LeaseWithAgent): Lease {
  return {
    id: lease.id,
    agent: encodeAgent(agent),
    epoch: lease.epoch,
    workType: lease.workType,
    workId: lease.workId,
    projectId: lease.projectId,
    acquireTime: lease.acquiredAt,
    expireTime: lease.expiresAt,
  };
}

function agentNotFound(id: string) {
  return fail.notFound(`no agent with id ${id || '(empty)'}`, 'actor.pool.agent_not_found');
}

function nameTaken(name: string) {
  return fail.exists(`an agent named "${name}" already exists`, 'actor.pool.agent_name_taken');
}

export interface PoolServiceDependencies {
  repository: PoolRepository;
  allocator: LeaseAllocator;
  defaults: LeaseDefaults;
  logger: Logger;
  /** Aborted when the server starts shutting down (lease sessions end). */
  shutdownSignal: AbortSignal;
}

/** The PoolService: decode, apply the pool's rules, encode. SQL lives in the repository. */
export function createPoolService({
  repository,
  allocator,
  defaults,
  logger,
  shutdownSignal,
}: PoolServiceDependencies): PoolServiceImplementation {
  // Acquire, Renew and Release, as unary methods and as operations of a lease session.
  const leases: LeaseOperations = {
    async acquire(request, signal) {
      const { lease, released } = await allocator.acquire(parseAcquireRequest(request, defaults), signal);
      return { lease: encodeLease(lease), released };
    },

    async renew(request) {
      const { leaseId, epoch, ttlMs } = parseRenewRequest(request, defaults);
      const outcome = await repository.renewLease(leaseId, epoch, ttlMs);
      if ('problem' in outcome) throw leaseProblemError(outcome.problem, leaseId, epoch);
      return { lease: encodeLease(outcome.lease) };
    },

    async release(request) {
      const { leaseId, epoch } = parseReleaseRequest(request);
      const outcome = await repository.releaseLease(leaseId, epoch);
      if ('problem' in outcome) throw leaseProblemError(outcome.problem, leaseId, epoch);
      if (outcome.released) allocator.wake();
      return { released: outcome.released };
    },
  };

  return {
    async createAgent(request) {
      const spec = parseAgentSpec(request.agent);
      const outcome = await repository.createAgent(spec, request.requestId);
      if ('nameTaken' in outcome) throw nameTaken(spec.name);
      allocator.wake();
      return { agent: encodeAgent(outcome.row) };
    },

    async getAgent(request) {
      const row = request.id ? await repository.getAgent(request.id) : undefined;
      if (!row) throw agentNotFound(request.id);
      return { agent: encodeAgent(row) };
    },

    async listAgents(request) {
      const rows = await repository.listAgents(request.agentType);
      return { agents: rows.map(encodeAgent) };
    },

    async updateAgent(request) {
      const id = request.agent?.id ?? '';
      if (!id) throw fail.invalid('agent.id is required');
      const spec = parseAgentSpec(request.agent);
      const outcome = await repository.updateAgent(id, spec);
      if (!outcome) throw agentNotFound(id);
      if ('nameTaken' in outcome) throw nameTaken(spec.name);
      allocator.wake();
      return { agent: encodeAgent(outcome.row) };
    },

    async deleteAgent(request) {
      if (!request.id) throw fail.invalid('id is required');
      const outcome = await repository.deleteAgent(request.id);
      if (outcome === 'leased') {
        throw fail.precondition(
          `agent ${request.id} holds an active lease; release it (or let it expire) before deleting`,
          'actor.pool.agent_leased',
        );
      }
      if (outcome === 'deleted') allocator.wake();
      return { deleted: outcome === 'deleted' };
    },

    acquire: (request, context) => leases.acquire(request, context.signal),
    renew: (request) => leases.renew(request),
    release: (request) => leases.release(request),
    leaseSession: createLeaseSession({ operations: leases, logger, shutdownSignal }),

    async isBusy(request) {
      if (!request.agentId) throw fail.invalid('agent_id is required');
      if (!(await repository.getAgent(request.agentId))) throw agentNotFound(request.agentId);
      const activeLeases = await repository.activeLeaseCount(request.agentId);
      return { busy: activeLeases > 0, activeLeases };
    },

    async listLeases(request) {
      const rows = await repository.listActiveLeases({ agentId: request.agentId, projectId: request.projectId });
      return { leases: rows.map(encodeLease) };
    },
  };
}
