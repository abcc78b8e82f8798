// A real Chromium (Debian's chromium package), headless, driven over the Chrome DevTools
// Protocol through the WebSocket client built into Node 24. A few CDP methods are all the
// tests need (navigate, evaluate, mouse clicks, screenshots), so no puppeteer.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scaled } from './time-scale.ts';

export const CHROMIUM = process.env.MCPLANE_CHROMIUM ?? '/usr/bin/chromium';

/**
 * Why the browser tests cannot run here, or false. Under CI (.ci/run installs Chromium) a missing
 * browser is a failure, not a skip, so the browser tests cannot silently stop running.
 */
export const chromiumMissing: string | false = !existsSync(CHROMIUM) && `${CHROMIUM} is not installed (apt-get install chromium)`;
if (chromiumMissing && process.env.CI) throw new Error(`CI is set and ${chromiumMissing}: .ci/run installs it`);

export interface Browser {
  page: Page;
  close(): Promise<void>;
}

export class Page {
  #nextId = 0;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; method: string }>();
  /** Console messages and uncaught exceptions of the page, for assertion messages. */
  readonly console: string[] = [];

  private readonly ws: WebSocket;
  constructor(ws: WebSocket) {
    this.ws = ws;
    ws.addEventListener('message', (ev) => {
      const msg = JSON.parse(String(ev.data)) as { id?: number; result?: unknown; error?: { message: string }; method?: string; params?: Record<string, unknown> };
      if (msg.id !== undefined) {
        const p = this.#pending.get(msg.id);
        if (!p) return;
        this.#pending.delete(msg.id);
        if (msg.error) p.reject(new Error(`${p.method}: ${msg.error.message}`));
        else p.resolve(msg.result);
      } else if (msg.method === 'Runtime.consoleAPICalled') {
        const args = (msg.params!.args as { value?: unknown; description?: string }[]).map((a) => a.value ?? a.description);
        this.console.push(`console.${String(msg.params!.type)}: ${args.join(' ')}`);
      } else if (msg.method === 'Runtime.exceptionThrown') {
        const d = msg.params!.exceptionDetails as { text: string; exception?: { description?: string } };
        this.console.push(`exception: ${d.exception?.description ?? d.text}`);
      }
    });
    ws.addEventListener('close', () => {
      for (const p of this.#pending.values()) p.reject(new Error(`${p.method}: the browser closed the connection`));
      this.#pending.clear();
    });
  }

  send<T = Record<string, unknown>>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = ++this.#nextId;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject, method });
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /** Evaluates an expression in the page and returns its value (awaiting a promise). */
  async evaluate<T>(expression: string): Promise<T> {
    const r = await this.send<{ result: { value?: T }; exceptionDetails?: { text: string; exception?: { description?: string } } }>('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error(`in the page: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}\n(${expression})`);
    return r.result.value as T;
  }

  /** Polls an expression until it is truthy; returns its value. */
  async waitFor<T>(expression: string, what: string, quietTimeoutMs = 15_000): Promise<T> {
    const timeoutMs = scaled(quietTimeoutMs);
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    for (;;) {
      last = await this.evaluate<T>(expression).catch((e: Error) => e.message);
      if (last && !(typeof last === 'string' && last.startsWith('in the page:'))) return last as T;
      if (Date.now() > deadline) throw new Error(`${what}: not seen in the page within ${timeoutMs} ms (last: ${JSON.stringify(last)}; console: ${this.console.join(' | ')})`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async navigate(url: string): Promise<void> {
    await this.send('Page.navigate', { url });
    await this.waitFor('document.readyState === "complete"', `load ${url}`);
  }

  /** A real mouse click (pressed and released) at the middle of the first element matching `selector`. */
  async click(selector: string): Promise<void> {
    const box = await this.evaluate<{ x: number; y: number } | null>(`(() => {
      const e = document.querySelector(${JSON.stringify(selector)});
      if (!e) return null;
      e.scrollIntoView({ block: 'center' });
      const r = e.getBoundingClientRect();
      return { x: r.left + r.width / 2, y: r.top + r.height / 2 };
    })()`);
    if (!box) throw new Error(`click: nothing matches ${selector}`);
    for (const type of ['mouseMoved', 'mousePressed', 'mouseReleased']) {
      await this.send('Input.dispatchMouseEvent', { type, x: box.x, y: box.y, button: 'left', clickCount: type === 'mouseMoved' ? 0 : 1 });
    }
  }

  /** A PNG of the whole page (not only the viewport). */
  async screenshot(path: string): Promise<void> {
    const r = await this.send<{ data: string }>('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true });
    writeFileSync(path, Buffer.from(r.data, 'base64'));
  }
}

/** Starts headless Chromium with a fresh profile and attaches to its first tab. */
export async function launchChromium(options: { width?: number; height?: number } = {}): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'mcplane-chromium-'));
  const args = [
    '--headless=new', '--disable-gpu', '--remote-debugging-port=0', '--remote-debugging-address=127.0.0.1',
    `--user-data-dir=${profile}`, '--no-first-run', '--no-default-browser-check', '--disable-dev-shm-usage',
    '--disable-extensions', '--disable-background-networking', '--disable-component-update', '--disable-sync',
    `--window-size=${options.width ?? 1400},${options.height ?? 900}`,
    // Chromium's sandbox refuses to run as root; these tests run as root (systemd user managers).
    ...(process.getuid?.() === 0 ? ['--no-sandbox'] : []),
    'about:blank',
  ];
  const child: ChildProcess = spawn(CHROMIUM, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let stderr = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const endpoint = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`chromium did not start within ${scaled(30_000)} ms:\n${stderr}`)), scaled(30_000));
    child.stderr!.on('data', (d) => {
      stderr += d;
      const m = /DevTools listening on (ws:\/\/\S+)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    void exited.then(() => reject(new Error(`chromium exited before it was ready:\n${stderr}`)));
  });
  const http = endpoint.replace(/^ws:\/\/([^/]+)\/.*$/, 'http://$1');
  let target: { type: string; webSocketDebuggerUrl: string } | undefined;
  for (let i = 0; i < 100 && !target; i++) {
    const list = (await (await fetch(`${http}/json/list`)).json()) as { type: string; webSocketDebuggerUrl: string }[];
    target = list.find((t) => t.type === 'page');
    if (!target) await new Promise((r) => setTimeout(r, 50));
  }
  if (!target) throw new Error('chromium has no page to attach to');
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener('open', () => resolve(), { once: true });
    ws.addEventListener('error', () => reject(new Error(`cannot connect to ${target.webSocketDebuggerUrl}`)), { once: true });
  });
  const page = new Page(ws);
  await page.send('Page.enable');
  await page.send('Runtime.enable');
  await page.send('Emulation.setDeviceMetricsOverride', { width: options.width ?? 1400, height: options.height ?? 900, deviceScaleFactor: 1, mobile: false });
  return {
    page,
    async close() {
      ws.close();
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch { /* already gone */ }
      await exited;
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
