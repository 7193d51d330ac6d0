import { describe, expect, it } from 'vitest';
import { filterBackends, type FilterContext } from './candidate-filter.js';
import type { Backend, PlacementRequest, SignalState } from './placement-model.js';
import { testBackend as backend, testRequest as request } from './test-backends.js';
import { emptySignal } from './signal-update.js';

const now = new Date('2030-01-01T00:00:00Z');

function context(signals: SignalState[] = []): FilterContext {
  return { signals: new Map(signals.map((signal) => [signal.backend, signal])), now, circuitCooldownMs: 30_000 };
}

function reasons(backends: Backend[], placement: PlacementRequest, filterContext = context()) {
  const result = filterBackends(backends, placement, filterContext);
  return {
    eligible: result.eligible.map((item) => item.backend.type),
    excluded: Object.fromEntries(result.exclusions.map((item) => [item.backend, item.reasonCode])),
    result,
  };
}

describe('filterBackends', () => {
  it('passes a backend that satisfies every filter', () => {
    expect(reasons([backend('a')], request()).eligible).toEqual(['a']);
  });

  it('excludes backends the caller already tried, not allowed, or not ready', () => {
    const outcome = reasons(
      [backend('tried'), backend('other'), backend('down', { ready: false, readyReason: 'binary missing' }), backend('ok')],
      request({ excludeBackends: ['tried'], allowedBackends: ['tried', 'down', 'ok'] }),
    );
    expect(outcome.excluded).toEqual({ tried: 'excluded', other: 'not_allowed', down: 'not_ready' });
    expect(outcome.result.exclusions.find((item) => item.backend === 'down')?.reason).toContain('binary missing');
    expect(outcome.eligible).toEqual(['ok']);
  });

  it('requires the task class and every required capability', () => {
    const outcome = reasons(
      [backend('text', { capabilities: ['code'] }), backend('eyes', { capabilities: ['code', 'vision'] }), backend('docs', { capabilities: ['research', 'vision'] })],
      request({ requiredCapabilities: ['vision'] }),
    );
    expect(outcome.excluded).toEqual({ text: 'capability', docs: 'capability' });
    expect(outcome.result.exclusions[0]!.reason).toBe('lacks vision');
    expect(outcome.eligible).toEqual(['eyes']);
  });

  it('excludes a backend whose context cannot hold the prompt', () => {
    const outcome = reasons([backend('small', { contextTokens: 500 }), backend('undeclared', { contextTokens: 0 })], request());
    expect(outcome.excluded).toEqual({ small: 'limits' });
    expect(outcome.eligible).toEqual(['undeclared']);
  });

  it('private mode admits first-party backends and user-owned ones only when named; fails closed', () => {
    const backends = [
      backend('local'),
      backend('mine', { trust: 'user-owned' }),
      backend('vendor', { trust: 'partner' }),
      backend('unknown', { trust: 'external' }),
    ];
    expect(reasons(backends, request({ mode: 'private' })).excluded).toEqual({ mine: 'trust', vendor: 'trust', unknown: 'trust' });
    expect(reasons(backends, request({ mode: 'private', allowedBackends: ['mine'] })).eligible).toEqual(['mine']);
    expect(reasons([backend('vendor', { trust: 'partner' })], request({ mode: 'private' })).eligible).toEqual([]);
  });

  it('places user-owned backends in any mode only when the task names them', () => {
    const backends = [backend('mine', { trust: 'user-owned' }), backend('vendor', { trust: 'external' })];
    expect(reasons(backends, request({ mode: 'cheapest' })).eligible).toEqual(['vendor']);
    expect(reasons(backends, request({ mode: 'cheapest', allowedBackends: ['mine', 'vendor'] })).eligible).toEqual(['mine', 'vendor']);
  });

  it('excludes backends that require a bring-your-own key and those without a pool slot', () => {
    const outcome = reasons(
      [backend('byo', { requiresByoKey: true }), backend('slotless'), backend('slotted')],
      request({ availableBackends: ['byo', 'slotted'] }),
    );
    expect(outcome.excluded).toEqual({ byo: 'byo_key', slotless: 'no_slot' });
  });

  it('excludes a backend whose circuit is open, and a half-open one whose probe is taken', () => {
    const open = { ...emptySignal('open', 'code', now), consecutiveFailures: 3, openedAt: new Date(now.getTime() - 1_000) };
    const halfOpen = { ...emptySignal('half', 'code', now), consecutiveFailures: 3, openedAt: new Date(now.getTime() - 60_000) };
    const probing = { ...halfOpen, backend: 'probing', probeStartedAt: new Date(now.getTime() - 1_000) };
    const outcome = reasons([backend('open'), backend('half'), backend('probing')], request(), context([open, halfOpen, probing]));
    expect(outcome.excluded).toEqual({ open: 'health', probing: 'health' });
    expect(outcome.result.exclusions[0]!.reason).toContain('half-open in 29 s');
    expect(outcome.result.eligible.map((item) => item.circuit.state)).toEqual(['half-open']);
    const taken = filterBackends([backend('half')], request(), { ...context([halfOpen]), probesTaken: new Set(['half']) });
    expect(taken.exclusions.map((item) => item.reasonCode)).toEqual(['health']);
  });

  it('excludes a backend whose worst case exceeds the task or the day budget, or that has no rate card', () => {
    // worst case: 1000 input tokens at $1/Mtok + 1000 output at $2/Mtok = 3000 micro-USD.
    const backends = [backend('priced'), backend('unpriced', { rateCard: undefined })];
    expect(reasons(backends, request({ taskBudgetLeftMicroUsd: 3_000 })).excluded).toEqual({ unpriced: 'not_ready' });
    const tight = reasons(backends, request({ taskBudgetLeftMicroUsd: 2_999 }));
    expect(tight.excluded).toEqual({ priced: 'budget', unpriced: 'not_ready' });
    expect(tight.result.exclusions[0]!.reason).toBe('worst case $0.003 (3000 micro-USD) exceeds the $0.002999 (2999 micro-USD) left for the task');
    expect(reasons(backends, request({ dayBudgetLeftMicroUsd: 100 })).result.exclusions[0]!.reason).toContain('left today');
  });

  it('an escalation admits only strictly stronger backends', () => {
    const outcome = reasons(
      [backend('weak', { qualityTier: 1 }), backend('failed', { qualityTier: 2 }), backend('peer', { qualityTier: 2 }), backend('strong', { qualityTier: 4 })],
      request({ escalateFromBackend: 'failed', excludeBackends: ['failed'] }),
    );
    expect(outcome.excluded).toEqual({ weak: 'not_stronger', failed: 'excluded', peer: 'not_stronger' });
    expect(outcome.eligible).toEqual(['strong']);
  });

  it('a judge avoids the worker family when another is left, and falls back to it otherwise', () => {
    const backends = [backend('alpha-1'), backend('beta-1', { modelFamily: 'beta' })];
    const avoided = reasons(backends, request({ purpose: 'judge', avoidModelFamily: 'alpha' }));
    expect(avoided.excluded).toEqual({ 'alpha-1': 'same_family' });
    expect(avoided.result.sameFamilyFallback).toBeUndefined();
    const fallback = reasons([backends[0]!], request({ purpose: 'judge', avoidModelFamily: 'alpha' }));
    expect(fallback.eligible).toEqual(['alpha-1']);
    expect(fallback.result.sameFamilyFallback).toBe('alpha');
  });
});
