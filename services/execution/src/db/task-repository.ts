import { and, asc, desc, eq, gt, inArray, isNotNull, lt, sql } from 'drizzle-orm';
import { newId, type Database } from '@actor/kit';
import { wantsEvent, webhookBody, type TaskStateChange, type WebhookSubscription } from '../webhooks/webhook-events.js';
import { attempts, explanationEntries, schema, taskEvents, tasks, webhookDeliveries } from './schema.js';

export type TaskRow = typeof tasks.$inferSelect;
export type TaskInsert = typeof tasks.$inferInsert;
export type AttemptRow = typeof attempts.$inferSelect;
export type AttemptInsert = typeof attempts.$inferInsert;
export type EventRow = typeof taskEvents.$inferSelect;
export type ExplanationRow = typeof explanationEntries.$inferSelect;
export type WebhookDeliveryRow = typeof webhookDeliveries.$inferSelect;

export type TaskState = 'queued' | 'running' | 'verifying' | 'succeeded' | 'failed' | 'cancelled';
export const terminalStates: TaskState[] = ['succeeded', 'failed', 'cancelled'];

type Transaction = Parameters<Parameters<Database<typeof schema>['transaction']>[0]>[0];

/** The terminal write of a task: state, result or error, cost. */
export interface TaskFinish {
  state: 'succeeded' | 'failed' | 'cancelled';
  result?: string;
  errorCode?: string;
  errorMessage?: string;
  costMicroUsd: number;
}

/** Every SQL statement of the execution service's task store. */
export class TaskRepository {
  constructor(private readonly db: Database<typeof schema>) {}

  /**
   * Inserts the task and its first event in one transaction. A repeated (project, request id) returns
   * the task first stored with it (`replayed`), whatever its state now.
   */
  async create(row: TaskInsert): Promise<{ task: TaskRow; replayed: boolean }> {
    return this.db.transaction(async (tx) => {
      if (row.requestId) {
        const [existing] = await tx
          .select()
          .from(tasks)
          .where(and(eq(tasks.projectId, row.projectId), eq(tasks.requestId, row.requestId)));
        if (existing) return { task: existing, replayed: true };
      }
      const inserted = await tx.insert(tasks).values({ ...row, lastEventSeq: 1 }).onConflictDoNothing().returning();
      if (inserted.length === 0) {
        // A concurrent create with the same key won the race.
        const [existing] = await tx
          .select()
          .from(tasks)
          .where(and(eq(tasks.projectId, row.projectId), eq(tasks.requestId, row.requestId!)));
        return { task: existing!, replayed: true };
      }
      await tx.insert(taskEvents).values({ taskId: row.id, seq: 1, kind: 'state', data: { state: 'queued' } });
      const task = inserted[0]!;
      await this.enqueueWebhooks(tx, task.webhooks, { taskId: task.id, projectId: task.projectId, state: 'queued', costMicroUsd: 0, at: task.createdAt });
      return { task, replayed: false };
    });
  }

  async get(taskId: string, projectId?: string): Promise<TaskRow | undefined> {
    const [row] = await this.db
      .select()
      .from(tasks)
      .where(projectId ? and(eq(tasks.id, taskId), eq(tasks.projectId, projectId)) : eq(tasks.id, taskId));
    return row;
  }

  async details(
    taskId: string,
  ): Promise<{ attempts: AttemptRow[]; explanation: ExplanationRow[]; webhookDeliveries: WebhookDeliveryRow[] }> {
    const [attemptRows, explanationRows, deliveryRows] = await Promise.all([
      this.db.select().from(attempts).where(eq(attempts.taskId, taskId)).orderBy(asc(attempts.number)),
      this.db
        .select()
        .from(explanationEntries)
        .where(eq(explanationEntries.taskId, taskId))
        .orderBy(asc(explanationEntries.position)),
      this.db
        .select()
        .from(webhookDeliveries)
        .where(eq(webhookDeliveries.taskId, taskId))
        .orderBy(asc(webhookDeliveries.createdAt), asc(webhookDeliveries.id)),
    ]);
    return { attempts: attemptRows, explanation: explanationRows, webhookDeliveries: deliveryRows };
  }

  /**
   * Writes one outbox row per subscription that wants this state change, inside the caller's
   * transaction: the rows commit (or vanish) with the state change itself. The delivery loop
   * (src/webhooks/) sends them.
   */
  private async enqueueWebhooks(tx: Transaction, subscriptions: WebhookSubscription[], change: TaskStateChange): Promise<void> {
    const eventType = `task.${change.state}` as const;
    const rows = subscriptions.flatMap((subscription, webhookIndex) =>
      wantsEvent(subscription, eventType)
        ? [
            {
              id: newId('whk'),
              taskId: change.taskId,
              projectId: change.projectId,
              webhookIndex,
              url: subscription.url,
              secretRef: subscription.secretRef,
              eventType,
              payload: webhookBody(change),
            },
          ]
        : [],
    );
    if (rows.length > 0) await tx.insert(webhookDeliveries).values(rows);
  }

  /** Newest first; the page token is the id of the last task of the previous page (ids sort by time). */
  async list(projectId: string, pageSize: number, afterId?: string, state?: TaskState): Promise<TaskRow[]> {
    const conditions = [eq(tasks.projectId, projectId)];
    if (afterId) conditions.push(lt(tasks.id, afterId));
    if (state) conditions.push(eq(tasks.state, state));
    return this.db
      .select()
      .from(tasks)
      .where(and(...conditions))
      .orderBy(desc(tasks.id))
      .limit(pageSize);
  }

  /** Locks the task row and appends events with the next seqs: seqs are gapless and ordered. */
  private async appendEvents(
    tx: Transaction,
    taskId: string,
    events: Array<{ kind: string; data: unknown }>,
    update: Partial<TaskInsert> = {},
  ): Promise<EventRow[]> {
    const [locked] = await tx
      .update(tasks)
      .set({ ...update, lastEventSeq: sql`${tasks.lastEventSeq} + ${events.length}` })
      .where(eq(tasks.id, taskId))
      .returning({ lastEventSeq: tasks.lastEventSeq });
    if (!locked) throw new Error(`task ${taskId} vanished`);
    const firstSeq = locked.lastEventSeq - events.length + 1;
    if (events.length === 0) return [];
    return tx
      .insert(taskEvents)
      .values(events.map((event, index) => ({ taskId, seq: firstSeq + index, kind: event.kind, data: event.data })))
      .returning();
  }

  async appendEvent(taskId: string, kind: string, data: unknown, update: Partial<TaskInsert> = {}): Promise<EventRow> {
    const [event] = await this.db.transaction((tx) => this.appendEvents(tx, taskId, [{ kind, data }], update));
    return event!;
  }

  async eventsAfter(taskId: string, afterSeq: number, limit = 500): Promise<EventRow[]> {
    return this.db
      .select()
      .from(taskEvents)
      .where(and(eq(taskEvents.taskId, taskId), gt(taskEvents.seq, afterSeq)))
      .orderBy(asc(taskEvents.seq))
      .limit(limit);
  }

  /**
   * Claims the oldest claimable task: queued, or running/verifying under a claim that lapsed (its
   * worker died). SKIP LOCKED lets many workers claim side by side without waiting on each other.
   */
  async claimNext(workerId: string, claimTtlMs: number): Promise<TaskRow | undefined> {
    const result = await this.db.execute(sql`
      update ${tasks} set
        claimed_by = ${workerId},
        claim_expires_at = now() + make_interval(secs => ${claimTtlMs / 1000}),
        runs = ${tasks.runs} + 1
      where ${tasks.id} = (
        select ${tasks.id} from ${tasks}
        where ${tasks.state} in ('queued', 'running', 'verifying')
          and (${tasks.claimExpiresAt} is null or ${tasks.claimExpiresAt} < now())
        order by ${tasks.createdAt}
        limit 1
        for update skip locked
      )
      returning ${tasks.id}`);
    // Both drivers (node-postgres and PGlite) answer raw SQL with a `rows` array.
    const id = (result as unknown as { rows: Array<{ id: string }> }).rows[0]?.id;
    return id ? this.get(id) : undefined;
  }

  /** Extends the claim; undefined when another worker took it over (the caller must stop). */
  async renewClaim(
    taskId: string,
    workerId: string,
    claimTtlMs: number,
  ): Promise<{ cancelRequested: boolean } | undefined> {
    const [row] = await this.db
      .update(tasks)
      .set({ claimExpiresAt: sql`now() + make_interval(secs => ${claimTtlMs / 1000})` })
      .where(and(eq(tasks.id, taskId), eq(tasks.claimedBy, workerId), inArray(tasks.state, ['queued', 'running', 'verifying'])))
      .returning({ cancelRequestedAt: tasks.cancelRequestedAt });
    return row ? { cancelRequested: row.cancelRequestedAt !== null } : undefined;
  }

  /** Of the given tasks, those whose cancel was requested (one indexed read, polled by workers). */
  async cancelRequested(taskIds: string[]): Promise<string[]> {
    if (taskIds.length === 0) return [];
    const rows = await this.db
      .select({ id: tasks.id })
      .from(tasks)
      .where(and(inArray(tasks.id, taskIds), isNotNull(tasks.cancelRequestedAt)));
    return rows.map((row) => row.id);
  }

  /** Moves a claimed task to running or verifying, with its event. */
  async setState(taskId: string, state: 'running' | 'verifying'): Promise<EventRow> {
    return this.db.transaction(async (tx) => {
      const [current] = await tx
        .select({ startedAt: tasks.startedAt, projectId: tasks.projectId, webhooks: tasks.webhooks, costMicroUsd: tasks.costMicroUsd })
        .from(tasks)
        .where(eq(tasks.id, taskId))
        .for('update');
      const [event] = await this.appendEvents(tx, taskId, [{ kind: 'state', data: { state } }], {
        state,
        ...(current?.startedAt ? {} : { startedAt: new Date() }),
      });
      if (current) {
        await this.enqueueWebhooks(tx, current.webhooks, {
          taskId,
          projectId: current.projectId,
          state,
          costMicroUsd: current.costMicroUsd,
          at: event!.createdAt,
        });
      }
      return event!;
    });
  }

  /**
   * Writes the terminal state once: a task already terminal is left alone (cancel racing completion
   * yields exactly one terminal state). Returns the events written, empty when it was already final.
   */
  async finish(taskId: string, finish: TaskFinish): Promise<EventRow[]> {
    return this.db.transaction(async (tx) => {
      const [current] = await tx
        .select({ state: tasks.state, projectId: tasks.projectId, webhooks: tasks.webhooks })
        .from(tasks)
        .where(eq(tasks.id, taskId))
        .for('update');
      if (!current || terminalStates.includes(current.state as TaskState)) return [];
      const error = finish.errorCode ? { code: finish.errorCode, message: finish.errorMessage ?? '' } : null;
      const events = await this.appendEvents(
        tx,
        taskId,
        [
          { kind: 'state', data: { state: finish.state } },
          { kind: 'end', data: { state: finish.state, cost_micro_usd: finish.costMicroUsd, error } },
        ],
        {
          state: finish.state,
          result: finish.result ?? null,
          errorCode: finish.errorCode ?? null,
          errorMessage: finish.errorMessage ?? null,
          costMicroUsd: finish.costMicroUsd,
          finishedAt: new Date(),
          claimedBy: null,
          claimExpiresAt: null,
        },
      );
      await this.enqueueWebhooks(tx, current.webhooks, {
        taskId,
        projectId: current.projectId,
        state: finish.state,
        result: finish.result,
        errorCode: finish.errorCode,
        errorMessage: finish.errorMessage,
        costMicroUsd: finish.costMicroUsd,
        at: events[0]!.createdAt,
      });
      return events;
    });
  }

  /**
   * Records a cancel request. A queued task (no worker holds it) ends cancelled at once; a running
   * one is flagged for its worker; a finished one is left as it is.
   */
  async requestCancel(
    taskId: string,
    projectId: string,
    requestedBy: string,
  ): Promise<{ task: TaskRow | undefined; events: EventRow[] }> {
    return this.db.transaction(async (tx) => {
      const [current] = await tx
        .select()
        .from(tasks)
        .where(and(eq(tasks.id, taskId), eq(tasks.projectId, projectId)))
        .for('update');
      if (!current) return { task: undefined, events: [] };
      if (terminalStates.includes(current.state as TaskState) || current.cancelRequestedAt) {
        return { task: current, events: [] };
      }
      const cancelFields = { cancelRequestedBy: requestedBy, cancelRequestedAt: new Date() };
      const unclaimed = current.state === 'queued' && (!current.claimExpiresAt || current.claimExpiresAt < new Date());
      if (!unclaimed) {
        await tx.update(tasks).set(cancelFields).where(eq(tasks.id, taskId));
        return { task: { ...current, ...cancelFields }, events: [] };
      }
      const message = `cancelled by ${requestedBy} before it started`;
      const events = await this.appendEvents(
        tx,
        taskId,
        [
          { kind: 'state', data: { state: 'cancelled' } },
          { kind: 'end', data: { state: 'cancelled', cost_micro_usd: 0, error: { code: 'actor.cancelled', message } } },
        ],
        { ...cancelFields, state: 'cancelled', errorCode: 'actor.cancelled', errorMessage: message, finishedAt: new Date() },
      );
      await this.enqueueWebhooks(tx, current.webhooks, {
        taskId,
        projectId: current.projectId,
        state: 'cancelled',
        errorCode: 'actor.cancelled',
        errorMessage: message,
        costMicroUsd: 0,
        at: events[0]!.createdAt,
      });
      const [task] = await tx.select().from(tasks).where(eq(tasks.id, taskId));
      return { task, events };
    });
  }

  async upsertAttempt(row: AttemptInsert): Promise<void> {
    const { id, taskId, ...rest } = row;
    void taskId;
    await this.db.insert(attempts).values(row).onConflictDoUpdate({ target: attempts.id, set: rest });
    void id;
  }

  /** Ends the attempts a dead run left running or verifying as `errored`; returns their numbers. */
  async interruptAttempts(taskId: string, reason: string): Promise<number[]> {
    const rows = await this.db
      .update(attempts)
      .set({ state: 'errored', error: reason, finishedAt: new Date() })
      .where(and(eq(attempts.taskId, taskId), inArray(attempts.state, ['running', 'verifying'])))
      .returning({ number: attempts.number });
    return rows.map((row) => row.number).sort((left, right) => left - right);
  }

  async attemptCount(taskId: string): Promise<number> {
    const [row] = await this.db
      .select({ count: sql<number>`coalesce(max(${attempts.number}), 0)::int` })
      .from(attempts)
      .where(eq(attempts.taskId, taskId));
    return Number(row?.count ?? 0);
  }

  async appendExplanation(entry: Omit<typeof explanationEntries.$inferInsert, 'position'>): Promise<void> {
    await this.db.transaction(async (tx) => {
      // The task row lock orders concurrent appends; positions stay gapless.
      await tx.select({ id: tasks.id }).from(tasks).where(eq(tasks.id, entry.taskId)).for('update');
      const [row] = await tx
        .select({ position: sql<number>`coalesce(max(${explanationEntries.position}), 0)::int` })
        .from(explanationEntries)
        .where(eq(explanationEntries.taskId, entry.taskId));
      await tx.insert(explanationEntries).values({ ...entry, position: Number(row?.position ?? 0) + 1 });
    });
  }

  async setClassification(taskId: string, classification: unknown): Promise<void> {
    await this.db.update(tasks).set({ classification }).where(eq(tasks.id, taskId));
  }
}
