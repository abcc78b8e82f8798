// A real containerd (Debian's, 1.6) whose CRI plugin serves runtime.v1 on a unix socket in a temp
// directory, with its own root, state and config, for the tests of the agent's CRI image client.
// It only pulls and stores images here: the native snapshotter (copies, no overlay mounts), no CNI
// (the plugin logs that it has none and serves images all the same), no TCP stream server, and
// the snapshotters that need a kernel module or a special file system disabled. Registries on
// loopback are reached over plain HTTP through a hosts.toml per host (config_path).

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CriImageClient } from '../../src/agent/cri-image-client.ts';
import { stopChild } from './stop-child.ts';

export const CONTAINERD_BINARY = '/usr/bin/containerd';

/** containerd's CRI plugin mounts and owns its root as root: the tests skip elsewhere (MCPLANE_TEST_ALLOW_SKIPS). */
export function canRunContainerd(): boolean {
  return process.getuid?.() === 0 && existsSync(CONTAINERD_BINARY);
}

export interface Containerd {
  dir: string;
  /** The CRI (and containerd) gRPC socket. */
  socket: string;
  /** containerd's root: the native snapshotter, and so the image filesystem, is below it. */
  root: string;
  log(): string;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

/** Starts containerd; `plainHttpRegistries` are host:port pairs to pull from over HTTP. */
export async function startContainerd(options: { plainHttpRegistries?: string[] } = {}): Promise<Containerd> {
  const dir = mkdtempSync(join(tmpdir(), 'containerd-'));
  const socket = join(dir, 'containerd.sock');
  const root = join(dir, 'root');
  const hostsDir = join(dir, 'certs.d');
  for (const d of ['cni-bin', 'cni-conf', 'opt']) mkdirSync(join(dir, d));
  for (const host of options.plainHttpRegistries ?? []) {
    mkdirSync(join(hostsDir, host), { recursive: true });
    writeFileSync(join(hostsDir, host, 'hosts.toml'), [
      `server = "http://${host}"`,
      `[host."http://${host}"]`,
      '  capabilities = ["pull", "resolve"]',
      '',
    ].join('\n'));
  }
  mkdirSync(hostsDir, { recursive: true });
  const config = join(dir, 'config.toml');
  writeFileSync(config, `version = 2
root = "${root}"
state = "${join(dir, 'state')}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.overlayfs", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "${socket}"
[ttrpc]
  address = "${socket}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "${join(dir, 'opt')}"
[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${join(dir, 'cni-bin')}"
    conf_dir = "${join(dir, 'cni-conf')}"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "${hostsDir}"
`);
  const logFile = join(dir, 'containerd.log');
  const out = openSync(logFile, 'a');
  const child = spawn(CONTAINERD_BINARY, ['--config', config], { stdio: ['ignore', out, out] });
  running.add(child);
  const exited = new Promise<void>((r) => child.once('exit', () => { running.delete(child); r(); }));
  const log = (): string => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '');

  // Ready once the CRI answers on the socket (the socket appears before the CRI plugin serves).
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`containerd exited (${child.exitCode}) before serving:\n${log().slice(-3000)}`);
    if (existsSync(socket)) {
      const cri = new CriImageClient(socket, { callTimeoutMs: 2000 });
      try {
        await cri.imageFsInfo();
        break;
      } catch { /* not serving yet */ } finally {
        cri.close();
      }
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`containerd did not serve the CRI within 30 s:\n${log().slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }

  return {
    dir,
    socket,
    root,
    log,
    stop: () => stopChild(child, exited, dir),
  };
}
