import { costJson } from '@actor/kit';
import { z } from 'zod';
import { parseWith } from '../request-body.js';
import type { Route } from '../router.js';
import { sendJson } from '../send-json.js';

const usageQuerySchema = z.object({
  day: z
    .string()
    .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a UTC day, YYYY-MM-DD')
    .refine(isCalendarDay, 'must be a real calendar day')
    .optional(),
});

function isCalendarDay(day: string): boolean {
  const time = Date.parse(`${day}T00:00:00Z`);
  return !Number.isNaN(time) && new Date(time).toISOString().startsWith(day);
}

export const usageRoutes: Route[] = [
  {
    method: 'GET',
    pattern: '/v1/usage',
    access: 'usage:read',
    /** The project's spend of one UTC day (default today): settled, still reserved, and per backend. */
    async handle(context) {
      const query = parseWith(usageQuerySchema, Object.fromEntries(context.url.searchParams), 'query');
      const answer = await context.clients.billing.getSpend(
        { projectId: context.identity!.projectId, day: query.day ?? '' },
        { signal: context.signal },
      );
      sendJson(context.response, 200, {
        day: answer.day,
        total: costJson(answer.spentMicroUsd),
        reserved: costJson(answer.reservedMicroUsd),
        by_backend: answer.byBackend.map((spend) => ({
          backend: spend.backend,
          cost: costJson(spend.costMicroUsd),
          calls: spend.calls,
        })),
      });
    },
  },
];
