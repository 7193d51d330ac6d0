import type { GatewayMetrics } from '../gateway-metrics.js';
import { openApiDocument } from '../openapi.js';
import type { Route } from '../router.js';
import { sendJson } from '../send-json.js';

/** GET /openapi.json and GET /metrics: public descriptions of the API and of its traffic. */
export function metaRoutes(metrics: GatewayMetrics): Route[] {
  return [
    {
      method: 'GET',
      pattern: '/openapi.json',
      access: 'public',
      handle(context) {
        sendJson(context.response, 200, openApiDocument, { 'Cache-Control': 'public, max-age=300' });
      },
    },
    {
      method: 'GET',
      pattern: '/metrics',
      access: 'public',
      handle(context) {
        const text = metrics.render();
        context.response.writeHead(200, {
          'Content-Type': 'text/plain; version=0.0.4; charset=utf-8',
          'Content-Length': Buffer.byteLength(text),
          'Cache-Control': 'no-store',
        });
        context.response.end(text);
      },
    },
  ];
}
