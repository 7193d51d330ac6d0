import { costJson } from '@actor/kit';

/**
 * The event types a webhook subscription may ask for: one per task state, `task.<state>`.
 * `task.*` asks for every state change; an empty list means the terminal ones.
 */
export const webhookEventTypes = [
  'task.queued',
  'task.running',
  'task.verifying',
  'task.succeeded',
  'task.failed',
  'task.cancelled',
] as const;

export type WebhookEventType = (typeof webhookEventTypes)[number];

/** What an empty `events` list means: a caller usually wants to hear when the task is over. */
export const defaultWebhookEventTypes: WebhookEventType[] = ['task.succeeded', 'task.failed', 'task.cancelled'];

export const allWebhookEvents = 'task.*';

/** A stored subscription, as in `tasks.webhooks`. */
export interface WebhookSubscription {
  url: string;
  secretRef: string;
  events: string[];
}

/** The problem with a subscription's `events`, or undefined when every name is known. */
export function webhookEventsProblem(events: string[]): string | undefined {
  const unknown = events.filter(
    (event) => event !== allWebhookEvents && !(webhookEventTypes as readonly string[]).includes(event),
  );
  if (unknown.length === 0) return undefined;
  return `webhook events ${unknown.map((event) => `"${event}"`).join(', ')} unknown; use ${webhookEventTypes.join(', ')} or ${allWebhookEvents}`;
}

export function wantsEvent(subscription: WebhookSubscription, eventType: WebhookEventType): boolean {
  const events = subscription.events.length === 0 ? defaultWebhookEventTypes : subscription.events;
  return events.includes(allWebhookEvents) || events.includes(eventType);
}

/** The task as it is when a state change is recorded; what a delivery's body is built from. */
export interface TaskStateChange {
  taskId: string;
  projectId: string;
  state: 'queued' | 'running' | 'verifying' | 'succeeded' | 'failed' | 'cancelled';
  result?: string | null;
  errorCode?: string | null;
  errorMessage?: string | null;
  costMicroUsd: number;
  at: Date;
}

/** Results longer than this are cut in the body (the receiver reads the whole one with GET /v1/tasks/{id}). */
export const maxResultCharsInBody = 16_000;

/**
 * The JSON body of a delivery, fixed when the state change is recorded so that every retry sends (and
 * signs) the same bytes. Shape (Standard Webhooks' recommended envelope):
 * `{type, timestamp, data: {task_id, state, result, result_truncated, error, cost: {usd, micro_usd}, links}}`
 * - `type`: the event type (`task.succeeded`, ...); `timestamp`: when the state changed (ISO 8601).
 * - `result`: the verified answer for `task.succeeded`, else null; cut to 16 000 characters, with
 *   `result_truncated` true when it was.
 * - `error`: `{code, message}` for failed and cancelled tasks, else null.
 * - `cost`: spent so far, `usd` rounded to the cent, `micro_usd` exact.
 */
export function webhookBody(change: TaskStateChange): string {
  const result = change.state === 'succeeded' ? (change.result ?? '') : null;
  const truncated = result !== null && result.length > maxResultCharsInBody;
  return JSON.stringify({
    type: `task.${change.state}`,
    timestamp: change.at.toISOString(),
    data: {
      task_id: change.taskId,
      state: change.state,
      result: truncated ? result.slice(0, maxResultCharsInBody) : result,
      result_truncated: truncated,
      error: change.errorCode ? { code: change.errorCode, message: change.errorMessage ?? '' } : null,
      cost: costJson(change.costMicroUsd),
      links: { self: `/v1/tasks/${change.taskId}`, events: `/v1/tasks/${change.taskId}/events` },
    },
  });
}
