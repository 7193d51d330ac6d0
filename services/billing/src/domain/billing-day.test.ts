import { describe, expect, it } from 'vitest';
import { Status } from 'nice-grpc';
import { DomainError, errorKinds } from '@actor/kit';
import { billingDay, requestedDay } from './billing-day.js';

describe('billingDay', () => {
  it('changes at UTC midnight, not at local midnight', () => {
    expect(billingDay(new Date('2025-03-01T23:59:59.999Z'))).toBe('2025-03-01');
    expect(billingDay(new Date('2025-03-02T00:00:00.000Z'))).toBe('2025-03-02');
    // 01:30 in Paris on the 2nd is still the 1st in UTC.
    expect(billingDay(new Date('2025-03-02T01:30:00+02:00'))).toBe('2025-03-01');
    // 20:00 in New York on the 1st is already the 2nd in UTC.
    expect(billingDay(new Date('2025-03-01T20:00:00-05:00'))).toBe('2025-03-02');
  });

  it('handles the last day of a leap February', () => {
    expect(billingDay(new Date('2024-02-29T12:00:00Z'))).toBe('2024-02-29');
  });
});

describe('requestedDay', () => {
  it('uses today when no day is asked for', () => {
    expect(requestedDay('', '2025-03-01')).toBe('2025-03-01');
  });

  it('accepts a calendar day', () => {
    expect(requestedDay('2024-02-29', '2025-03-01')).toBe('2024-02-29');
  });

  it.each(['2025-02-29', '2025-13-01', '2025-3-1', 'yesterday', '2025-03-01T00:00:00Z'])(
    'refuses %s as INVALID_ARGUMENT',
    (day) => {
      let thrown: unknown;
      try {
        requestedDay(day, '2025-03-01');
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(DomainError);
      expect(errorKinds[(thrown as DomainError).kind]).toBe(Status.INVALID_ARGUMENT);
    },
  );
});
