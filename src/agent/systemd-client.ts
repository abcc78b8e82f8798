// systemd's manager over D-Bus (org.freedesktop.systemd1), with explicit method signatures
// rather than introspected proxies: no round trip per call, and exactly one signal match rule
// (JobRemoved) added once for the life of the connection, so a long-running agent cannot leak
// match rules up to the bus limit however many jobs it waits on.
//
// Rules from the field: Subscribe() and listen for JobRemoved before starting a job (a fast
// job can finish before StartUnit even returns); Reload() after writing unit files and after
// enable/disable/mask; 64-bit values arrive as BigInt; always handle the bus 'error' event.

import { Message, MessageType, sessionBus, systemBus, Variant, type MessageBus } from '@jellybrick/dbus-next';
import { SystemdError } from '../machineconfig/index.ts';

const DEST = 'org.freedesktop.systemd1';
const PATH = '/org/freedesktop/systemd1';
const MANAGER = 'org.freedesktop.systemd1.Manager';

export type JobResult = 'done' | 'canceled' | 'timeout' | 'failed' | 'dependency' | 'skipped' | 'invalid';

export interface UnitFileChange {
  type: string;
  file: string;
  destination: string;
}

/** Connects to "system", "session", or a D-Bus address (unix:path=...). */
export function openBus(which: string): MessageBus {
  if (which === 'system') return systemBus();
  if (which === 'session') return sessionBus();
  return sessionBus({ busAddress: which });
}

/** The cause of a call's error when its connection went away before the reply came. */
const CONNECTION_LOST = 'the D-Bus connection was lost before the reply';

export class SystemdClient {
  #bus: MessageBus | undefined;
  #finished = new Map<string, JobResult>();
  #waiters = new Map<string, (result: JobResult | { lost: string }) => void>();
  #subscribed: Promise<void> | undefined;
  #closed = false;
  /** Why the last connection was dropped, for the log and the next error. */
  lastLoss: string | undefined;
  /** Connections opened so far (1 + reconnects). */
  connections = 0;
  /**
   * The calls waiting for a reply on the current connection, told when it is lost. One listener
   * per connection calls them all: a listener per call put 50 on the connection when 50 units
   * were stopped at once (MaxListenersExceededWarning, and a leak if a call never settled).
   */
  #inFlight = new Set<(why: string) => void>();

  private readonly open: () => MessageBus;
  private readonly jobTimeoutMs: number;
  /** No D-Bus call waits longer than this for its reply. */
  private readonly callTimeoutMs: number;
  /**
   * `open` makes a new connection: after one is lost (the manager restarted, the socket closed,
   * a call unanswered past its deadline) the next call opens another and subscribes again.
   */
  constructor(
    open: () => MessageBus,
    jobTimeoutMs: number = 90_000,
    callTimeoutMs: number = 25_000,
  ) {
    this.open = open;
    this.jobTimeoutMs = jobTimeoutMs;
    this.callTimeoutMs = callTimeoutMs;
  }

  static connect(which: string, jobTimeoutMs?: number, callTimeoutMs?: number): SystemdClient {
    return new SystemdClient(() => openBus(which), jobTimeoutMs, callTimeoutMs);
  }

  #connection(): MessageBus {
    if (this.#closed) throw new SystemdError('the systemd connection is closed');
    if (this.#bus) return this.#bus;
    const bus = this.open();
    this.connections++;
    this.#bus = bus;
    this.#subscribed = undefined;
    // A lost connection must not crash the agent; it is dropped (the calls on it fail with the
    // cause) and the next call reconnects.
    (bus as unknown as NodeJS.EventEmitter).on('error', (err: Error) => this.#drop(bus, err.message));
    (bus as unknown as { _connection?: NodeJS.EventEmitter })._connection?.on?.('end', () => this.#drop(bus, 'the bus closed the connection'));
    bus.on('message', (msg: Message) => {
      if (msg.type !== MessageType.SIGNAL || msg.interface !== MANAGER || msg.member !== 'JobRemoved') return;
      const [, job, , result] = msg.body as [bigint | number, string, string, JobResult];
      const waiter = this.#waiters.get(job);
      if (waiter) {
        this.#waiters.delete(job);
        waiter(result);
      } else {
        this.#finished.set(job, result);
        // Keep only recent results of jobs nobody waited for (started by someone else).
        if (this.#finished.size > 1000) this.#finished.delete(this.#finished.keys().next().value!);
      }
    });
    return bus;
  }

  #drop(bus: MessageBus, why: string): void {
    if (this.#bus !== bus) return;
    this.#bus = undefined;
    this.#subscribed = undefined;
    this.lastLoss = why;
    const calls = [...this.#inFlight];
    this.#inFlight.clear();
    for (const lost of calls) lost(why);
    try {
      bus.disconnect();
    } catch { /* already gone */ }
    // A job's JobRemoved cannot arrive on a new connection: its waiter learns the cause now.
    for (const resolve of this.#waiters.values()) resolve({ lost: why });
    this.#waiters.clear();
    this.#finished.clear();
  }

  /** Subscribe() and the JobRemoved match rule, once per connection. */
  subscribe(): Promise<void> {
    this.#connection();
    const attempt = this.#subscribed ??= (async () => {
      await this.#callBus('AddMatch', 's', [`type='signal',sender='${DEST}',path='${PATH}',interface='${MANAGER}',member='JobRemoved'`]);
      await this.#call('Subscribe', '', []);
    })();
    attempt.catch(() => { if (this.#subscribed === attempt) this.#subscribed = undefined; });
    return attempt;
  }

  /**
   * daemon-reload. A connection lost during it (seen with a loaded user manager: the bus closes
   * the connection mid-call) is retried once on a new connection, since a reload is idempotent and
   * failing the whole update for it leaves the node Degraded for nothing. A call that gets no
   * reply is not retried: a frozen systemd must fail the step within one deadline.
   */
  async reload(): Promise<void> {
    try {
      await this.#call('Reload', '', []);
    } catch (err) {
      if (!(err instanceof SystemdError) || err.cause !== CONNECTION_LOST) throw err;
      await this.#call('Reload', '', []);
    }
  }

  startUnit(name: string): Promise<void> { return this.#job('StartUnit', name); }
  stopUnit(name: string): Promise<void> { return this.#job('StopUnit', name); }
  restartUnit(name: string): Promise<void> { return this.#job('RestartUnit', name); }
  reloadUnit(name: string): Promise<void> { return this.#job('ReloadUnit', name); }

  async enableUnitFiles(names: string[]): Promise<UnitFileChange[]> {
    const [, changes] = await this.#call('EnableUnitFiles', 'asbb', [names, false, true]) as [boolean, [string, string, string][]];
    return changes.map(([type, file, destination]) => ({ type, file, destination }));
  }

  async disableUnitFiles(names: string[]): Promise<void> {
    await this.#call('DisableUnitFiles', 'asb', [names, false]);
  }

  async maskUnitFiles(names: string[]): Promise<void> {
    await this.#call('MaskUnitFiles', 'asbb', [names, false, true]);
  }

  async unmaskUnitFiles(names: string[]): Promise<void> {
    await this.#call('UnmaskUnitFiles', 'asb', [names, false]);
  }

  /** enabled, disabled, masked, static, linked, ... or "not-found". */
  async unitFileState(name: string): Promise<string> {
    try {
      return (await this.#call('GetUnitFileState', 's', [name])) as string;
    } catch (err) {
      if (/No such file|not found|NoSuchUnit/i.test((err as Error).message)) return 'not-found';
      throw err;
    }
  }

  /** active, inactive, failed, activating, ... (loads the unit if needed). */
  async activeState(name: string): Promise<string> {
    const path = (await this.#call('LoadUnit', 's', [name])) as string;
    const reply = await this.#send(DEST, path, 'org.freedesktop.DBus.Properties', 'Get', 'ss', ['org.freedesktop.systemd1.Unit', 'ActiveState']);
    return (reply as { value: string }).value;
  }

  /**
   * StartTransientUnit: a unit made from properties alone (lifecycle hooks), started; resolves
   * once its start job is done (for Type=exec: the command was executed, not finished).
   * Each property is [name, D-Bus signature, value].
   */
  async startTransientUnit(name: string, properties: [string, string, unknown][]): Promise<void> {
    await this.subscribe();
    const props = properties.map(([key, sig, value]) => [key, new Variant(sig, value)]);
    const job = (await this.#call('StartTransientUnit', 'ssa(sv)a(sa(sv))', [name, 'fail', props, []])) as string;
    await this.#waitJob(job, 'StartTransientUnit', name);
  }

  /** Properties of a loaded unit's interface (Service: ExecMainStatus, Result, ...); undefined when it is not loaded. */
  async unitProperties(name: string, iface: 'Unit' | 'Service', keys: readonly string[]): Promise<Record<string, unknown> | undefined> {
    let path: string;
    try {
      path = (await this.#call('GetUnit', 's', [name])) as string;
    } catch (err) {
      if (/NoSuchUnit|not loaded/i.test((err as Error).message)) return undefined;
      throw err;
    }
    const out: Record<string, unknown> = {};
    for (const key of keys) {
      const reply = await this.#send(DEST, path, 'org.freedesktop.DBus.Properties', 'Get', 'ss', [`org.freedesktop.systemd1.${iface}`, key]);
      out[key] = (reply as { value: unknown }).value;
    }
    return out;
  }

  /** Forgets a failed unit (a transient one is then unloaded). */
  async resetFailedUnit(name: string): Promise<void> {
    try {
      await this.#call('ResetFailedUnit', 's', [name]);
    } catch (err) {
      if (!/NoSuchUnit|not loaded/i.test((err as Error).message)) throw err;
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const bus = this.#bus;
    if (bus) this.#drop(bus, 'closed by the agent');
  }

  async #job(method: string, name: string): Promise<void> {
    await this.subscribe();
    const job = (await this.#call(method, 'ss', [name, 'replace'])) as string;
    await this.#waitJob(job, method, name);
  }

  async #waitJob(job: string, method: string, name: string): Promise<void> {
    const early = this.#finished.get(job);
    this.#finished.delete(job);
    const result = early ?? await new Promise<JobResult | { lost: string }>((resolve) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(job);
        resolve('timeout');
      }, this.jobTimeoutMs);
      this.#waiters.set(job, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
    });
    if (typeof result === 'object') {
      throw new SystemdError(`${method} ${name}: the D-Bus connection to systemd was lost while waiting for the job (${result.lost}); the job's outcome is unknown`);
    }
    if (result !== 'done') {
      const state = await this.activeState(name).catch(() => 'unknown');
      throw new SystemdError(`${method} ${name}: job ${result === 'timeout' ? `did not finish within ${this.jobTimeoutMs / 1000}s` : `ended "${result}"`} (unit is ${state})`);
    }
  }

  async #call(member: string, signature: string, body: unknown[]): Promise<unknown> {
    return this.#send(DEST, PATH, MANAGER, member, signature, body);
  }

  async #callBus(member: string, signature: string, body: unknown[]): Promise<unknown> {
    return this.#send('org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus', member, signature, body);
  }

  /** One call with a deadline; a call left unanswered drops the connection (it may be dead). */
  async #send(destination: string, path: string, iface: string, member: string, signature: string, body: unknown[]): Promise<unknown> {
    const what = `${member}(${body.map((b) => JSON.stringify(b, (_, v: unknown) => { const x = v instanceof Variant ? v.value as unknown : v; return typeof x === 'bigint' ? x.toString() : x; })).join(', ')})`;
    const bus = this.#connection();
    let timer: NodeJS.Timeout | undefined;
    let lost: ((why: string) => void) | undefined;
    const onLost = (why: string) => lost?.(why);
    this.#inFlight.add(onLost);
    try {
      const reply = await Promise.race([
        bus.call(new Message({ destination, path, interface: iface, member, signature, body })),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new SystemdError(`${what}: no reply from systemd within ${this.callTimeoutMs / 1000}s`)), this.callTimeoutMs);
          lost = (why) => reject(new SystemdError(`${what}: the D-Bus connection to systemd was lost (${why})`, { cause: CONNECTION_LOST }));
        }),
      ]);
      return reply?.body.length === 1 ? reply.body[0] : reply?.body;
    } catch (err) {
      if (err instanceof SystemdError) {
        this.#drop(bus, err.message);
        throw err;
      }
      throw new SystemdError(`${what}: ${(err as Error).message}`);
    } finally {
      clearTimeout(timer);
      this.#inFlight.delete(onLost);
    }
  }
}
