import { and, asc, eq, fillPlaceholders, inArray, sql, type Placeholder, type SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import { newId, type Database } from '@actor/kit';
import type { AgentSpec } from '../domain/agent-spec.js';
import type { AcquireSpec, LeaseIdentity, LeaseProblem, LeaseWant } from '../domain/lease-request.js';
import { StatementBatcher } from './statement-batcher.js';
import { agentLeases, agentSlots, agents, leaseWaiters, poolInstances, type schema } from './schema.js';

export type AgentRow = typeof agents.$inferSelect;
export type LeaseRow = typeof agentLeases.$inferSelect;
export interface LeaseWithAgent {
  lease: LeaseRow;
  agent: AgentRow;
}

type Transaction = Parameters<Parameters<Database<typeof schema>['transaction']>[0]>[0];

/** Rows of a raw statement; both drivers answer with `{ rows }`. */
function rowsOf<Row>(result: unknown): Row[] {
  return (result as { rows: Row[] }).rows;
}

/** The part of a node-postgres pool used to run named prepared statements. */
interface NamedStatementClient {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>;
}

/** The part of a PGlite instance used to run a statement given as text and values. */
interface TextStatementClient {
  query(text: string, values: unknown[]): Promise<{ rows: unknown[] }>;
}

/** The node-postgres pool under a drizzle database, or undefined for PGlite. */
function namedStatementClient(db: Database<typeof schema>): NamedStatementClient | undefined {
  const client = (db as unknown as { $client?: unknown }).$client;
  // pg.Pool counts its connections; PGlite has no such thing (and no named statements to reuse).
  return client instanceof Object && 'totalCount' in client && 'idleCount' in client
    ? (client as unknown as NamedStatementClient)
    : undefined;
}

const dialect = new PgDialect();

/**
 * The most releases, or first grants of one want, that go out in one statement: a bound on the array
 * parameters and on how long one statement holds its row locks; more wait for the next batch.
 */
const MAX_STATEMENT_BATCH = 256;

/** The unique constraint a failed statement violated, looking through drizzle's error wrapper. */
function violatedConstraint(error: unknown): string | undefined {
  for (let current = error; current instanceof Object; current = (current as { cause?: unknown }).cause) {
    const candidate = current as { code?: unknown; constraint?: unknown };
    if (candidate.code === '23505') return typeof candidate.constraint === 'string' ? candidate.constraint : '';
  }
  return undefined;
}

/** Whether a failed statement violated a foreign key (code 23503), looking through drizzle's error wrapper. */
function violatedForeignKey(error: unknown): boolean {
  for (let current = error; current instanceof Object; current = (current as { cause?: unknown }).cause) {
    if ((current as { code?: unknown }).code === '23503') return true;
  }
  return false;
}

/** Milliseconds after the statement's database clock, as a timestamptz expression. */
function fromNow(milliseconds: number | Placeholder | SQL): SQL {
  return sql`statement_timestamp() + (${milliseconds}::double precision * interval '1 millisecond')`;
}

/**
 * How well agent `a` fits a request: 1 explicitly assigned, 2 serves the capability (and the type
 * when one is wanted), 3 of the wanted type; null when it does not fit. Used both to pick a slot and
 * to decide whether an older waiter has a claim on it, so the two can never disagree.
 */
export function fitOf(want: { agentId: SQL; capability: SQL; agentType: SQL }): SQL {
  return sql`(case
    when ${want.agentId} <> '' then (case when a.id = ${want.agentId} then 1 end)
    when (${want.capability} = ''
          or a.capabilities @> jsonb_build_array(${want.capability})
          or a.capabilities @> '["*"]'::jsonb)
         and (${want.agentType} = '' or a.agent_type = ${want.agentType}) then 2
    when ${want.agentType} <> '' and a.agent_type = ${want.agentType} then 3
  end)`;
}

function fitOfRequest(want: LeaseWant): SQL {
  return fitOf({
    agentId: sql`${want.agentId}::text`,
    capability: sql`${want.capability}::text`,
    agentType: sql`${want.agentType}::text`,
  });
}

const fitOfWaiter = fitOf({ agentId: sql`w.agent_id`, capability: sql`w.capability`, agentType: sql`w.agent_type` });

/** Active: not ended and the deadline (database clock) not passed. */
const leaseIsActive = sql`${agentLeases.endedAt} is null and ${agentLeases.expiresAt} > statement_timestamp()`;

/**
 * A statement of the hot path (Acquire, Release), turned into SQL text once at load: per call only
 * its values are filled in, so a grant builds no query and, on Postgres, runs as a named prepared
 * statement (each connection parses it once and, after a few runs, reuses one generic plan; planning
 * was more than half of a grant's database time).
 */
interface HotStatement {
  name: string;
  text: string;
  /** The statement's parameters in order; placeholders are filled per call. */
  params: unknown[];
}

function hotStatement(name: string, query: SQL): HotStatement {
  const { sql: text, params } = dialect.sqlToQuery(query);
  return { name, text, params };
}

const placeholder = (name: string) => sql.placeholder(name);

/** The want of a grant statement, as placeholders. */
const wantedFit = fitOf({
  agentId: sql`${placeholder('agentId')}::text`,
  capability: sql`${placeholder('capability')}::text`,
  agentType: sql`${placeholder('agentType')}::text`,
});

/**
 * Whether slot `s` holds no active lease. `endedHere` names leases the same statement ends before it
 * grants: its snapshot still shows them active, so they are counted gone by id. The `offset 0` keeps
 * this a lookup per slot on the unique index of active leases (agent, slot): as an anti-join, a
 * generic plan may scan all of an agent's active leases for every slot it looks at.
 */
const slotIsFree = (endedHere: SQL) => sql`not exists (
        select 1 from pool.agent_leases l
        where l.agent_id = s.agent_id and l.slot_no = s.slot_no
          and l.ended_at is null and l.expires_at > statement_timestamp()
          and l.id <> all (array(${endedHere}))
        offset 0)`;

/**
 * Whether agent `a` may serve the request: enabled, fitting it, and not wanted by an older live waiter
 * (`waiterSeq` is the request's place in the queue; null for a request that has not queued, which
 * yields to every live waiter).
 */
const agentIsOpenTo = (waiterSeq: SQL) => sql`a.enabled
      and ${wantedFit} is not null
      and not exists (
        select 1 from pool.lease_waiters w
        where w.alive_until > statement_timestamp()
          and (${waiterSeq} is null or w.seq < ${waiterSeq})
          and ${fitOfWaiter} is not null)`;

const noLeaseEndsHere = sql`select null::text where false`;

/**
 * The best `limit` slots free to a request (see grantLease), locked: the batch form, which looks at
 * every slot of every fitting agent. Slots of one agent are interchangeable: random ones, so that
 * concurrent grants do not all race for the lowest free slot.
 */
function freeSlots(waiterSeq: SQL, limit: SQL, endedHere: SQL = noLeaseEndsHere): SQL {
  return sql`
    select s.agent_id, s.slot_no
    from pool.agent_slots s
    join pool.agents a on a.id = s.agent_id
    where s.slot_no < a.concurrency
      and ${agentIsOpenTo(waiterSeq)}
      and ${slotIsFree(endedHere)}
    order by ${wantedFit}, a.name, random()
    limit ${limit}
    for update of s skip locked`;
}

/**
 * The best slot free to one request, locked, looking no further than it must: agents in order of fit
 * (then name), and in each the first free slot at or after a random one, wrapping around, each of
 * those an index range scan that stops at the first free slot. Looking at every slot (freeSlots)
 * made a grant's cost grow with an agent's concurrency (~100 µs more Postgres CPU per grant with 64
 * slots than with one; see the pool README). Each agent is looked into only when the ones before it
 * had no free slot, so only the slot returned is locked. Nothing when `grantable` is false.
 */
function freeSlot(waiterSeq: SQL, grantable: SQL, endedHere: SQL): SQL {
  const firstFree = (range: SQL) => sql`(
        select s.slot_no from pool.agent_slots s
        where s.agent_id = ranked.id and ${range} and ${slotIsFree(endedHere)}
        order by s.slot_no
        limit 1
        for update of s skip locked)`;
  // The offsets fence each level: rows are ranked before any slot is looked for, and each ranked
  // agent's slot is looked for once, only when the row is pulled.
  return sql`
    select agent_id, slot_no from (
      select ranked.id as agent_id, coalesce(
        ${firstFree(sql`s.slot_no >= ranked.start and s.slot_no < ranked.concurrency`)},
        ${firstFree(sql`s.slot_no < least(ranked.start, ranked.concurrency)`)}) as slot_no
      from (
        select a.id, a.concurrency, floor(random() * a.concurrency)::int as start
        from pool.agents a
        where ${grantable} and ${agentIsOpenTo(waiterSeq)}
        order by ${wantedFit}, a.name
        offset 0) as ranked
      offset 0) as candidate
    where slot_no is not null
    limit 1`;
}

/**
 * Ends a lease its holder (id and epoch) still has open, as Release does: a lease past its deadline is
 * recorded as expired at that deadline. Shared by the release statement and by grants that end a
 * lease first. `ending` selects (id, epoch) pairs; `released` ends up holding each ended lease's id and
 * end reason. The leases are locked in id order, so two statements sharing a lease (a retried
 * release) cannot deadlock.
 */
const endLeases = (ending: SQL) => sql`
    releasing as (
      select l.id
      from pool.agent_leases l
      join (${ending}) as ending(id, epoch) on l.id = ending.id and l.epoch = ending.epoch
      where l.ended_at is null
      order by l.id
      for update of l),
    released as (
      update pool.agent_leases l
      set ended_at = least(statement_timestamp(), l.expires_at),
          end_reason = case when l.expires_at > statement_timestamp() then 'released' else 'expired' end
      from releasing
      where l.id = releasing.id
      returning l.id, l.end_reason)`;

/**
 * The grant: end the lease the request hands back (release_first), lock the best free slot, insert
 * the lease, and (for a queued request) leave the queue, in one statement, so a grant costs one round
 * trip. A slot is free when no active lease holds it (the lease handed back counts as gone: the
 * statement's snapshot still shows it active); it is free *to this request* only when no older live
 * waiter could use it (`waiterSeq` is this request's place in the queue; null for a request that has
 * not queued, which yields to every live waiter). The slot row lock (SKIP LOCKED) keeps concurrent
 * Acquires from choosing the same slot while both run; one that started before another's grant
 * committed can still pick that slot once its lock is gone (its snapshot does not show the new
 * lease), and the unique index on active leases per slot is what makes that double grant
 * impossible: the insert does nothing, and the statement says a slot was picked without a lease, so
 * the caller looks again. Nothing is granted when a lease to hand back was not released here (see
 * grantBatch for why that is looked into afterwards). One row: the lease and agent granted (or
 * null), how many slots were picked (0: none free), and the end reason of the lease handed back.
 * Its parameters are scalars, so Postgres soon settles on one generic plan for it (an array's
 * unknown length keeps it planning anew each time). It commits synchronously (the session's
 * setting): a granted lease and its epoch must survive a database crash, or a slot and an epoch
 * could be handed out twice.
 */
const grantLease = (() => {
  const waiterSeq = sql`${placeholder('waiterSeq')}::bigint`;
  const releaseId = sql`${placeholder('releaseId')}::text`;
  return hotStatement(
    'pool_grant_lease',
    sql`
      with ${endLeases(sql`select ${releaseId}, ${placeholder('releaseEpoch')}::bigint where ${releaseId} is not null`)},
      slot as (${freeSlot(
        waiterSeq,
        sql`(${releaseId} is null or exists (select 1 from released where end_reason = 'released'))`,
        sql`select id from released`,
      )}),
      granted as (
        insert into pool.agent_leases
          (id, agent_id, slot_no, work_type, work_id, project_id, request_id, acquired_at, expires_at)
        select ${placeholder('leaseId')}::text, slot.agent_id, slot.slot_no, ${placeholder('workType')}::text,
               ${placeholder('workId')}::text, ${placeholder('projectId')}::text, ${placeholder('requestId')}::text,
               statement_timestamp(), ${fromNow(placeholder('ttlMs'))}
        from slot
        -- Lost a race (see above) or met this request id's earlier lease: no error (an error would
        -- cost the connection, which node-postgres's pool discards after one), just no row.
        on conflict do nothing
        returning *),
      dequeued as (
        delete from pool.lease_waiters
        where seq = ${waiterSeq} and exists (select 1 from granted))
      select row_to_json(granted) as lease, row_to_json(a) as agent,
             (select count(*) from slot) as picked, (select end_reason from released) as ended
      from (select) as answer
      left join granted on true
      left join pool.agents a on a.id = granted.agent_id`,
  );
})();

/**
 * First tries of Acquire with the same want (agent, capability, type) in one statement: up to one
 * free slot each, handed out in request order, one commit for all (see StatementBatcher). A request
 * may name a lease of its holder's to end first (release_first): those are ended as the release
 * statement ends them, and their slots count as free to this grant. A request whose lease to end
 * was not released here gets no slot (see settleFirstGrant). Answers with a row per request, in
 * order: its lease and agent when granted, its rank among the requests that could be granted (null
 * for one that could not), the end reason of the lease it ended here, and how many slots were
 * picked: a ranked request past that number found none free (no second look), one within it lost a
 * race or met its request id's earlier lease and is tried again alone, with grantLease's handling.
 * Only requests that have not queued are batched: each of them yields to every live waiter, so their
 * order among themselves is all that is left to choose, and arrival order it is.
 */
const grantLeases = hotStatement(
  'pool_grant_leases',
  sql`
    with wanted as (
      select * from unnest(${placeholder('leaseIds')}::text[], ${placeholder('workTypes')}::text[],
                           ${placeholder('workIds')}::text[], ${placeholder('projectIds')}::text[],
                           ${placeholder('requestIds')}::text[], ${placeholder('ttlMs')}::double precision[],
                           ${placeholder('releaseIds')}::text[], ${placeholder('releaseEpochs')}::bigint[])
        with ordinality as w(lease_id, work_type, work_id, project_id, request_id, ttl_ms, release_id, release_epoch, n)),
    ${endLeases(sql`select release_id, release_epoch from wanted where release_id is not null`)},
    grantable as (
      select wanted.*, row_number() over (order by wanted.n) as rank
      from wanted
      where wanted.release_id is null
         or exists (select 1 from released where released.id = wanted.release_id and released.end_reason = 'released')),
    picked as (${freeSlots(sql`null::bigint`, sql`(select count(*) from grantable)`, sql`select id from released`)}),
    slot as (select agent_id, slot_no, row_number() over () as rank from picked),
    granted as (
      insert into pool.agent_leases
        (id, agent_id, slot_no, work_type, work_id, project_id, request_id, acquired_at, expires_at)
      select grantable.lease_id, slot.agent_id, slot.slot_no, grantable.work_type, grantable.work_id,
             grantable.project_id, grantable.request_id, statement_timestamp(), ${fromNow(sql`grantable.ttl_ms`)}
      from grantable join slot on slot.rank = grantable.rank
      on conflict do nothing
      returning *)
    select row_to_json(granted) as lease, row_to_json(a) as agent, grantable.rank,
           (select end_reason from released where released.id = wanted.release_id limit 1) as ended,
           (select count(*) from slot) as picked
    from wanted
    left join grantable on grantable.n = wanted.n
    left join granted on granted.id = wanted.lease_id
    left join pool.agents a on a.id = granted.agent_id
    order by wanted.n`,
);

/**
 * The release, of one lease or of many at once (see `StatementBatcher`): ends each lease whose holder
 * (id and epoch) still has it open; a lease past its deadline is recorded as expired at that deadline.
 * `commitMode` is the transaction's synchronous_commit: 'off' commits without waiting for the WAL
 * flush, null keeps the session's setting. Set with `set_config(..., true)`, it lasts for this
 * statement's transaction only, so the grants that follow on the same connection still commit
 * synchronously.
 */
const releaseLeases = hotStatement(
  'pool_release_leases',
  sql`
    with durability as (
      select set_config('synchronous_commit', coalesce(${placeholder('commitMode')}::text, current_setting('synchronous_commit')), true)),
    ${endLeases(sql`select * from unnest(${placeholder('leaseIds')}::text[], ${placeholder('epochs')}::bigint[])`)}
    select released.id, released.end_reason from released, durability`,
);

/**
 * The renewal: moves the deadline of a lease this holder (id and epoch) still has open, and answers
 * with the lease and its agent in the same statement (the agent cannot go while the lease is active:
 * deleting an agent with an active lease is refused, and the foreign key holds it).
 */
const renewLease = hotStatement(
  'pool_renew_lease',
  sql`
    with renewed as (
      update pool.agent_leases
      set expires_at = ${fromNow(placeholder('ttlMs'))}
      where id = ${placeholder('leaseId')}::text and epoch = ${placeholder('epoch')}::bigint
        and ended_at is null and expires_at > statement_timestamp()
      returning *)
    select row_to_json(renewed) as lease, row_to_json(a) as agent
    from renewed join pool.agents a on a.id = renewed.agent_id`,
);

/** A timestamp as `row_to_json` spells it, or null. */
function dateOrNull(value: unknown): Date | null {
  return value === null || value === undefined ? null : new Date(String(value));
}

// The grant returns its rows as JSON (one round trip, whatever the driver); these read them back into
// the shapes drizzle gives everywhere else.
function leaseFromJson(json: Record<string, unknown>): LeaseRow {
  return {
    id: String(json.id),
    agentId: String(json.agent_id),
    slotNo: Number(json.slot_no),
    epoch: Number(json.epoch),
    workType: String(json.work_type),
    workId: String(json.work_id),
    projectId: String(json.project_id),
    requestId: json.request_id === null ? null : String(json.request_id),
    acquiredAt: dateOrNull(json.acquired_at)!,
    expiresAt: dateOrNull(json.expires_at)!,
    endedAt: dateOrNull(json.ended_at),
    endReason: json.end_reason === null ? null : String(json.end_reason),
  };
}

function agentFromJson(json: Record<string, unknown>): AgentRow {
  return {
    id: String(json.id),
    name: String(json.name),
    description: String(json.description),
    agentType: String(json.agent_type),
    capabilities: json.capabilities as string[],
    configuration: json.configuration as Record<string, unknown>,
    enabled: Boolean(json.enabled),
    concurrency: Number(json.concurrency),
    createRequestId: json.create_request_id === null ? null : String(json.create_request_id),
    createdAt: dateOrNull(json.created_at)!,
    updatedAt: dateOrNull(json.updated_at)!,
  };
}

export type CreateAgentOutcome = { row: AgentRow } | { nameTaken: true };
export type ReleaseOutcome = { released: boolean } | { problem: LeaseProblem };
export type DeleteAgentOutcome = 'deleted' | 'missing' | 'leased';

/** An Acquire's first try. */
export interface FirstGrant {
  /** The lease taken; undefined when no slot was free to the request (or its release was refused). */
  granted: LeaseWithAgent | undefined;
  /** What became of the request's `releaseFirst` lease; undefined when it named none. A problem means nothing was granted. */
  released?: ReleaseOutcome;
}

class AgentHoldsLeases extends Error {}

export interface PoolRepositoryOptions {
  /**
   * Whether a Release waits for its commit to reach disk (Postgres `synchronous_commit`). False (the
   * pool's default, `POOL_RELEASE_SYNCHRONOUS_COMMIT`) lets it return before the WAL flush: a release
   * lost in a database crash leaves its lease open until its deadline, as if its holder had died,
   * and no grant of the slot it freed can outlive it, since every grant commits synchronously and
   * the WAL is flushed in order. Grants, renewals and everything else always commit synchronously.
   */
  releaseSynchronousCommit?: boolean;
  /**
   * Statements of one kind (grants of one want, releases) run at once before further requests wait to
   * go out together in one statement (see StatementBatcher); default 1.
   */
  batchAfterInFlight?: number;
}

/** Every SQL statement of the pool. */
export class PoolRepository {
  private readonly namedStatements: NamedStatementClient | undefined;
  private readonly textStatements: TextStatementClient;
  private readonly releaseCommitMode: string | null;
  private readonly releases: StatementBatcher<{ leaseId: string; epoch: number }, ReleaseOutcome>;
  /** First tries of Acquire in flight, batched per want; a want's batcher goes when it is idle. */
  private readonly firstGrants = new Map<string, StatementBatcher<AcquireSpec, FirstGrant>>();
  private readonly statementsInFlight: number;

  constructor(
    private readonly db: Database<typeof schema>,
    options: PoolRepositoryOptions = {},
  ) {
    this.namedStatements = namedStatementClient(db);
    this.textStatements = (db as unknown as { $client: TextStatementClient }).$client;
    this.releaseCommitMode = options.releaseSynchronousCommit === false ? 'off' : null;
    this.statementsInFlight = options.batchAfterInFlight ?? 1;
    this.releases = new StatementBatcher((requests) => this.releaseBatch(requests), this.statementsInFlight, MAX_STATEMENT_BATCH);
  }

  /**
   * Runs a statement of the hot path with its values: on Postgres as a named prepared statement, on
   * PGlite (one connection, nothing to prepare per connection) as text and values.
   */
  private async runHot<Row>(statement: HotStatement, values: Record<string, unknown>): Promise<Row[]> {
    const filled = fillPlaceholders(statement.params, values);
    const result = this.namedStatements
      ? await this.namedStatements.query({ name: statement.name, text: statement.text, values: filled })
      : await this.textStatements.query(statement.text, filled);
    return result.rows as Row[];
  }

  // ---- agents

  /**
   * Inserts an agent and its slots. A name already taken by an agent created with the same request id
   * returns that agent (a retried create); otherwise `nameTaken`.
   */
  async createAgent(spec: AgentSpec, requestId: string): Promise<CreateAgentOutcome> {
    try {
      const row = await this.db.transaction(async (tx) => {
        const [inserted] = await tx
          .insert(agents)
          .values({ id: newId('agt'), ...spec, createRequestId: requestId || null })
          .returning();
        await this.ensureSlots(tx, inserted!.id, inserted!.concurrency);
        return inserted!;
      });
      return { row };
    } catch (error) {
      if (violatedConstraint(error) !== 'agents_name_unique') throw error;
      const [existing] = await this.db.select().from(agents).where(eq(agents.name, spec.name));
      if (existing && requestId && existing.createRequestId === requestId) return { row: existing };
      return { nameTaken: true };
    }
  }

  async getAgent(id: string): Promise<AgentRow | undefined> {
    const [row] = await this.db.select().from(agents).where(eq(agents.id, id));
    return row;
  }

  async listAgents(agentType: string): Promise<AgentRow[]> {
    return this.db
      .select()
      .from(agents)
      .where(agentType ? eq(agents.agentType, agentType) : undefined)
      .orderBy(asc(agents.name));
  }

  /** Replaces the mutable fields; undefined when the agent does not exist. */
  async updateAgent(id: string, spec: AgentSpec): Promise<CreateAgentOutcome | undefined> {
    try {
      return await this.db.transaction(async (tx) => {
        const [row] = await tx
          .update(agents)
          .set({ ...spec, updatedAt: sql`statement_timestamp()` })
          .where(eq(agents.id, id))
          .returning();
        if (!row) return undefined;
        await this.ensureSlots(tx, row.id, row.concurrency);
        return { row };
      });
    } catch (error) {
      if (violatedConstraint(error) === 'agents_name_unique') return { nameTaken: true };
      throw error;
    }
  }

  /**
   * Deletes an agent unless it holds an active lease. Deleting the slot rows first waits for any
   * Acquire that has locked one of them, so a lease being granted right now is seen and refuses the
   * delete, and no Acquire can take a slot of an agent being deleted.
   */
  async deleteAgent(id: string): Promise<DeleteAgentOutcome> {
    try {
      return await this.db.transaction(async (tx) => {
        await tx.delete(agentSlots).where(eq(agentSlots.agentId, id));
        const [active] = await tx
          .select({ count: sql<number>`count(*)::int` })
          .from(agentLeases)
          .where(and(eq(agentLeases.agentId, id), leaseIsActive));
        if ((active?.count ?? 0) > 0) throw new AgentHoldsLeases();
        const deleted = await tx.delete(agents).where(eq(agents.id, id)).returning({ id: agents.id });
        return deleted.length > 0 ? 'deleted' : 'missing';
      });
    } catch (error) {
      if (error instanceof AgentHoldsLeases) return 'leased';
      throw error;
    }
  }

  private async ensureSlots(tx: Transaction, agentId: string, concurrency: number): Promise<void> {
    await tx.execute(sql`
      insert into pool.agent_slots (agent_id, slot_no)
      select ${agentId}::text, generate_series(0, ${concurrency}::int - 1)
      on conflict do nothing`);
  }

  /** How many enabled agents could ever serve the request (busy or not). */
  async countFittingAgents(want: LeaseWant): Promise<number> {
    const result = await this.db.execute(sql`
      select count(*)::int as count from pool.agents a
      where a.enabled and ${fitOfRequest(want)} is not null`);
    return rowsOf<{ count: number }>(result)[0]?.count ?? 0;
  }

  // ---- leases

  async findLeaseByRequestId(requestId: string): Promise<LeaseWithAgent | undefined> {
    const [row] = await this.db
      .select({ lease: agentLeases, agent: agents })
      .from(agentLeases)
      .innerJoin(agents, eq(agents.id, agentLeases.agentId))
      .where(eq(agentLeases.requestId, requestId));
    return row;
  }

  /**
   * A request's first try, before it queues: its `releaseFirst` lease ended and the best free slot
   * taken, with others of the same want that arrive while such statements are in flight in one
   * statement (grantLeases); alone otherwise (grantLease).
   */
  async tryAcquireFirst(spec: AcquireSpec): Promise<FirstGrant> {
    const want = `${spec.agentId}\u0000${spec.capability}\u0000${spec.agentType}`;
    let batcher = this.firstGrants.get(want);
    if (!batcher) {
      batcher = new StatementBatcher(
        (specs) => this.grantBatch(specs),
        this.statementsInFlight,
        MAX_STATEMENT_BATCH,
        () => this.firstGrants.delete(want),
      );
      this.firstGrants.set(want, batcher);
    }
    return batcher.submit(spec);
  }

  private async grantBatch(specs: AcquireSpec[]): Promise<FirstGrant[]> {
    if (specs.length === 1) return [await this.grantFirst(specs[0]!)];
    const leaseIds = specs.map(() => newId('lse'));
    const [first] = specs;
    const rows = await this.runHot<{
      lease: Record<string, unknown> | null;
      agent: Record<string, unknown> | null;
      rank: string | number | null;
      ended: string | null;
      picked: string | number;
    }>(grantLeases, {
      agentId: first!.agentId,
      capability: first!.capability,
      agentType: first!.agentType,
      leaseIds,
      workTypes: specs.map((spec) => spec.workType),
      workIds: specs.map((spec) => spec.workId),
      projectIds: specs.map((spec) => spec.projectId),
      requestIds: specs.map((spec) => spec.requestId || null),
      ttlMs: specs.map((spec) => spec.ttlMs),
      releaseIds: specs.map((spec) => spec.releaseFirst?.leaseId ?? null),
      releaseEpochs: specs.map((spec) => spec.releaseFirst?.epoch ?? null),
    });
    // A lease named by two requests of one batch was ended once: by the first.
    const endedOnce = new Set<string>();
    return Promise.all(
      specs.map((spec, index) => {
        const row = rows[index]!;
        let ended = row.ended;
        if (ended !== null && spec.releaseFirst) {
          if (endedOnce.has(spec.releaseFirst.leaseId)) ended = null;
          endedOnce.add(spec.releaseFirst.leaseId);
        }
        return this.settleFirstGrant(spec, row, ended, row.rank !== null && Number(row.rank) > Number(row.picked));
      }),
    );
  }

  /** A first try alone: a plain grant, or one that hands a lease back in the same statement. */
  private async grantFirst(spec: AcquireSpec): Promise<FirstGrant> {
    if (!spec.releaseFirst) return { granted: await this.tryAcquire(spec, null) };
    const row = await this.runGrant(spec, null, spec.releaseFirst);
    return this.settleFirstGrant(spec, row, row.ended, Number(row.picked) === 0);
  }

  /**
   * What a first try's answer means for its request. `ended` is the end reason of the lease it
   * handed back, when the statement ended it; `noneFree` says the statement found no slot free to it.
   */
  private async settleFirstGrant(
    spec: AcquireSpec,
    row: { lease: Record<string, unknown> | null; agent: Record<string, unknown> | null },
    ended: string | null,
    noneFree: boolean,
  ): Promise<FirstGrant> {
    let released: ReleaseOutcome | undefined;
    if (spec.releaseFirst) {
      const { leaseId, epoch } = spec.releaseFirst;
      if (ended === null) released = await this.releaseOutcomeOfEnded(leaseId, epoch);
      else released = ended === 'released' ? { released: true } : { problem: 'expired' };
      // Refused: nothing was granted (a grant needs its lease released by the same statement).
      if ('problem' in released) return { granted: undefined, released };
    }
    if (row.lease && row.agent) return { granted: { lease: leaseFromJson(row.lease), agent: agentFromJson(row.agent) }, released };
    // Its holder had released it already (a retried call, or the same lease named twice in a batch):
    // the statement may have granted it nothing; look now.
    if (released && 'released' in released && !released.released) return { granted: await this.tryAcquire(spec, null), released };
    // Picked a slot but got no lease (a lost race, a request id seen before): look again alone.
    return { granted: noneFree ? undefined : await this.tryAcquire(spec, null), released };
  }

  /** One run of the grant statement (see grantLease). */
  private async runGrant(spec: AcquireSpec, waiterSeq: number | null, releaseFirst: LeaseIdentity | null) {
    const [row] = await this.runHot<{
      lease: Record<string, unknown> | null;
      agent: Record<string, unknown> | null;
      picked: string | number;
      ended: string | null;
    }>(grantLease, {
      agentId: spec.agentId,
      capability: spec.capability,
      agentType: spec.agentType,
      waiterSeq,
      releaseId: releaseFirst?.leaseId ?? null,
      releaseEpoch: releaseFirst?.epoch ?? null,
      leaseId: newId('lse'),
      workType: spec.workType,
      workId: spec.workId,
      projectId: spec.projectId,
      requestId: spec.requestId || null,
      ttlMs: spec.ttlMs,
    });
    return row!;
  }

  /**
   * Takes the best free slot for the request, or returns undefined when none is free to it (see
   * `grantLease` for what free means and why two Acquires can never both take one slot).
   */
  async tryAcquire(spec: AcquireSpec, waiterSeq: number | null): Promise<LeaseWithAgent | undefined> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const granted = await this.runGrant(spec, waiterSeq, null);
      if (granted.lease && granted.agent) return { lease: leaseFromJson(granted.lease), agent: agentFromJson(granted.agent) };
      if (Number(granted.picked) === 0) return undefined; // no slot free to this request
      // The insert met a unique index. This request id's lease already exists (a retry): that is the answer.
      if (spec.requestId) {
        const earlier = await this.findLeaseByRequestId(spec.requestId);
        if (earlier) return earlier;
      }
      // Another grant took the slot first (look again: the next statement sees it), or the slot still
      // carries a lease that expired without anyone ending it: end those before the last look.
      if (attempt === 1) await this.endExpiredLeases();
    }
    return undefined;
  }

  /** Records every lease past its deadline as ended at that deadline; returns how many. */
  async endExpiredLeases(): Promise<number> {
    const ended = rowsOf<{ id: string }>(
      await this.db.execute(sql`
        update pool.agent_leases set ended_at = expires_at, end_reason = 'expired'
        where id in (
          select id from pool.agent_leases
          where ended_at is null and expires_at <= statement_timestamp()
          for update skip locked)
        returning id`),
    );
    return ended.length;
  }

  async renewLease(
    leaseId: string,
    epoch: number,
    ttlMs: number,
  ): Promise<{ lease: LeaseWithAgent } | { problem: LeaseProblem }> {
    const [renewed] = await this.runHot<{ lease: Record<string, unknown>; agent: Record<string, unknown> }>(renewLease, {
      ttlMs,
      leaseId,
      epoch,
    });
    if (renewed) return { lease: { lease: leaseFromJson(renewed.lease), agent: agentFromJson(renewed.agent) } };
    return { problem: await this.diagnose(leaseId, epoch) };
  }

  /**
   * Ends a lease. `released` is true when this call ended an active lease and false when its holder
   * had already released it (a retried release). A lease that expired (swept or not) is recorded as
   * expired at its deadline and refused as `expired`: its holder lost it.
   */
  async releaseLease(leaseId: string, epoch: number): Promise<ReleaseOutcome> {
    return this.releases.submit({ leaseId, epoch });
  }

  /** Releases a batch in one statement; each lease the statement did not end is diagnosed alone. */
  private async releaseBatch(requests: Array<{ leaseId: string; epoch: number }>): Promise<ReleaseOutcome[]> {
    const ended = new Map(
      (
        await this.runHot<{ id: string; end_reason: string }>(releaseLeases, {
          commitMode: this.releaseCommitMode,
          leaseIds: requests.map((request) => request.leaseId),
          epochs: requests.map((request) => request.epoch),
        })
      ).map((row) => [row.id, row.end_reason]),
    );
    return Promise.all(
      requests.map(async ({ leaseId, epoch }): Promise<ReleaseOutcome> => {
        const endReason = ended.get(leaseId);
        if (endReason !== undefined) {
          // The same lease twice in one batch (a retried release): the first ended it, the rest had it ended.
          ended.delete(leaseId);
          return endReason === 'released' ? { released: true } : { problem: 'expired' };
        }
        return this.releaseOutcomeOfEnded(leaseId, epoch);
      }),
    );
  }

  /** The outcome of releasing a lease a release statement did not end. */
  private async releaseOutcomeOfEnded(leaseId: string, epoch: number): Promise<ReleaseOutcome> {
    const problem = await this.diagnose(leaseId, epoch);
    // Only a lease its holder released is "already released"; one that ran out was lost, and its
    // holder must learn that its work under it does not count.
    return problem === 'released' ? { released: false } : { problem };
  }

  private async diagnose(leaseId: string, epoch: number): Promise<LeaseProblem> {
    const [row] = await this.db
      .select({
        epoch: agentLeases.epoch,
        endReason: agentLeases.endReason,
        expired: sql<boolean>`${agentLeases.expiresAt} <= statement_timestamp()`,
      })
      .from(agentLeases)
      .where(eq(agentLeases.id, leaseId));
    if (!row) return 'unknown';
    if (row.epoch !== epoch) return 'stale';
    if (row.endReason === 'released') return 'released';
    return 'expired';
  }

  async activeLeaseCount(agentId: string): Promise<number> {
    const [row] = await this.db
      .select({ count: sql<number>`count(*)::int` })
      .from(agentLeases)
      .where(and(eq(agentLeases.agentId, agentId), leaseIsActive));
    return row?.count ?? 0;
  }

  async listActiveLeases(filter: { agentId: string; projectId: string }): Promise<LeaseWithAgent[]> {
    return this.db
      .select({ lease: agentLeases, agent: agents })
      .from(agentLeases)
      .innerJoin(agents, eq(agents.id, agentLeases.agentId))
      .where(
        and(
          leaseIsActive,
          filter.agentId ? eq(agentLeases.agentId, filter.agentId) : undefined,
          filter.projectId ? eq(agentLeases.projectId, filter.projectId) : undefined,
        ),
      )
      .orderBy(asc(agentLeases.acquiredAt), asc(agentLeases.epoch));
  }

  // ---- the wait queue

  /** Puts a request in the queue; returns its place (grows with arrival order across replicas). */
  async enqueueWaiter(spec: AcquireSpec, aliveMs: number, instanceId: string | null = null): Promise<number> {
    const insert = (owner: string | null) =>
      this.db
        .insert(leaseWaiters)
        .values({
          instanceId: owner,
          agentId: spec.agentId,
          capability: spec.capability,
          agentType: spec.agentType,
          projectId: spec.projectId,
          workId: spec.workId,
          aliveUntil: fromNow(aliveMs),
        })
        .returning({ seq: leaseWaiters.seq });
    try {
      const [row] = await insert(instanceId);
      return row!.seq;
    } catch (error) {
      // Another replica judged this one gone (its heartbeat lapsed) and removed its registration; the
      // next heartbeat restores it. Meanwhile the waiter lives by its own alive_until alone.
      if (!instanceId || !violatedForeignKey(error)) throw error;
      const [row] = await insert(null);
      return row!.seq;
    }
  }

  async keepWaitersAlive(seqs: number[], aliveMs: number): Promise<void> {
    await this.db.update(leaseWaiters).set({ aliveUntil: fromNow(aliveMs) }).where(inArray(leaseWaiters.seq, seqs));
  }

  /**
   * The queued requests that should look now: for every free slot, the oldest live waiter that could
   * take it. Everyone else would find the slot claimed by an older request.
   */
  async queueHeads(): Promise<number[]> {
    const result = await this.db.execute(sql`
      select distinct head.seq
      from pool.agent_slots s
      join pool.agents a on a.id = s.agent_id
      cross join lateral (
        select w.seq from pool.lease_waiters w
        where w.alive_until > statement_timestamp() and ${fitOfWaiter} is not null
        order by w.seq
        limit 1) head
      where a.enabled
        and s.slot_no < a.concurrency
        and not exists (
          select 1 from pool.agent_leases l
          where l.agent_id = s.agent_id and l.slot_no = s.slot_no
            and l.ended_at is null and l.expires_at > statement_timestamp())`);
    return rowsOf<{ seq: number | string }>(result).map((row) => Number(row.seq));
  }

  async removeWaiter(seq: number): Promise<void> {
    await this.db.delete(leaseWaiters).where(eq(leaseWaiters.seq, seq));
  }

  /** How many requests are queued and alive (for tests and diagnostics). */
  async liveWaiterCount(): Promise<number> {
    const [row] = await this.db
      .select({ count: sql<number>`count(*)::int` })
      .from(leaseWaiters)
      .where(sql`${leaseWaiters.aliveUntil} > statement_timestamp()`);
    return row?.count ?? 0;
  }

  // ---- housekeeping

  /**
   * Records expired leases as ended at their deadline and drops waiters whose replica stopped
   * refreshing them. Correctness never depends on this: both already count as gone.
   */
  async sweep(): Promise<{ expiredLeases: number; abandonedWaiters: number; goneInstances: number }> {
    const expiredLeases = await this.endExpiredLeases();
    const gone = await this.db
      .delete(poolInstances)
      .where(sql`${poolInstances.aliveUntil} <= statement_timestamp()`)
      .returning({ id: poolInstances.id });
    const abandoned = await this.db
      .delete(leaseWaiters)
      .where(sql`${leaseWaiters.aliveUntil} <= statement_timestamp()`)
      .returning({ seq: leaseWaiters.seq });
    return { expiredLeases, abandonedWaiters: abandoned.length, goneInstances: gone.length };
  }

  // ---- pool instances

  /** Registers this process, or keeps its registration alive for another `aliveMs`. */
  async heartbeatInstance(instanceId: string, aliveMs: number): Promise<void> {
    await this.db
      .insert(poolInstances)
      .values({ id: instanceId, aliveUntil: fromNow(aliveMs) })
      .onConflictDoUpdate({ target: poolInstances.id, set: { aliveUntil: fromNow(aliveMs) } });
  }

  /** Deregisters this process on a clean stop; its queued callers (if any are left) go with it. */
  async removeInstance(instanceId: string): Promise<void> {
    await this.db.delete(poolInstances).where(eq(poolInstances.id, instanceId));
  }

  async liveInstanceIds(): Promise<string[]> {
    const rows = await this.db
      .select({ id: poolInstances.id })
      .from(poolInstances)
      .where(sql`${poolInstances.aliveUntil} > statement_timestamp()`)
      .orderBy(asc(poolInstances.id));
    return rows.map((row) => row.id);
  }
}
