/**
 * What a lease session's transport alone allows: acquire -> release cycles over one LeaseSession stream
 * (the pool's own server code and client) against a server in another process whose operations answer
 * at once, without a database. The floor under `lease-benchmark.ts`'s session rows: at 1 worker a cycle
 * cannot be faster than this, whatever the database does.
 *
 *   npx tsx bench/lease/session-transport.ts
 *   SECONDS_PER_LEVEL=3 LEVELS=1,16,64 npx tsx bench/lease/session-transport.ts
 *
 * `lease-benchmark.ts` also runs this server with a database (POOL_PLACEMENT=floor): each Acquire then
 * makes one durable write before it answers (a row inserted by a named prepared statement, committed
 * synchronously), the least a grant that must survive a database crash can cost. That row is the floor
 * of the design itself (a separate pool service over gRPC in front of Postgres), whatever the lease
 * logic does.
 *
 * With `grant` after the database (POOL_PLACEMENT=floor-grant), each Acquire instead runs the pool's own
 * grant through its repository (`PoolRepository.tryAcquireFirst`: the hand-back statement, batched as
 * the pool batches it) on the pool's schema, against an agent of its own, and answers with the lease
 * granted; nothing else of the pool runs (no request validation, queueing, or mapping of rows to the
 * answer). The pool's rows less this one are what the pool's service code costs; this row less the
 * floor is what its statement costs.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createClient, createLogger, openDatabase, startGrpcServer } from '@actor/kit';
import { PoolServiceDefinition, type Lease, type PoolServiceImplementation } from '@actor/proto/pool';
import { LeaseSessionClient } from '../../services/pool/src/client/lease-session-client.js';
import { createLeaseSession, type LeaseOperations } from '../../services/pool/src/lease-session.js';
import { PoolRepository } from '../../services/pool/src/db/pool-repository.js';
import { schema } from '../../services/pool/src/db/schema.js';
import { freePort } from '../../scripts/platform.js';

const levels = (process.env.LEVELS ?? '1,16,64').split(',').map(Number);
const secondsPerLevel = Number(process.env.SECONDS_PER_LEVEL ?? 3);

if (process.argv[2] === 'server') {
  const now = new Date();
  const lease: Lease = {
    id: 'lse_transport',
    agent: {
      id: 'agt_transport',
      name: 'transport',
      description: 'answers at once',
      agentType: 'transport',
      capabilities: ['*'],
      configurationJson: '{}',
      enabled: true,
      concurrency: 1,
      createTime: now,
      updateTime: now,
    },
    epoch: 1,
    workType: 'task',
    workId: 'tsk_transport',
    projectId: 'prj_bench',
    acquireTime: now,
    expireTime: now,
  };
  const logger = createLogger('transport', 'silent');
  const databaseUrl = process.argv[4];
  const connections = Number(process.env.PG_CONNECTIONS ?? 10);
  let acquire: LeaseOperations['acquire'] = async (request) => ({ lease, released: request.releaseFirst !== undefined });
  let release: LeaseOperations['release'] = async () => ({ released: true });
  if (databaseUrl && process.argv[5] === 'grant') {
    // The pool's database setup (migrations, generic plans for its named statements) and repository,
    // with the pool's default batching; an agent of FLOOR_AGENT_TYPE (the type the benchmark asks for) with FLOOR_SLOTS slots.
    const database = await openDatabase({
      service: 'pool',
      databaseUrl,
      dataDir: '',
      migrationsFolder: fileURLToPath(new URL('../../services/pool/migrations', import.meta.url)),
      schema,
      maxConnections: connections,
      sessionSettings: { plan_cache_mode: 'force_generic_plan' },
    });
    const repository = new PoolRepository(database.db);
    await repository.createAgent(
      {
        name: 'floor-grant',
        description: '',
        agentType: process.env.FLOOR_AGENT_TYPE ?? 'floor-grant',
        capabilities: ['*'],
        configuration: {},
        enabled: true,
        concurrency: Number(process.env.FLOOR_SLOTS ?? 64),
      },
      '',
    );
    acquire = async (request) => {
      const spec = {
        requestId: request.requestId,
        workType: request.workType,
        workId: request.workId,
        projectId: request.projectId,
        agentId: request.agentId,
        capability: request.capability,
        agentType: request.agentType,
        ttlMs: request.ttlMs,
        wait: false,
        waitTimeoutMs: 0,
        releaseFirst: request.releaseFirst ?? null,
      };
      const first = await repository.tryAcquireFirst(spec);
      if (first.released && 'problem' in first.released) throw new Error(`the lease handed back was refused: ${first.released.problem}`);
      // More callers than slots (only the benchmark's warm-up): no queue here, so try again shortly, the
      // lease handed back (if any) being released already.
      let granted = first.granted;
      while (!granted) {
        await new Promise((resolve) => setTimeout(resolve, 1));
        granted = (await repository.tryAcquireFirst({ ...spec, releaseFirst: null })).granted;
      }
      return {
        lease: { ...lease, id: granted.lease.id, epoch: granted.lease.epoch },
        released: first.released?.released ?? false,
      };
    };
    // A worker's last lease, at the end of a level, is released for real: the next level needs its slot.
    release = async (request) => {
      const outcome = await repository.releaseLease(request.leaseId, request.epoch);
      if ('problem' in outcome) throw new Error(`release refused: ${outcome.problem}`);
      return outcome;
    };
  } else if (databaseUrl) {
    // As many connections as the pool gets (PG_CONNECTIONS, as lease-benchmark.ts sets it); no batching,
    // so from 16 workers on the pool, which batches, can pass this row: it is the floor at 1 worker.
    const database = new pg.Pool({ connectionString: databaseUrl, max: connections });
    await database.query('create table if not exists floor_grants (id bigserial primary key, granted_at timestamptz not null)');
    acquire = async (request) => {
      await database.query({ name: 'floor_grant', text: 'insert into floor_grants (granted_at) values (statement_timestamp())' });
      return { lease, released: request.releaseFirst !== undefined };
    };
  }
  const unimplemented = async () => {
    throw new Error('not served by this benchmark');
  };
  await startGrpcServer({
    name: 'transport',
    address: process.argv[3]!,
    logger,
    serviceNames: [PoolServiceDefinition.fullName],
    register: (server, shutdownSignal) => {
      const methods = Object.fromEntries(Object.keys(PoolServiceDefinition.methods).map((name) => [name, unimplemented]));
      const leaseSession = createLeaseSession({
        operations: {
          acquire,
          renew: async () => ({ lease }),
          release,
        },
        logger,
        shutdownSignal,
      });
      server.add(PoolServiceDefinition, { ...methods, leaseSession } as unknown as PoolServiceImplementation);
    },
  });
  // Exits normally on SIGTERM (how lease-benchmark.ts stops it), so that a --cpu-prof profile is written.
  process.once('SIGTERM', () => process.exit(0));
  process.stdout.write('ready\n');
} else {
  const address = `127.0.0.1:${await freePort()}`;
  const server = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), 'server', address], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise((resolve) => server.stdout!.once('data', resolve));
  const client = new LeaseSessionClient(createClient(PoolServiceDefinition, address));
  console.log('| workers | cycles per second | client cpu ms/cycle |');
  console.log('| ---: | ---: | ---: |');
  for (const workers of levels) {
    const stopAt = performance.now() + secondsPerLevel * 1000;
    const startedAt = performance.now();
    const cpuBefore = process.cpuUsage();
    let cycles = 0;
    await Promise.all(
      Array.from({ length: workers }, async () => {
        while (performance.now() < stopAt) {
          const { lease } = await client.acquire({ workType: 'task', workId: 'tsk_transport', projectId: 'prj_bench' });
          await client.release({ leaseId: lease!.id, epoch: lease!.epoch });
          cycles++;
        }
      }),
    );
    const elapsedSeconds = (performance.now() - startedAt) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    console.log(`| ${workers} | ${Math.round(cycles / elapsedSeconds)} | ${((cpu.user + cpu.system) / 1000 / cycles).toFixed(3)} |`);
  }
  client.close();
  server.kill();
  process.exit(0);
}
