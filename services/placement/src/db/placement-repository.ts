import { and, asc, eq, sql, type SQL } from 'drizzle-orm';
import type { Database } from '@actor/kit';
import type { Challenge } from '../domain/hysteresis.js';
import type { SignalState } from '../domain/placement-model.js';
import { decisions, incumbents, outcomeReports, signals, type schema } from './schema.js';

export type DecisionRow = typeof decisions.$inferSelect;
export type DecisionInsert = Omit<typeof decisions.$inferInsert, 'createdAt'>;

export interface IncumbentKey {
  projectId: string;
  taskClass: string;
  mode: string;
  purpose: string;
}

type Executor = Pick<Database<typeof schema>, 'execute'>;

/** The database clock, so that every replica measures cooldowns against the same time. */
async function databaseNow(executor: Executor): Promise<Date> {
  const result = (await executor.execute(
    sql`select (extract(epoch from now()) * 1000)::float8 as now_ms`,
  )) as unknown as { rows: Array<{ now_ms: number | string }> };
  return new Date(Number(result.rows[0]!.now_ms));
}

/** Every SQL statement of placement. */
export class PlacementRepository {
  constructor(private readonly db: Database<typeof schema>) {}

  now(): Promise<Date> {
    return databaseNow(this.db);
  }

  async findDecision(id: string): Promise<DecisionRow | undefined> {
    const [row] = await this.db.select().from(decisions).where(eq(decisions.id, id));
    return row;
  }

  async findDecisionByRequest(projectId: string, requestId: string): Promise<DecisionRow | undefined> {
    const [row] = await this.db
      .select()
      .from(decisions)
      .where(and(eq(decisions.projectId, projectId), eq(decisions.requestId, requestId)));
    return row;
  }

  /**
   * Stores a decision. When a concurrent Place with the same request id stored one first, that one is
   * returned instead, so both callers see the same decision.
   */
  async insertDecision(row: DecisionInsert): Promise<{ row: DecisionRow; created: boolean }> {
    const [stored] = await this.db
      .insert(decisions)
      .values(row)
      .onConflictDoNothing({ target: [decisions.projectId, decisions.requestId] })
      .returning();
    if (stored) return { row: stored, created: true };
    const existing = await this.findDecisionByRequest(row.projectId, row.requestId!);
    return { row: existing!, created: false };
  }

  /** The signals of one task class, by backend, read at the database's `now`. */
  async signalsForClass(taskClass: string): Promise<{ signals: Map<string, SignalState>; now: Date }> {
    const [rows, now] = await Promise.all([
      this.db.select().from(signals).where(eq(signals.taskClass, taskClass)),
      databaseNow(this.db),
    ]);
    return { signals: new Map(rows.map((row) => [row.backend, row])), now };
  }

  async listSignals(filter: { backend?: string; taskClass?: string }): Promise<{ signals: SignalState[]; now: Date }> {
    const conditions: SQL[] = [];
    if (filter.backend) conditions.push(eq(signals.backend, filter.backend));
    if (filter.taskClass) conditions.push(eq(signals.taskClass, filter.taskClass));
    const [rows, now] = await Promise.all([
      this.db
        .select()
        .from(signals)
        .where(conditions.length > 0 ? and(...conditions) : undefined)
        .orderBy(asc(signals.backend), asc(signals.taskClass)),
      databaseNow(this.db),
    ]);
    return { signals: rows, now };
  }

  /**
   * Counts one outcome exactly once: the request id is recorded and the signal row is locked and
   * rewritten in one transaction, so concurrent reports (from any replica) never lose an update.
   * `apply` computes the new signal from the locked one at the database's `now`.
   */
  async recordOutcome(
    report: { requestId: string; backend: string; taskClass: string; decisionId: string },
    apply: (current: SignalState, now: Date) => SignalState,
  ): Promise<{ signal: SignalState; now: Date; duplicate: boolean }> {
    return this.db.transaction(async (tx) => {
      const now = await databaseNow(tx);
      const key = and(eq(signals.backend, report.backend), eq(signals.taskClass, report.taskClass));
      const [recorded] = await tx
        .insert(outcomeReports)
        .values(report)
        .onConflictDoNothing({ target: outcomeReports.requestId })
        .returning({ requestId: outcomeReports.requestId });
      await tx
        .insert(signals)
        .values({ backend: report.backend, taskClass: report.taskClass, updatedAt: now })
        .onConflictDoNothing({ target: [signals.backend, signals.taskClass] });
      const [current] = await tx.select().from(signals).where(key).for('update');
      if (!recorded) return { signal: current!, now, duplicate: true };
      const next = apply(current!, now);
      const [stored] = await tx
        .update(signals)
        .set({
          samples: next.samples,
          successes: next.successes,
          verifiedSuccesses: next.verifiedSuccesses,
          workSamples: next.workSamples,
          recentVerified: next.recentVerified,
          recentWork: next.recentWork,
          latenciesMs: next.latenciesMs,
          costSamples: next.costSamples,
          totalCostMicroUsd: next.totalCostMicroUsd,
          recentCostSamples: next.recentCostSamples,
          recentCostMicroUsd: next.recentCostMicroUsd,
          consecutiveFailures: next.consecutiveFailures,
          openedAt: next.openedAt,
          probeStartedAt: next.probeStartedAt,
          updatedAt: next.updatedAt,
        })
        .where(key)
        .returning();
      return { signal: stored!, now, duplicate: false };
    });
  }

  /**
   * Hands out the single probe of a half-open circuit. Only one placement across all replicas gets
   * true until the probe reports back or, lost, expires after another cooldown.
   */
  async claimProbe(backend: string, taskClass: string, cooldownMs: number): Promise<boolean> {
    const cooldown = sql`make_interval(secs => ${cooldownMs / 1000})`;
    const claimed = await this.db
      .update(signals)
      .set({ probeStartedAt: sql`now()` })
      .where(
        and(
          eq(signals.backend, backend),
          eq(signals.taskClass, taskClass),
          sql`${signals.openedAt} is not null`,
          sql`${signals.openedAt} <= now() - ${cooldown}`,
          sql`(${signals.probeStartedAt} is null or ${signals.probeStartedAt} <= now() - ${cooldown})`,
        ),
      )
      .returning({ backend: signals.backend });
    return claimed.length > 0;
  }

  async incumbent(key: IncumbentKey): Promise<{ backend: string; challenge?: Challenge } | undefined> {
    const [row] = await this.db
      .select({ backend: incumbents.backend, challenger: incumbents.challenger, challengerSince: incumbents.challengerSince })
      .from(incumbents)
      .where(this.incumbentKey(key));
    if (!row) return undefined;
    return {
      backend: row.backend,
      challenge: row.challenger && row.challengerSince ? { backend: row.challenger, since: row.challengerSince } : undefined,
    };
  }

  async setIncumbent(key: IncumbentKey, backend: string): Promise<void> {
    await this.db
      .insert(incumbents)
      .values({ ...key, backend })
      .onConflictDoUpdate({
        target: [incumbents.projectId, incumbents.taskClass, incumbents.mode, incumbents.purpose],
        set: { backend, challenger: null, challengerSince: null, updatedAt: sql`now()` },
      });
  }

  /**
   * Stores (or, with null, clears) the challenger leading the incumbent `backend`. Does nothing when
   * another placement has meanwhile replaced that incumbent: its challenge would be about someone else.
   */
  async setChallenge(key: IncumbentKey, backend: string, challenge: Challenge | null): Promise<void> {
    await this.db
      .update(incumbents)
      .set({ challenger: challenge?.backend ?? null, challengerSince: challenge?.since ?? null })
      .where(and(this.incumbentKey(key), eq(incumbents.backend, backend)));
  }

  private incumbentKey(key: IncumbentKey): SQL | undefined {
    return and(
      eq(incumbents.projectId, key.projectId),
      eq(incumbents.taskClass, key.taskClass),
      eq(incumbents.mode, key.mode),
      eq(incumbents.purpose, key.purpose),
    );
  }
}
