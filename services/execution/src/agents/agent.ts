import type { Prices } from '@actor/kit';
import type { Adapter, AdapterLimits } from '@actor/proto/registry';
import type { Agent } from '@actor/engine';

export type { Agent, AgentCheckResult, AgentEvent, AgentRequest, AgentResult } from '@actor/engine';

/** Who writes the rate cards of built-in and env-discovered adapters: an operator process, never an AI. */
export const bootstrapReviewer = 'actor-bootstrap';

/** The run time an adapter allows when neither the caller nor the declaration sets one, in ms. */
export const defaultTimeoutMs = 120_000;

/** What an adapter tells the registry about itself; the rate card travels separately (PutRateCard). */
export type AdapterDeclaration = Omit<Adapter, 'rateCard' | 'updateTime'>;

/** The prices an adapter starts with, all integer micro-USD, and where they come from. */
export interface AdapterRateCard extends Prices {
  /** Where the prices come from (a vendor page, an operator setting, "demo: fictional prices ..."). */
  source: string;
  /** Who vouches for them: `actor-bootstrap` for built-in and env-discovered adapters. */
  reviewer: string;
}

/** One adapter the execution service can run: its declaration, its prices and a factory for the Agent. */
export interface AdapterDefinition {
  declaration: AdapterDeclaration;
  rateCard: AdapterRateCard;
  /**
   * Whether start-up makes a default agent slot for it (default true). False for adapters that only
   * run on slots an admin configured (`script` needs a command), where a bare slot could only fail.
   */
  defaultSlot?: boolean;
  /**
   * A new Agent for this adapter type. `cancel(executionId)` reaches only runs started on the same
   * instance, so a caller keeps one instance per type (the AbortSignal of `execute` works on any).
   */
  create(): Agent;
}

/** A caller's limits for one call; absent, zero or negative values mean "no limit of my own". */
export interface CallerLimits {
  timeoutMs?: number;
  maxOutputTokens?: number;
  contextTokens?: number;
}

/** The limits one call runs under after merging. `undefined` means neither side sets one. */
export interface EffectiveLimits {
  /** Always set: falls back to `defaultTimeoutMs`. */
  timeoutMs: number;
  maxOutputTokens?: number;
  contextTokens?: number;
}

/** The stricter of two limits, where a missing, zero, negative or non-finite value is "not set". */
export function stricterLimit(caller: number | undefined, declared: number | undefined): number | undefined {
  const set = [caller, declared].filter(
    (value): value is number => value !== undefined && Number.isFinite(value) && value > 0,
  );
  return set.length === 0 ? undefined : Math.min(...set);
}

/** Merges a caller's limits with an adapter's declared ones, the stricter of each winning. */
export function mergeLimits(caller: CallerLimits, declared: AdapterLimits | undefined): EffectiveLimits {
  return {
    timeoutMs: stricterLimit(caller.timeoutMs, declared?.timeoutMs) ?? defaultTimeoutMs,
    maxOutputTokens: stricterLimit(caller.maxOutputTokens, declared?.maxOutputTokens),
    contextTokens: stricterLimit(caller.contextTokens, declared?.contextTokens),
  };
}
