import { fail, utcDay } from '@actor/kit';

/**
 * The day a reservation counts against: the UTC day of the database clock when it is made, so every
 * replica agrees on where midnight falls whatever its own clock or time zone says.
 */
export function billingDay(databaseNow: Date): string {
  return utcDay(databaseNow);
}

const dayPattern = /^(\d{4})-(\d{2})-(\d{2})$/;

/** A requested `YYYY-MM-DD` day (empty means `today`); INVALID_ARGUMENT when it is not a calendar day. */
export function requestedDay(day: string, today: string): string {
  if (day === '') return today;
  const match = dayPattern.exec(day);
  if (match) {
    const date = new Date(Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])));
    // Date.UTC rolls 2025-02-30 over to March; a real day survives the round trip.
    if (utcDay(date) === day) return day;
  }
  throw fail.invalid(`day must be a UTC calendar day written YYYY-MM-DD, got "${day}"`);
}
