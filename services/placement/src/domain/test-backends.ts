import type { Backend, PlacementRequest } from './placement-model.js';

/** Test fixtures for the domain's unit tests: a plain backend and request, overridable per test. */
export function testBackend(type: string, overrides: Partial<Backend> = {}): Backend {
  return {
    type,
    displayName: type,
    modelFamily: 'alpha',
    capabilities: ['general', 'code'],
    contextTokens: 8_000,
    maxOutputTokens: 1_000,
    timeoutMs: 10_000,
    trust: 'first-party',
    qualityTier: 2,
    requiresByoKey: false,
    demo: false,
    ready: true,
    readyReason: '',
    rateCard: { revision: 1, inputMicroUsdPerMtok: 1_000_000, outputMicroUsdPerMtok: 2_000_000, microUsdPerSecond: 0, microUsdPerTask: 0 },
    ...overrides,
  };
}

export function testRequest(overrides: Partial<PlacementRequest> = {}): PlacementRequest {
  return {
    projectId: 'prj_1',
    taskId: 'tsk_1',
    taskClass: 'code',
    requiredCapabilities: [],
    estimatedInputTokens: 1_000,
    mode: 'balanced',
    purpose: 'work',
    taskBudgetLeftMicroUsd: 1_000_000,
    dayBudgetLeftMicroUsd: 10_000_000,
    allowedBackends: [],
    excludeBackends: [],
    availableBackends: [],
    ...overrides,
  };
}
