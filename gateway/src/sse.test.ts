import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { formatSseComment, formatSseEvent, parseEventCursor, SseStream } from './sse.js';

describe('SSE framing', () => {
  it('frames id, event and data, ending with a blank line', () => {
    expect(formatSseEvent({ id: 3, event: 'state', data: '{"state":"running"}' })).toBe(
      'id: 3\nevent: state\ndata: {"state":"running"}\n\n',
    );
  });

  it('splits multi-line data so a payload cannot end the event or inject fields', () => {
    expect(formatSseEvent({ event: 'output', data: 'line one\r\nid: 99\n\nevent: end' })).toBe(
      'event: output\ndata: line one\ndata: id: 99\ndata: \ndata: event: end\n\n',
    );
  });

  it('refuses a line break in id or event', () => {
    expect(() => formatSseEvent({ id: '1\n2', data: '{}' })).toThrow();
    expect(() => formatSseEvent({ event: 'a\rb', data: '{}' })).toThrow();
  });

  it('frames comments on one line', () => {
    expect(formatSseComment('keepalive')).toBe(': keepalive\n\n');
    expect(formatSseComment('a\nb')).toBe(': a b\n\n');
  });

  it('reads Last-Event-ID: absent, a seq, or invalid', () => {
    expect(parseEventCursor(undefined)).toBeUndefined();
    expect(parseEventCursor('')).toBeUndefined();
    expect(parseEventCursor(' 42 ')).toBe(42);
    expect(parseEventCursor('0')).toBe(0);
    expect(parseEventCursor('-1')).toBeNull();
    expect(parseEventCursor('abc')).toBeNull();
    expect(parseEventCursor('1.5')).toBeNull();
  });
});

describe('SseStream over HTTP', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

  async function serve(onStream: (stream: SseStream) => void): Promise<string> {
    server = createServer((_request, response) => onStream(new SseStream(response, { keepaliveMs: 20 })));
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  }

  it('sends the event-stream headers, events and keepalive comments', async () => {
    const url = await serve((stream) => {
      void stream.send({ id: 1, event: 'state', data: '{}' });
      setTimeout(() => stream.close(), 90);
    });
    const response = await fetch(url);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(response.headers.get('cache-control')).toBe('no-cache');
    expect(response.headers.get('x-accel-buffering')).toBe('no');
    const text = await response.text();
    expect(text.startsWith('id: 1\nevent: state\ndata: {}\n\n')).toBe(true);
    expect(text).toContain(': keepalive\n\n');
  });

  it('aborts its signal when the client disconnects', async () => {
    let aborted!: Promise<void>;
    const url = await serve((stream) => {
      aborted = new Promise((resolve) => stream.signal.addEventListener('abort', () => resolve()));
    });
    await new Promise<void>((resolve) => {
      const request = httpRequest(url, (response) => {
        response.once('data', () => {
          request.destroy();
          resolve();
        });
      });
      request.end();
    });
    await expect(aborted).resolves.toBeUndefined();
  });
});
