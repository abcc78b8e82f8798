// A token bucket per client address: `burst` requests at once, then `perMinute` on average.
// Buckets that have refilled are forgotten, so a scan of many addresses costs no memory for long.

export interface RateLimit {
  burst: number;
  perMinute: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

export class RateLimiter {
  #buckets = new Map<string, Bucket>();
  #lastSweep = Date.now();

  constructor(private readonly limit: RateLimit) {}

  /** Takes one token for `key`; returns 0 when allowed, else the seconds until one is free. */
  take(key: string, now = Date.now()): number {
    this.#sweep(now);
    const refill = this.limit.perMinute / 60_000;
    const bucket = this.#buckets.get(key) ?? { tokens: this.limit.burst, at: now };
    bucket.tokens = Math.min(this.limit.burst, bucket.tokens + (now - bucket.at) * refill);
    bucket.at = now;
    this.#buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.ceil((1 - bucket.tokens) / refill / 1000);
  }

  #sweep(now: number): void {
    if (now - this.#lastSweep < 60_000) return;
    this.#lastSweep = now;
    const refill = this.limit.perMinute / 60_000;
    for (const [key, b] of this.#buckets) {
      if (b.tokens + (now - b.at) * refill >= this.limit.burst) this.#buckets.delete(key);
    }
  }
}
