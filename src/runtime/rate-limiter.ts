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

  private readonly limit: RateLimit;
  constructor(limit: RateLimit) {
    this.limit = limit;
  }

  /** Takes one token for `key`; returns 0 when allowed, else the seconds until one is free. */
  take(key: string, now = Date.now()): number {
    const bucket = this.#refilled(key, now);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return this.#secondsUntilOne(bucket);
  }

  /**
   * The seconds until `key` has a token, 0 when it has one now, taking nothing: for limits on
   * failures, checked before a request and taken only when it fails.
   */
  wait(key: string, now = Date.now()): number {
    const bucket = this.#refilled(key, now);
    return bucket.tokens >= 1 ? 0 : this.#secondsUntilOne(bucket);
  }

  #refilled(key: string, now: number): Bucket {
    this.#sweep(now);
    const refill = this.limit.perMinute / 60_000;
    const bucket = this.#buckets.get(key) ?? { tokens: this.limit.burst, at: now };
    bucket.tokens = Math.min(this.limit.burst, bucket.tokens + (now - bucket.at) * refill);
    bucket.at = now;
    this.#buckets.set(key, bucket);
    return bucket;
  }

  #secondsUntilOne(bucket: Bucket): number {
    return Math.max(1, Math.ceil((1 - bucket.tokens) / (this.limit.perMinute / 60_000) / 1000));
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

/**
 * The network a client address is counted in, for limits one client must not dodge by using its
 * neighbours' addresses: an IPv4 /24 (an IPv4-mapped IPv6 address too), an IPv6 /64 (what one
 * host or one site is usually given). Anything else is its own network.
 */
export function sourceNetwork(address: string): string {
  const v4 = /^(?:::ffff:)?(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.\d{1,3}$/i.exec(address);
  if (v4) return `${v4[1]}.${v4[2]}.${v4[3]}.0/24`;
  const bare = address.replace(/%.*$/, '').toLowerCase();
  if (!/^[0-9a-f:.]+$/.test(bare) || !bare.includes(':')) return address;
  const halves = bare.split('::');
  if (halves.length > 2) return address;
  const head = halves[0] ? halves[0].split(':') : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(':') : [];
  const groups = halves.length === 2 ? [...head, ...Array<string>(Math.max(0, 8 - head.length - tail.length)).fill('0'), ...tail] : head;
  return `${groups.slice(0, 4).map((g) => (parseInt(g, 16) || 0).toString(16)).join(':')}::/64`;
}
