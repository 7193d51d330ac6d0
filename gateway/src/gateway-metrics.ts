/**
 * The gateway's Prometheus metrics, kept in process memory and rendered in the text exposition
 * format by GET /metrics:
 * - `actor_gateway_http_requests_total{method, route, status}`: answered requests; `route` is the
 *   matched pattern (`/v1/tasks/{id}`) or `unmatched`, so ids never multiply the series.
 * - `actor_gateway_http_request_duration_seconds_sum/_count{method, route}`: time to the answer's end.
 * - `actor_gateway_sse_connections_open`: event streams open now.
 * - `actor_gateway_sse_connections_total`: event streams opened since start.
 */
export class GatewayMetrics {
  private readonly requests = new Map<string, number>();
  private readonly durations = new Map<string, { sum: number; count: number }>();
  private sseOpen = 0;
  private sseTotal = 0;

  recordRequest(method: string, route: string, status: number, seconds: number): void {
    const requestKey = labels({ method, route, status: String(status) });
    this.requests.set(requestKey, (this.requests.get(requestKey) ?? 0) + 1);
    const durationKey = labels({ method, route });
    const duration = this.durations.get(durationKey) ?? { sum: 0, count: 0 };
    duration.sum += seconds;
    duration.count += 1;
    this.durations.set(durationKey, duration);
  }

  sseOpened(): void {
    this.sseOpen += 1;
    this.sseTotal += 1;
  }

  sseClosed(): void {
    this.sseOpen -= 1;
  }

  get openStreams(): number {
    return this.sseOpen;
  }

  render(): string {
    const lines = [
      '# HELP actor_gateway_http_requests_total HTTP requests answered, by route and status.',
      '# TYPE actor_gateway_http_requests_total counter',
      ...[...this.requests].map(([key, count]) => `actor_gateway_http_requests_total{${key}} ${count}`),
      '# HELP actor_gateway_http_request_duration_seconds Time to answer HTTP requests, by route.',
      '# TYPE actor_gateway_http_request_duration_seconds summary',
      ...[...this.durations].flatMap(([key, duration]) => [
        `actor_gateway_http_request_duration_seconds_sum{${key}} ${duration.sum}`,
        `actor_gateway_http_request_duration_seconds_count{${key}} ${duration.count}`,
      ]),
      '# HELP actor_gateway_sse_connections_open Server-sent event streams open now.',
      '# TYPE actor_gateway_sse_connections_open gauge',
      `actor_gateway_sse_connections_open ${this.sseOpen}`,
      '# HELP actor_gateway_sse_connections_total Server-sent event streams opened since start.',
      '# TYPE actor_gateway_sse_connections_total counter',
      `actor_gateway_sse_connections_total ${this.sseTotal}`,
    ];
    return `${lines.join('\n')}\n`;
  }
}

function labels(values: Record<string, string>): string {
  return Object.entries(values)
    .map(([name, value]) => `${name}="${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`)
    .join(',');
}
