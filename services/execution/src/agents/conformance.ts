import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { priceUsage } from '@actor/kit';
import type { Agent, AgentEvent, AgentRequest, AgentResult, AdapterRateCard } from './agent.js';

/** What one adapter brings to the shared conformance suite. */
export interface ConformanceSubject {
  /** A working agent. */
  agent: Agent;
  /** A request that succeeds with some output. */
  request(executionId: string): AgentRequest;
  /** A request that streams output for several seconds before finishing, for cancel and timeout. */
  slowRequest(executionId: string): AgentRequest;
  /** The adapter's rate card, to check that a normal run costs something. */
  rateCard: AdapterRateCard;
  /** False for adapters with no tokens to count (script): usage is then run time alone. Default true. */
  reportsTokens?: boolean;
  /** For adapters that declare `structured-output`: a request and a schema it can answer. */
  structured?: { request(executionId: string): AgentRequest; jsonSchema: Record<string, unknown> };
  /** An agent whose backend is unreachable or misconfigured, and what its error must mention. */
  broken: { agent: Agent; request: AgentRequest; errorMatches: RegExp };
  /** Releases servers the subject started. */
  close?(): Promise<void>;
}

/** Cancel must land well within this, in ms (the SPI's "within a second"). */
const cancelWithinMs = 1_000;

/**
 * The suite every adapter passes: streamed output, usage and cost, cancel within a second (by
 * signal and by `cancel(executionId)`), timeout, structured output where declared, and a clear
 * error for a broken backend. Adapters never reject: each case also proves the promise resolves.
 */
export function runAgentConformance(name: string, makeAgentAndRequest: () => Promise<ConformanceSubject> | ConformanceSubject): void {
  describe(`${name}: Agent SPI conformance`, () => {
    let subject: ConformanceSubject;
    let sequence = 0;
    const nextId = (label: string) => `exe_conformance_${label}_${(sequence += 1)}`;

    beforeAll(async () => {
      subject = await makeAgentAndRequest();
    });
    afterAll(async () => {
      await subject?.close?.();
    });

    it('streams output events that add up to the output, and reports success with usage that costs something', async () => {
      const events: AgentEvent[] = [];
      const result = await subject.agent.execute(subject.request(nextId('normal')), new AbortController().signal, (event) => events.push(event));
      expect(result.errorMessage).toBeUndefined();
      expect(result.success).toBe(true);
      expect(result.errorKind).toBeUndefined();
      const streamed = events.flatMap((event) => (event.kind === 'output' ? [event.text] : []));
      expect(streamed.length).toBeGreaterThan(0);
      expect(streamed.join('')).toBe(result.output);
      expect(result.output.length).toBeGreaterThan(0);
      if (subject.reportsTokens === false) {
        expect(result.inputTokens).toBe(0);
        expect(result.outputTokens).toBe(0);
      } else {
        expect(result.inputTokens).toBeGreaterThan(0);
        expect(result.outputTokens).toBeGreaterThan(0);
      }
      expect(result.durationMs).toBeGreaterThanOrEqual(0);
      const cost = priceUsage(subject.rateCard, { inputTokens: result.inputTokens, outputTokens: result.outputTokens, durationMs: result.durationMs, calls: 1 });
      expect(cost).toBeGreaterThan(0);
    });

    it('stops within a second when the caller aborts mid-run, as cancelled, keeping what was streamed', async () => {
      const controller = new AbortController();
      const firstOutput = signalled();
      const running = subject.agent.execute(subject.slowRequest(nextId('abort')), controller.signal, (event) => {
        if (event.kind === 'output') firstOutput.fire();
      });
      await firstOutput.fired;
      const abortedAt = Date.now();
      controller.abort();
      const result = await running;
      expect(Date.now() - abortedAt).toBeLessThan(cancelWithinMs);
      expectStopped(result, 'cancelled');
      expect(result.output.length).toBeGreaterThan(0);
    });

    it('stops within a second on cancel(executionId)', async () => {
      const executionId = nextId('cancel');
      const firstOutput = signalled();
      const running = subject.agent.execute(subject.slowRequest(executionId), new AbortController().signal, (event) => {
        if (event.kind === 'output') firstOutput.fire();
      });
      await firstOutput.fired;
      const cancelledAt = Date.now();
      await subject.agent.cancel(executionId);
      const result = await running;
      expect(Date.now() - cancelledAt).toBeLessThan(cancelWithinMs);
      expectStopped(result, 'cancelled');
    });

    it('does not start a run whose signal is already aborted', async () => {
      const controller = new AbortController();
      controller.abort();
      const result = await subject.agent.execute(subject.request(nextId('pre-aborted')), controller.signal, () => {});
      expectStopped(result, 'cancelled');
    });

    it('fails with kind timeout when the run outlasts request.timeoutMs', async () => {
      const request = { ...subject.slowRequest(nextId('timeout')), timeoutMs: 300 };
      const result = await subject.agent.execute(request, new AbortController().signal, () => {});
      expectStopped(result, 'timeout');
      expect(result.errorMessage).toMatch(/300 ms/);
    });

    it('returns a clear error, never a rejection, when the backend is unreachable or misconfigured', async () => {
      const { agent, request, errorMatches } = subject.broken;
      const result = await agent.execute(request, new AbortController().signal, () => {});
      expect(result.success).toBe(false);
      expect(['backend', 'unavailable']).toContain(result.errorKind);
      expect(result.errorMessage).toMatch(errorMatches);
    });

    it('reports its health as rows with a status and a message', async () => {
      const rows = await subject.agent.healthCheck();
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) {
        expect(['ok', 'warn', 'fail']).toContain(row.status);
        expect(row.message.length).toBeGreaterThan(0);
      }
      expect(rows.every((row) => row.status === 'ok')).toBe(true);
    });

    it("returns a structured value with the schema's required properties", async (context) => {
      const structured = subject.structured;
      if (!structured) return context.skip('the adapter declares no structured output');
      const result = await subject.agent.executeWithSchema(structured.request(nextId('schema')), structured.jsonSchema, new AbortController().signal);
      expect(result.errorMessage).toBeUndefined();
      expect(result.success).toBe(true);
      expect(typeof result.structured).toBe('object');
      const required = (structured.jsonSchema.required as string[] | undefined) ?? [];
      for (const property of required) expect(result.structured).toHaveProperty(property);
      expect(result.inputTokens).toBeGreaterThan(0);
    });

    it('stops a structured call on timeout too', async (context) => {
      if (!subject.structured) return context.skip('the adapter declares no structured output');
      const request = { ...subject.slowRequest(nextId('schema-timeout')), timeoutMs: 300 };
      const result = await subject.agent.executeWithSchema(request, subject.structured.jsonSchema, new AbortController().signal);
      expectStopped(result, 'timeout');
      expect(result.structured).toBeUndefined();
    });
  });
}

/** A promise with its resolve function, for "wait until the first output event". */
function signalled(): { fired: Promise<void>; fire: () => void } {
  let fire = () => {};
  const fired = new Promise<void>((resolve) => (fire = resolve));
  return { fired, fire };
}

function expectStopped(result: AgentResult, kind: 'cancelled' | 'timeout'): void {
  expect(result.success).toBe(false);
  expect(result.errorKind).toBe(kind);
  expect(result.errorMessage).toBeTruthy();
}
