import { problems } from '../problem.js';
import type { Route } from '../router.js';
import { parseEventCursor, SseStream } from '../sse.js';
import { taskIdParam } from './tasks.js';
import type { GatewayMetrics } from '../gateway-metrics.js';

/**
 * GET /v1/tasks/{id}/events: the task's events as server-sent events, `id:` = the event seq,
 * `event:` = its kind (`state`, `output`, `end`), `data:` = its JSON payload. Events after the
 * `Last-Event-ID` header (or the `after` query parameter) are replayed first, then live ones follow;
 * the stream closes after `end`. A stream cut any other way (execution restarting) just closes: the
 * client reconnects with Last-Event-ID and misses nothing.
 */
export function taskEventRoutes(metrics: GatewayMetrics, openStreams: Set<SseStream>): Route[] {
  return [
    {
      method: 'GET',
      pattern: '/v1/tasks/{id}/events',
      access: 'tasks:read',
      async handle(context) {
        const taskId = taskIdParam(context);
        const header = context.request.headers['last-event-id'];
        const fromHeader = parseEventCursor(Array.isArray(header) ? header[0] : header);
        const fromQuery = parseEventCursor(context.url.searchParams.get('after'));
        if (fromHeader === null || fromQuery === null) {
          throw problems.invalid('Last-Event-ID and `after` must be a non-negative integer event seq', [
            { path: fromHeader === null ? 'Last-Event-ID' : 'after', message: 'must be a non-negative integer' },
          ]);
        }
        const afterSeq = fromHeader ?? fromQuery ?? 0;
        const projectId = context.identity!.projectId;
        // Ask first, so an unknown task is a plain 404 problem rather than an event stream that ends.
        await context.clients.execution.getTask({ taskId, projectId }, { signal: context.signal });

        metrics.sseOpened();
        const stream = new SseStream(context.response, {
          keepaliveMs: context.config.GATEWAY_SSE_KEEPALIVE_MS,
          onClose: () => {
            metrics.sseClosed();
            openStreams.delete(stream);
          },
        });
        openStreams.add(stream);
        try {
          const events = context.clients.execution.watchTask({ taskId, projectId, afterSeq }, { signal: stream.signal });
          for await (const { event } of events) {
            if (!event) continue;
            await stream.send({ id: event.seq, event: event.kind, data: event.dataJson || '{}' });
            if (event.kind === 'end') break;
          }
        } catch (error) {
          if (!stream.signal.aborted) context.logger.warn({ err: error, taskId }, 'task event stream broke; closing it');
        } finally {
          stream.close();
        }
      },
    },
  ];
}
