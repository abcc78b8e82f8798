// Readiness and watchdog for Type=notify through the systemd-notify command: Node has no unix
// datagram sockets to talk to $NOTIFY_SOCKET itself. The unit sets NotifyAccess=all because the
// messages come from a child process.
//
// The watchdog is fed only while the update loop is healthy: a timer alone would keep feeding
// it from a process whose update hangs on a call that never returns. When `stuck()` names a
// step past its deadline, feeding stops, systemd kills the agent after WatchdogSec and
// Restart=on-failure starts a fresh one, which resumes from the journal.

import { execFile } from 'node:child_process';
import type { Logger } from '../runtime/logger.ts';

export class SystemdNotify {
  #timer: NodeJS.Timeout | undefined;
  #starved: string | undefined;
  readonly enabled = Boolean(process.env.NOTIFY_SOCKET);

  private readonly log?: Logger;
  constructor(log?: Logger) {
    this.log = log;
  }

  #send(...args: string[]): void {
    if (!this.enabled) return;
    execFile('systemd-notify', [`--pid=${process.pid}`, ...args], () => undefined);
  }

  /** Before READY=1: the start goes on for `ms` more from now (EXTEND_TIMEOUT_USEC), and why. */
  extendStart(status: string, ms: number): void {
    this.#send(`--status=${status}`, `EXTEND_TIMEOUT_USEC=${ms * 1000}`);
  }

  /** READY=1; with WATCHDOG_USEC set, feeds the watchdog while `stuck()` says nothing. */
  ready(status: string, stuck: () => string | undefined = () => undefined): void {
    this.#send('--ready', `--status=${status}`);
    const usec = Number(process.env.WATCHDOG_USEC ?? 0);
    if (usec > 0 && !this.#timer) {
      this.#timer = setInterval(() => this.#feed(stuck), usec / 1000 / 2);
      this.#timer.unref();
    }
  }

  #feed(stuck: () => string | undefined): void {
    const why = stuck();
    if (why) {
      if (this.#starved !== why) {
        this.log?.error({ stuck: why }, 'the update loop is stuck past its deadline; no longer feeding the systemd watchdog, so systemd restarts the agent');
        this.#send(`--status=stuck: ${why}`);
      }
      this.#starved = why;
      return;
    }
    this.#starved = undefined;
    this.#send('WATCHDOG=1');
  }

  status(text: string): void {
    this.#send(`--status=${text}`);
  }

  stopping(): void {
    clearInterval(this.#timer);
    this.#send('STOPPING=1');
  }
}
