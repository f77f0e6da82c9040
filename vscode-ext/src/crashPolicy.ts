// When to restart a crashed language server. Pure: the clock is an argument.

export interface CrashDecision {
  restart: boolean;
  /** crashes inside the window, this one included */
  count: number;
}

/** Restart after a crash unless `maxCrashes` happened within `windowMs` (a crash loop). */
export class CrashPolicy {
  private times: number[] = [];
  constructor(
    readonly maxCrashes = 5,
    readonly windowMs = 3 * 60 * 1000,
  ) {}

  onCrash(nowMs: number): CrashDecision {
    this.times = this.times.filter((t) => nowMs - t < this.windowMs);
    this.times.push(nowMs);
    return { restart: this.times.length < this.maxCrashes, count: this.times.length };
  }

  reset(): void {
    this.times = [];
  }
}
