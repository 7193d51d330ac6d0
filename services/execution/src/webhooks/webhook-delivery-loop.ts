import type { Logger } from '@actor/kit';
import type { SecretResolver } from '../secrets/secret-resolver.js';
import type { WebhookDeliveryRow, WebhookDeliveryStore } from './webhook-delivery-store.js';
import { nextAttemptAt, type WebhookRetryPolicy } from './webhook-retry-policy.js';
import { sendWebhook, type SendOutcome } from './webhook-sender.js';
import { webhookHeaders } from './webhook-signature.js';

export interface WebhookDeliveryLoopOptions {
  store: WebhookDeliveryStore;
  /** Resolves the project secret a subscription's `secret_ref` names. */
  secrets: Pick<SecretResolver, 'resolve'>;
  logger: Logger;
  retry: WebhookRetryPolicy;
  /** Most deliveries this process sends at once; 0 disables sending here. */
  concurrency: number;
  /** Per try, up to the answer's headers, in ms. */
  timeoutMs: number;
  /** How often due rows are looked for when nothing woke the loop, in ms. */
  pollIntervalMs: number;
  /** Hosts exempt from the SSRF guard. */
  allowHosts: readonly string[];
}

/** How long past the request timeout a claim holds before another replica may take the row again. */
const claimMarginMs = 30_000;

/**
 * Sends the `webhook_deliveries` outbox: claims due rows (any replica may), signs each body with the
 * project secret (Standard Webhooks), POSTs it, and records the outcome: 2xx delivered; 410 Gone or
 * an address the SSRF guard refuses ends the delivery `failed` at once; anything else (other status,
 * timeout, network error, a secret that is missing or unusable) is retried with exponential backoff
 * and jitter until the policy's attempts or age run out, then `failed`.
 */
export class WebhookDeliveryLoop {
  private running = false;
  private loop: Promise<void> | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private wakeUp: (() => void) | undefined;

  constructor(private readonly options: WebhookDeliveryLoopOptions) {}

  start(): void {
    if (this.running || this.options.concurrency <= 0) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Looks for due rows now (after a local write) instead of at the next poll. */
  wake(): void {
    this.wakeUp?.();
  }

  /** Stops claiming and waits for the tries in flight (each bounded by the request timeout). */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.wake();
    await this.loop;
    await Promise.allSettled([...this.inFlight]);
  }

  private async run(): Promise<void> {
    while (this.running) {
      const free = this.options.concurrency - this.inFlight.size;
      let claimed: WebhookDeliveryRow[] = [];
      if (free > 0) {
        try {
          claimed = await this.options.store.claimDue(free, this.options.timeoutMs + claimMarginMs);
        } catch (error) {
          this.options.logger.warn({ err: error }, 'claiming webhook deliveries failed; retrying at the next poll');
        }
      }
      for (const row of claimed) {
        const delivery = this.deliver(row).finally(() => {
          this.inFlight.delete(delivery);
          this.wake();
        });
        this.inFlight.add(delivery);
      }
      // A full batch may mean more are due: look again at once; else wait for a poll, a wake-up or a free slot.
      if (claimed.length > 0 && claimed.length === free) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, this.options.pollIntervalMs);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.wakeUp = done;
      });
      this.wakeUp = undefined;
    }
  }

  /** One try of one delivery; never throws. */
  private async deliver(row: WebhookDeliveryRow): Promise<void> {
    const { logger } = this.options;
    const context = { deliveryId: row.id, taskId: row.taskId, eventType: row.eventType, attempt: row.attempts, origin: safeOrigin(row.url) };
    let outcome: SendOutcome;
    try {
      let secret: string;
      try {
        secret = await this.options.secrets.resolve(row.projectId, row.secretRef);
      } catch (error) {
        // The resolver's messages name the project and the secret, never a value.
        const message = error instanceof Error ? error.message : 'unknown error';
        outcome = { kind: 'unreachable', message: `signing secret "${row.secretRef}" unavailable: ${message}` };
        return await this.finish(row, outcome, context);
      }
      let headers: Record<string, string>;
      try {
        headers = webhookHeaders(secret, row.id, row.payload, new Date());
      } catch (error) {
        outcome = { kind: 'unreachable', message: `signing secret "${row.secretRef}" unusable: ${(error as Error).message}` };
        return await this.finish(row, outcome, context);
      }
      outcome = await sendWebhook({
        url: row.url,
        headers,
        body: row.payload,
        timeoutMs: this.options.timeoutMs,
        allowHosts: this.options.allowHosts,
      });
      await this.finish(row, outcome, context);
    } catch (error) {
      // The row stays claimed until its lease lapses, then any replica tries again.
      logger.error({ ...context, err: error }, 'recording a webhook delivery failed');
    }
  }

  private async finish(row: WebhookDeliveryRow, outcome: SendOutcome, context: Record<string, unknown>): Promise<void> {
    const { store, logger, retry } = this.options;
    if (outcome.kind === 'answered' && outcome.statusCode >= 200 && outcome.statusCode < 300) {
      await store.record(row, { status: 'delivered', statusCode: outcome.statusCode });
      logger.info({ ...context, statusCode: outcome.statusCode }, 'webhook delivered');
      return;
    }
    const statusCode = outcome.kind === 'answered' ? outcome.statusCode : undefined;
    if (outcome.kind === 'refused') {
      await store.record(row, { status: 'failed', error: `address refused: ${outcome.message}` });
      logger.warn({ ...context, error: outcome.message }, 'webhook address refused; delivery failed');
      return;
    }
    if (statusCode === 410) {
      await store.record(row, { status: 'failed', statusCode, error: 'the receiver answered 410 Gone: no more tries' });
      logger.info(context, 'webhook receiver answered 410 Gone; delivery stopped');
      return;
    }
    const error = outcome.kind === 'answered' ? `the receiver answered HTTP ${outcome.statusCode}` : outcome.message;
    const next = nextAttemptAt(retry, row.attempts, row.createdAt, new Date(), outcome.kind === 'answered' ? outcome.retryAfterMs : undefined);
    if (!next) {
      await store.record(row, { status: 'failed', statusCode, error: `${error} (gave up after ${row.attempts} tries)` });
      logger.warn({ ...context, statusCode, error }, 'webhook delivery failed for good');
      return;
    }
    await store.record(row, { status: 'pending', statusCode, error, nextAttemptAt: next });
    logger.info({ ...context, statusCode, error, nextAttemptAt: next.toISOString() }, 'webhook try failed; will retry');
  }
}

/** The URL's origin for logs: paths and queries may carry the receiver's own tokens. */
function safeOrigin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '(bad url)';
  }
}
