// systemd's manager over D-Bus (org.freedesktop.systemd1), with explicit method signatures
// rather than introspected proxies: no round trip per call, and exactly one signal match rule
// (JobRemoved) added once for the life of the connection, so a long-running agent cannot leak
// match rules up to the bus limit however many jobs it waits on.
//
// Rules from the field: Subscribe() and listen for JobRemoved before starting a job (a fast
// job can finish before StartUnit even returns); Reload() after writing unit files and after
// enable/disable/mask; 64-bit values arrive as BigInt; always handle the bus 'error' event.

import { Message, MessageType, sessionBus, systemBus, type MessageBus } from '@jellybrick/dbus-next';
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

export class SystemdClient {
  #finished = new Map<string, JobResult>();
  #waiters = new Map<string, (result: JobResult) => void>();
  #subscribed: Promise<void> | undefined;
  #closed = false;
  #busError: Error | undefined;

  constructor(private readonly bus: MessageBus, private readonly jobTimeoutMs = 90_000) {
    (bus as unknown as NodeJS.EventEmitter).on('error', (err: Error) => {
      // A lost bus connection must not crash the agent; calls after it fail with this cause.
      this.#busError = err;
      for (const resolve of this.#waiters.values()) resolve('failed');
      this.#waiters.clear();
    });
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
  }

  static connect(which: string, jobTimeoutMs?: number): SystemdClient {
    return new SystemdClient(openBus(which), jobTimeoutMs);
  }

  /** Subscribe() and the JobRemoved match rule, once. */
  subscribe(): Promise<void> {
    this.#subscribed ??= (async () => {
      await this.#callBus('AddMatch', 's', [`type='signal',sender='${DEST}',path='${PATH}',interface='${MANAGER}',member='JobRemoved'`]);
      await this.#call('Subscribe', '', []);
    })();
    return this.#subscribed;
  }

  async reload(): Promise<void> {
    await this.#call('Reload', '', []);
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
    const reply = await this.bus.call(new Message({
      destination: DEST, path, interface: 'org.freedesktop.DBus.Properties', member: 'Get', signature: 'ss',
      body: ['org.freedesktop.systemd1.Unit', 'ActiveState'],
    }));
    return (reply?.body[0] as { value: string }).value;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.bus.disconnect();
  }

  async #job(method: string, name: string): Promise<void> {
    await this.subscribe();
    const job = (await this.#call(method, 'ss', [name, 'replace'])) as string;
    const early = this.#finished.get(job);
    this.#finished.delete(job);
    const result = early ?? await new Promise<JobResult>((resolve) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(job);
        resolve('timeout');
      }, this.jobTimeoutMs);
      this.#waiters.set(job, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
    });
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

  async #send(destination: string, path: string, iface: string, member: string, signature: string, body: unknown[]): Promise<unknown> {
    if (this.#busError) throw new SystemdError(`D-Bus connection lost: ${this.#busError.message}`);
    try {
      const reply = await this.bus.call(new Message({ destination, path, interface: iface, member, signature, body }));
      return reply?.body.length === 1 ? reply.body[0] : reply?.body;
    } catch (err) {
      throw new SystemdError(`${member}(${body.map((b) => JSON.stringify(b)).join(', ')}): ${(err as Error).message}`);
    }
  }
}
