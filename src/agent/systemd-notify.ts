// Readiness and watchdog for Type=notify through the systemd-notify command: Node has no unix
// datagram sockets to talk to $NOTIFY_SOCKET itself. The unit sets NotifyAccess=all because the
// messages come from a child process.

import { execFile } from 'node:child_process';

export class SystemdNotify {
  #timer: NodeJS.Timeout | undefined;
  readonly enabled = Boolean(process.env.NOTIFY_SOCKET);

  #send(...args: string[]): void {
    if (!this.enabled) return;
    execFile('systemd-notify', [`--pid=${process.pid}`, ...args], () => undefined);
  }

  ready(status: string): void {
    this.#send('--ready', `--status=${status}`);
    const usec = Number(process.env.WATCHDOG_USEC ?? 0);
    if (usec > 0 && !this.#timer) {
      this.#timer = setInterval(() => this.#send('WATCHDOG=1'), usec / 1000 / 2);
      this.#timer.unref();
    }
  }

  status(text: string): void {
    this.#send(`--status=${text}`);
  }

  stopping(): void {
    clearInterval(this.#timer);
    this.#send('STOPPING=1');
  }
}
