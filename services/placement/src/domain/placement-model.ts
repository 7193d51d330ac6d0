import type { Prices } from '@actor/kit';

/**
 * The placer's own vocabulary. The service decodes registry adapters and stored signals into these
 * shapes, so the rules below never see gRPC or SQL (and a simulator can run them as they are).
 */

export type ModeName = 'cheapest' | 'balanced' | 'best' | 'fastest' | 'private';
export type PurposeName = 'work' | 'judge';

/** Whose infrastructure a backend runs on, as the registry's trust class names it. */
export type TrustName = 'first-party' | 'user-owned' | 'partner' | 'community' | 'external';

/** One declared backend with its current rate card. */
export interface Backend {
  type: string;
  displayName: string;
  modelFamily: string;
  /** Task classes and features it serves. */
  capabilities: string[];
  /** Zero means "not declared". */
  contextTokens: number;
  maxOutputTokens: number;
  timeoutMs: number;
  trust: TrustName;
  /** 1 (basic) .. 5 (frontier). */
  qualityTier: number;
  requiresByoKey: boolean;
  demo: boolean;
  ready: boolean;
  readyReason: string;
  /** Absent when no rate card was ever put: such a backend cannot be priced, so it is not placed. */
  rateCard?: Prices & { revision: number };
}

/** What placement has learned about one backend for one task class (one `signals` row). */
export interface SignalState {
  backend: string;
  taskClass: string;
  samples: number;
  successes: number;
  verifiedSuccesses: number;
  /** Work outcomes (judge calls excluded), counted since the backend was first seen. */
  workSamples: number;
  /**
   * Verified work answers and work outcomes, exponentially weighted (each new work outcome first
   * multiplies both by 1 - 1/SUCCESS_WINDOW): the evidence the verified-success estimate is made of, so
   * that a backend whose quality changes (a model update) is re-learned within about SUCCESS_WINDOW
   * outcomes instead of being averaged over its whole history.
   */
  recentVerified: number;
  recentWork: number;
  /** The rolling latency window, oldest first, in ms. */
  latenciesMs: number[];
  costSamples: number;
  totalCostMicroUsd: number;
  /**
   * Cost samples and their sum, exponentially weighted (each new sample first multiplies both by
   * 1 - 1/COST_WINDOW): the measured cost per call is their ratio, so a price change is learned within
   * about COST_WINDOW calls instead of being averaged over the backend's whole history.
   */
  recentCostSamples: number;
  recentCostMicroUsd: number;
  consecutiveFailures: number;
  openedAt: Date | null;
  probeStartedAt: Date | null;
  updatedAt: Date;
}

/** The work to place, decoded from PlaceRequest. */
export interface PlacementRequest {
  projectId: string;
  taskId: string;
  taskClass: string;
  requiredCapabilities: string[];
  estimatedInputTokens: number;
  mode: ModeName;
  purpose: PurposeName;
  taskBudgetLeftMicroUsd: number;
  dayBudgetLeftMicroUsd: number;
  /** Empty: any backend (except user-owned ones, which must be named). */
  allowedBackends: string[];
  excludeBackends: string[];
  escalateFromBackend?: string;
  avoidModelFamily?: string;
  /** Empty: slot availability unknown, nobody excluded for it. */
  availableBackends: string[];
}

/** One signal's part of a candidate's score. */
export interface SignalScore {
  name: string;
  value: number;
  contribution: number;
}

export type CircuitStateName = 'closed' | 'open' | 'half-open';

/** A backend that passed every hard filter, with its estimates and its score under the objective. */
export interface Candidate {
  backend: string;
  modelFamily: string;
  qualityTier: number;
  demo: boolean;
  score: number;
  signals: SignalScore[];
  expectedCostMicroUsd: number;
  worstCaseCostMicroUsd: number;
  expectedLatencyMs: number;
  successEstimate: number;
  rateCardRevision: number;
  circuitState: CircuitStateName;
}

export type ReasonCode =
  | 'not_ready'
  | 'not_allowed'
  | 'excluded'
  | 'capability'
  | 'limits'
  | 'trust'
  | 'health'
  | 'budget'
  | 'byo_key'
  | 'no_slot'
  | 'not_stronger'
  | 'same_family';

/** A backend removed by a hard filter. */
export interface Exclusion {
  backend: string;
  reasonCode: ReasonCode;
  reason: string;
}
