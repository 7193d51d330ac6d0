/**
 * A small deterministic generator (mulberry32) seeded from any string, so that a scenario replays
 * the same world on every run and every policy meets the same draws (common random numbers).
 */
export class SeededRandom {
  private state: number;

  constructor(seed: string | number) {
    // FNV-1a over the seed's text gives a well-spread 32-bit start state.
    let hash = 0x811c9dc5;
    for (const character of String(seed)) {
      hash ^= character.charCodeAt(0);
      hash = Math.imul(hash, 0x01000193) >>> 0;
    }
    this.state = hash;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let value = this.state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4_294_967_296;
  }

  /** Standard normal (Box-Muller). */
  normal(): number {
    const first = Math.max(this.next(), Number.EPSILON);
    return Math.sqrt(-2 * Math.log(first)) * Math.cos(2 * Math.PI * this.next());
  }

  /** Log-normal with the given median and sigma of the logarithm. */
  logNormal(median: number, sigma: number): number {
    return median * Math.exp(sigma * this.normal());
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }
}
