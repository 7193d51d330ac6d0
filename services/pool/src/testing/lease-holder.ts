/**
 * A stand-in for a worker process that holds leases: acquires one lease per agent id in
 * `LEASE_HOLDER_AGENT_IDS` (comma-separated; repeat an id for several slots of one agent) from the pool
 * at `POOL_ADDR` with TTL `LEASE_HOLDER_TTL_MS`, renews them at a third of the TTL, prints
 * `{"held":[{"id","epoch"}...]}` on one stdout line, then runs until it is killed. The crash test
 * kills it with SIGKILL, so nothing is ever released.
 */
import { createClient } from '@actor/kit';
import { PoolServiceDefinition } from '@actor/proto/pool';

const address = process.env.POOL_ADDR ?? '';
const agentIds = (process.env.LEASE_HOLDER_AGENT_IDS ?? '').split(',').filter(Boolean);
const ttlMs = Number(process.env.LEASE_HOLDER_TTL_MS ?? '2000');

const client = createClient(PoolServiceDefinition, address, { deadlineMs: 30_000 });
const held: Array<{ id: string; epoch: number }> = [];
for (const [index, agentId] of agentIds.entries()) {
  const { lease } = await client.acquire({
    agentId,
    workType: 'task',
    workId: `tsk_holder_${process.pid}_${index}`,
    projectId: 'prj_default',
    ttlMs,
  });
  held.push({ id: lease!.id, epoch: lease!.epoch });
}
setInterval(() => {
  for (const lease of held) {
    client.renew({ leaseId: lease.id, epoch: lease.epoch, ttlMs }).catch((error: unknown) => {
      process.stderr.write(`renew failed: ${String(error)}\n`);
    });
  }
}, ttlMs / 3);
process.stdout.write(`${JSON.stringify({ held })}\n`);
