/** One server-sent event as received. */
export interface ReceivedEvent {
  id?: string;
  event: string;
  data: string;
}

/**
 * Reads an SSE response until an event named `until` arrives (then closes), or until `timeoutMs`.
 * Parses the wire format itself (fields, multi-line data, comments) so tests see exactly what a
 * browser's EventSource would.
 */
export async function readEvents(
  url: string,
  headers: Record<string, string>,
  options: { until?: string; timeoutMs?: number; maxEvents?: number } = {},
): Promise<{ events: ReceivedEvent[]; comments: string[]; status: number; contentType: string | null }> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), options.timeoutMs ?? 60_000);
  const events: ReceivedEvent[] = [];
  const comments: string[] = [];
  const response = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers }, signal: controller.signal });
  try {
    if (!response.ok || !response.body) {
      return { events, comments, status: response.status, contentType: response.headers.get('content-type') };
    }
    const decoder = new TextDecoder();
    let buffer = '';
    let current: Partial<ReceivedEvent> & { dataLines: string[] } = { dataLines: [] };
    const reader = response.body.getReader();
    reading: for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let newline = buffer.indexOf('\n');
      while (newline >= 0) {
        const line = buffer.slice(0, newline).replace(/\r$/, '');
        buffer = buffer.slice(newline + 1);
        newline = buffer.indexOf('\n');
        if (line === '') {
          if (current.dataLines.length > 0 || current.event) {
            const event = { id: current.id, event: current.event ?? 'message', data: current.dataLines.join('\n') };
            events.push(event);
            if (event.event === options.until || events.length === options.maxEvents) break reading;
          }
          current = { dataLines: [] };
        } else if (line.startsWith(':')) {
          comments.push(line.slice(1).trim());
        } else {
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'id') current.id = value;
          else if (field === 'event') current.event = value;
          else if (field === 'data') current.dataLines.push(value);
        }
      }
    }
    return { events, comments, status: response.status, contentType: response.headers.get('content-type') };
  } catch (error) {
    if (controller.signal.aborted) return { events, comments, status: response.status, contentType: response.headers.get('content-type') };
    throw error;
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
}
