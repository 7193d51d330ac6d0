/** Converts between database values and the `Date`s ts-proto uses for google.protobuf.Timestamp. */
export function toDate(value: Date | string | null | undefined): Date | undefined {
  if (value === null || value === undefined) return undefined;
  return value instanceof Date ? value : new Date(value);
}
