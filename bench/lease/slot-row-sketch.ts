/**
 * A sketch of another lease table, measured beside the pool's own hand-back in
 * `grant-plan-benchmark.ts`: the active lease kept on its slot row (`sketch.slots`), every lease also
 * logged (`sketch.lease_log`) so that a lease handed back can still be told released, stale or
 * unknown. A hand-back then ends the logged lease and moves the slot row to the next lease, both
 * HOT updates (no indexed column changes), and logs the new lease (two index entries), where the
 * pool's table takes a non-HOT update and an insert into six indexes. Its slot search, queue check
 * and fit order are the pool's, and a concurrent grant of the same slot is excluded by the slot row's
 * own lock and re-check (READ COMMITTED re-evaluates the locked row), so no unique index is needed.
 *
 * Only the hand-back of one caller is written out: no request-id retry, no recording of a lease that
 * expired on a slot taken over, no renewal or sweep. It answers how much of the grant's database cost a
 * redesign of the table could save, not whether the pool should run on it.
 */
import type pg from 'pg';
import { sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import { fitOf } from '../../services/pool/src/db/pool-repository.js';

/** The pool's own fit rule (`fitOf`) as SQL text, so the sketch ranks agents exactly as the pool does. */
function fitText(agentId: string, capability: string, agentType: string): string {
  return new PgDialect().sqlToQuery(fitOf({ agentId: sql.raw(agentId), capability: sql.raw(capability), agentType: sql.raw(agentType) })).sql;
}

/** The request's fit to agent `a`: $1 agent id, $2 capability, $3 agent type. */
const requestFit = fitText('$1::text', '$2::text', '$3::text');
/** A queued request's fit to agent `a`. */
const waiterFit = fitText('w.agent_id', 'w.capability', 'w.agent_type');

/** Slot row `s` is free: no lease, its lease past its deadline, or its lease ended by this statement. */
const slotIsFree = `(s.lease_id is null or s.expires_at <= statement_timestamp()
      or exists (select 1 from released r where r.agent_id = s.agent_id and r.slot_no = s.slot_no))`;

const firstFreeSlot = (range: string) => `(select s.slot_no from sketch.slots s
      where s.agent_id = ranked.id and ${range} and ${slotIsFree}
      order by s.slot_no limit 1 for update of s skip locked)`;

/**
 * $1-$3 the want, $4/$5 the lease handed back (id, epoch; null for none), $6 the new lease's id,
 * $7-$9 work type, work id, project, $10 request id, $11 time to live in ms.
 */
const handBackStatement = `
  with released as (
    update sketch.lease_log l
    set ended_at = least(statement_timestamp(), s.expires_at),
        end_reason = case when s.expires_at > statement_timestamp() then 'released' else 'expired' end
    from sketch.slots s
    where l.id = $4::text and l.epoch = $5::bigint and l.ended_at is null
      and s.agent_id = l.agent_id and s.slot_no = l.slot_no and s.lease_id = l.id
    returning l.id, l.agent_id, l.slot_no, l.end_reason),
  slot as (
    select agent_id, slot_no from (
      select ranked.id as agent_id, coalesce(
        ${firstFreeSlot('s.slot_no >= ranked.start and s.slot_no < ranked.concurrency')},
        ${firstFreeSlot('s.slot_no < least(ranked.start, ranked.concurrency)')}) as slot_no
      from (
        select a.id, a.concurrency, floor(random() * a.concurrency)::int as start
        from sketch.agents a
        where ($4::text is null or exists (select 1 from released where end_reason = 'released'))
          and a.enabled and ${requestFit} is not null
          and not exists (select 1 from sketch.lease_waiters w
                          where w.alive_until > statement_timestamp() and ${waiterFit} is not null)
        order by ${requestFit}, a.name
        offset 0) as ranked
      offset 0) as candidate
    where slot_no is not null
    limit 1),
  granted as (
    update sketch.slots s
    set lease_id = $6::text, epoch = nextval('sketch.lease_epoch'), work_type = $7::text, work_id = $8::text,
        project_id = $9::text, acquired_at = statement_timestamp(),
        expires_at = statement_timestamp() + ($11::double precision * interval '1 millisecond')
    from slot where s.agent_id = slot.agent_id and s.slot_no = slot.slot_no
    returning s.*),
  logged as (
    insert into sketch.lease_log (id, agent_id, slot_no, epoch, work_type, work_id, project_id, request_id, acquired_at, expires_at)
    select lease_id, agent_id, slot_no, epoch, work_type, work_id, project_id, $10::text, acquired_at, expires_at from granted)
  select row_to_json(granted) as lease, row_to_json(a) as agent, (select count(*) from slot) as picked,
         (select end_reason from released) as ended
  from (select) as answer left join granted on true left join sketch.agents a on a.id = granted.agent_id`;

/**
 * Creates the sketch's tables (schema `sketch`) with one agent of `slots` slots, and returns one
 * hand-back cycle of one caller: each call hands back the lease the last one took. The pool's
 * agents and waiters tables are copied in shape so that its search reads the same rows.
 */
export async function createSlotRowSketch(database: pg.Pool | pg.Client, slots: number): Promise<() => Promise<void>> {
  await database.query(`
    create schema sketch;
    create sequence sketch.lease_epoch;
    create table sketch.agents (like pool.agents including all);
    create table sketch.lease_waiters (like pool.lease_waiters including all);
    create table sketch.slots (
      agent_id text not null references sketch.agents (id) on delete cascade, slot_no integer not null,
      lease_id text, epoch bigint, work_type text, work_id text, project_id text,
      acquired_at timestamptz, expires_at timestamptz,
      primary key (agent_id, slot_no)) with (fillfactor = 50);
    create table sketch.lease_log (
      id text primary key, agent_id text not null, slot_no integer not null, epoch bigint not null,
      work_type text not null, work_id text not null, project_id text not null, request_id text unique,
      acquired_at timestamptz not null, expires_at timestamptz not null, ended_at timestamptz, end_reason text)
      with (fillfactor = 80);
    insert into sketch.agents (id, name, agent_type, capabilities, configuration, concurrency)
      values ('agt_sketch', 'sketch', 'bench', '["*"]', '{}', ${Number(slots)});
    insert into sketch.slots (agent_id, slot_no) select 'agt_sketch', n from generate_series(0, ${Number(slots)} - 1) as n;`);
  let held: { id: string; epoch: number } | null = null;
  let serial = 0;
  return async () => {
    const { rows } = await database.query<{ lease: { lease_id: string; epoch: number } | null }>({
      name: 'bench_sketch_hand_back',
      text: handBackStatement,
      values: ['', '', 'bench', held?.id ?? null, held?.epoch ?? null, `lse_sketch_${serial++}`, 'task', 'bench', 'prj_bench', null, 30_000],
    });
    const lease = rows[0]?.lease;
    if (!lease) throw new Error('the slot-row sketch granted nothing');
    held = { id: lease.lease_id, epoch: Number(lease.epoch) };
  };
}
