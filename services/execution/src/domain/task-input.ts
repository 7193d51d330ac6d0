import { fail } from '@actor/kit';
import type { CreateTaskRequest } from '@actor/proto/execution';
import { isMode } from '../ports/mode.js';
import { decodeVerify } from './task-verify.js';
import { webhookEventsProblem } from '../webhooks/webhook-events.js';

/** Platform limits on a task's input; the gateway enforces the same before calling. */
export const maxInputChars = 100_000;
export const maxListItems = 32;

export interface TaskDefaults {
  perTaskMicroUsd: number;
  perDayMicroUsd: number;
}

/**
 * Validates a CreateTask request and fills in defaults. Every problem is an INVALID_ARGUMENT with a
 * message naming the field, so a caller (or the gateway) can show it as is.
 */
export function validateTaskInput(request: CreateTaskRequest, defaults: TaskDefaults) {
  const problems: string[] = [];
  if (!request.projectId) problems.push('project_id is required');
  if (!request.input.trim()) problems.push('task text (input) is required');
  if (request.input.length > maxInputChars) problems.push(`task text is longer than ${maxInputChars} characters`);
  const mode = request.mode || 'balanced';
  if (!isMode(mode)) problems.push(`mode "${mode}" is not one of cheapest, balanced, best, fastest, private`);
  const perTask = request.budget?.perTaskMicroUsd ?? 0;
  const perDay = request.budget?.perDayMicroUsd ?? 0;
  if (perTask < 0 || perDay < 0) problems.push('budget amounts must not be negative');
  for (const [name, list] of [
    ['backends', request.backends],
    ['capabilities', request.capabilities],
    ['webhooks', request.webhooks],
    ['attachments', request.attachments],
  ] as const) {
    if (list.length > maxListItems) problems.push(`${name} has more than ${maxListItems} items`);
  }
  for (const webhook of request.webhooks) {
    let url: URL | undefined;
    try {
      url = new URL(webhook.url);
    } catch {
      problems.push(`webhook url "${webhook.url}" is not a URL`);
    }
    if (url && url.protocol !== 'https:' && url.protocol !== 'http:') problems.push('webhook urls must be http(s)');
    if (!webhook.secretRef) problems.push(`webhook "${webhook.url}" needs a secret_ref (the project secret that signs it)`);
    const eventsProblem = webhookEventsProblem(webhook.events);
    if (eventsProblem) problems.push(eventsProblem);
  }
  const verify = decodeVerify(request.verify, Boolean(request.workspace?.repo), problems);
  if (problems.length > 0) throw fail.invalid(problems.join('; '));
  return {
    mode: mode as Parameters<typeof isMode>[0] & string,
    perTaskMicroUsd: perTask || defaults.perTaskMicroUsd,
    perDayMicroUsd: perDay || defaults.perDayMicroUsd,
    verify,
  };
}
