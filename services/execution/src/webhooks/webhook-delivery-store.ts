import { and, asc, eq, lte, sql } from 'drizzle-orm';
import type { Database } from '@actor/kit';
import { schema, webhookDeliveries } from '../db/schema.js';

export type WebhookDeliveryRow = typeof webhookDeliveries.$inferSelect;

/** The delivery loop's SQL over the `webhook_deliveries` outbox (rows are inserted by TaskRepository). */
export class WebhookDeliveryStore {
  constructor(private readonly db: Database<typeof schema>) {}

  /**
   * Claims up to `limit` due deliveries: counts the try and pushes `next_attempt_at` `leaseMs` ahead,
   * so no other replica picks them while this one sends. SKIP LOCKED lets replicas claim side by side.
   */
  async claimDue(limit: number, leaseMs: number): Promise<WebhookDeliveryRow[]> {
    if (limit <= 0) return [];
    return this.db.transaction(async (tx) => {
      const due = await tx
        .select({ id: webhookDeliveries.id })
        .from(webhookDeliveries)
        .where(and(eq(webhookDeliveries.status, 'pending'), lte(webhookDeliveries.nextAttemptAt, sql`now()`)))
        .orderBy(asc(webhookDeliveries.nextAttemptAt))
        .limit(limit)
        .for('update', { skipLocked: true });
      const claimed: WebhookDeliveryRow[] = [];
      for (const { id } of due) {
        const [row] = await tx
          .update(webhookDeliveries)
          .set({
            attempts: sql`${webhookDeliveries.attempts} + 1`,
            lastAttemptAt: sql`now()`,
            nextAttemptAt: sql`now() + make_interval(secs => ${leaseMs / 1000})`,
          })
          .where(eq(webhookDeliveries.id, id))
          .returning();
        if (row) claimed.push(row);
      }
      return claimed;
    });
  }

  /**
   * Records the outcome of the try that made `attempts` what it is. A row that moved on meanwhile
   * (its lease ran out and another replica claimed it again) is left to that replica.
   */
  async record(
    claimed: Pick<WebhookDeliveryRow, 'id' | 'attempts'>,
    outcome:
      | { status: 'delivered'; statusCode: number }
      | { status: 'failed'; statusCode?: number; error: string }
      | { status: 'pending'; statusCode?: number; error: string; nextAttemptAt: Date },
  ): Promise<boolean> {
    const finished = outcome.status !== 'pending';
    const rows = await this.db
      .update(webhookDeliveries)
      .set({
        status: outcome.status,
        lastStatusCode: outcome.statusCode ?? null,
        lastError: outcome.status === 'delivered' ? null : outcome.error,
        ...(outcome.status === 'pending' ? { nextAttemptAt: outcome.nextAttemptAt } : {}),
        ...(finished ? { finishedAt: sql`now()` } : {}),
      })
      .where(
        and(
          eq(webhookDeliveries.id, claimed.id),
          eq(webhookDeliveries.attempts, claimed.attempts),
          eq(webhookDeliveries.status, 'pending'),
        ),
      )
      .returning({ id: webhookDeliveries.id });
    return rows.length > 0;
  }
}
