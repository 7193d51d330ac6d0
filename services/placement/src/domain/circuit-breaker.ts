import type { CircuitStateName, SignalState } from './placement-model.js';

/** Failures in a row that open a backend's circuit for a task class. */
export const FAILURES_TO_OPEN = 3;

export interface CircuitView {
  state: CircuitStateName;
  /** Half-open and no probe in flight: the next placement may send one call to test the backend. */
  probeAvailable: boolean;
  /** When an open circuit turns half-open. */
  halfOpenAt?: Date;
}

/** Shared: placement asks for every candidate's circuit in every decision, and most are closed. */
const closed: CircuitView = Object.freeze({ state: 'closed', probeAvailable: false });

/**
 * The circuit of one backend x task class at `now`:
 * - closed: fewer than FAILURES_TO_OPEN failures in a row (or a success since);
 * - open: opened less than `cooldownMs` ago; not placed;
 * - half-open: the cooldown has passed; exactly one probe call may be placed. A probe that never
 *   reports back is given up after another cooldown, so a lost probe cannot keep the circuit shut.
 */
export function circuitState(
  signal: Pick<SignalState, 'openedAt' | 'probeStartedAt'> | undefined,
  now: Date,
  cooldownMs: number,
): CircuitView {
  if (!signal?.openedAt) return closed;
  const halfOpenAt = new Date(signal.openedAt.getTime() + cooldownMs);
  if (now < halfOpenAt) return { state: 'open', probeAvailable: false, halfOpenAt };
  const probeInFlight =
    signal.probeStartedAt !== null && now.getTime() - signal.probeStartedAt.getTime() < cooldownMs;
  return { state: 'half-open', probeAvailable: !probeInFlight, halfOpenAt };
}
