import { fail } from '@actor/kit';

/** Subjects allowed to write rate cards. Prices are a human's promise to users; never an AI's. */
const allowedReviewerKinds = new Set(['human', 'operator']);

/** Refuses a rate-card write from an agent or AI subject, and malformed prices. */
export function assertRateCardWritable(
  reviewerKind: string,
  reviewer: string,
  prices: number[],
  source: string,
): void {
  if (!allowedReviewerKinds.has(reviewerKind)) {
    throw fail.denied(
      `rate cards are written by people or operators only; reviewer kind "${reviewerKind || '(empty)'}" is refused`,
      'actor.rate_card.ai_subject',
    );
  }
  if (!reviewer.trim()) throw fail.invalid('rate card needs a reviewer');
  if (!source.trim()) throw fail.invalid('rate card needs a source');
  if (prices.some((price) => !Number.isInteger(price) || price < 0)) {
    throw fail.invalid('rate-card prices are non-negative integer micro-USD');
  }
}

/** Capability names an adapter may declare. */
export const knownCapabilities = new Set([
  'code',
  'research',
  'action',
  'general',
  'vision',
  'tools',
  'structured-output',
]);
