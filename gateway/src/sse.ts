import type { ServerResponse } from 'node:http';

/** One server-sent event: `id:` lets a client resume with Last-Event-ID, `event:` names its kind. */
export interface SseEvent {
  id?: string | number;
  event?: string;
  data: string;
}

/**
 * Frames one event. Multi-line data becomes one `data:` line per line (the client joins them with
 * `\n`), and carriage returns are normalised, so a payload can never end the event early or inject
 * a field. `id` and `event` must be single-line: a line break in them is a programming error.
 */
export function formatSseEvent(event: SseEvent): string {
  let frame = '';
  if (event.id !== undefined) frame += `id: ${singleLine(String(event.id), 'id')}\n`;
  if (event.event !== undefined) frame += `event: ${singleLine(event.event, 'event')}\n`;
  for (const line of event.data.replace(/\r\n?/g, '\n').split('\n')) frame += `data: ${line}\n`;
  return `${frame}\n`;
}

/** A comment line: ignored by clients, keeps proxies from closing an idle stream. */
export function formatSseComment(text: string): string {
  return `: ${text.replace(/[\r\n]+/g, ' ')}\n\n`;
}

function singleLine(value: string, field: string): string {
  if (/[\r\n]/.test(value)) throw new Error(`SSE ${field} must be a single line`);
  return value;
}

/**
 * Parses a Last-Event-ID (or `?after=`) value: a non-negative integer event seq, or undefined
 * when absent or empty. Anything else is null, so the caller can answer 400 instead of silently
 * replaying from the start.
 */
export function parseEventCursor(value: string | undefined | null): number | undefined | null {
  if (value === undefined || value === null || value.trim() === '') return undefined;
  const trimmed = value.trim();
  if (!/^\d{1,15}$/.test(trimmed)) return null;
  return Number(trimmed);
}

export interface SseStreamOptions {
  /** Interval of `: keepalive` comments, in ms. */
  keepaliveMs: number;
  /** Called once when the stream ends, whichever side ended it. */
  onClose?: () => void;
}

/**
 * An open `text/event-stream` answer. Writes respect backpressure (a slow client slows the
 * producer instead of growing memory); `signal` aborts when the client disconnects or the stream
 * is closed, so whatever feeds it can stop.
 */
export class SseStream {
  private readonly controller = new AbortController();
  private readonly keepalive: NodeJS.Timeout;

  constructor(
    private readonly response: ServerResponse,
    options: SseStreamOptions,
  ) {
    response.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
    });
    response.flushHeaders();
    this.keepalive = setInterval(() => {
      if (!this.closed) response.write(formatSseComment('keepalive'));
    }, options.keepaliveMs);
    response.on('close', () => {
      clearInterval(this.keepalive);
      if (!this.controller.signal.aborted) {
        this.controller.abort();
        options.onClose?.();
      }
    });
  }

  /** Aborted when the stream has ended, for either reason. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get closed(): boolean {
    return this.controller.signal.aborted || this.response.writableEnded || this.response.destroyed;
  }

  /** Writes an event; resolves when the client can take more. */
  async send(event: SseEvent): Promise<void> {
    await this.write(formatSseEvent(event));
  }

  async comment(text: string): Promise<void> {
    await this.write(formatSseComment(text));
  }

  /** Ends the stream (the client sees the connection close). */
  close(): void {
    clearInterval(this.keepalive);
    if (!this.response.writableEnded) this.response.end();
  }

  private write(text: string): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.response.write(text)) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.response.off('drain', done);
        this.response.off('close', done);
        resolve();
      };
      this.response.on('drain', done);
      this.response.on('close', done);
    });
  }
}
