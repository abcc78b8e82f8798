// A real image registry (Debian's docker-registry, CNCF distribution 2.8) on a loopback port,
// with filesystem storage in a temp directory, and images the test builds itself: one small layer
// (a tar written here, gzipped), an image config, a Docker v2 schema 2 manifest, uploaded through
// the registry's HTTP API. Nothing comes from the internet.

import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { freePort } from '../../sandbox/etcd-cluster.ts';
import { stopChild } from './stop-child.ts';

export const REGISTRY_BINARY = '/usr/bin/docker-registry';

export interface PushedImage {
  /** host:port/repo@sha256:… */
  reference: string;
  digest: string;
  /** The layer blob's size (compressed), as the manifest lists it. */
  layerBytes: number;
}

export interface Registry {
  /** 127.0.0.1:port */
  host: string;
  pushImage(repository: string, files: Record<string, string>): Promise<PushedImage>;
  log(): string;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

export async function startRegistry(): Promise<Registry> {
  const dir = mkdtempSync(join(tmpdir(), 'registry-'));
  const logFile = join(dir, 'registry.log');
  const log = (): string => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '');
  // A port picked free can be taken before the registry binds it: try another.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const config = join(dir, 'config.yml');
    writeFileSync(config, [
      'version: 0.1',
      'log:',
      '  level: info',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${join(dir, 'storage')}`,
      'http:',
      `  addr: 127.0.0.1:${port}`,
      // One process: the generated secret is fine, but say it so the log does not warn.
      `  secret: ${createHash('sha256').update(dir).digest('hex')}`,
      '',
    ].join('\n'));
    const out = openSync(logFile, 'a');
    const child = spawn(REGISTRY_BINARY, ['serve', config], { stdio: ['ignore', out, out] });
    running.add(child);
    const exited = new Promise<void>((r) => child.once('exit', () => { running.delete(child); r(); }));
    const host = `127.0.0.1:${port}`;
    const deadline = Date.now() + 15_000;
    let ready = false;
    while (child.exitCode === null && Date.now() < deadline) {
      try {
        if ((await fetch(`http://${host}/v2/`)).status === 200) { ready = true; break; }
      } catch { /* not listening yet */ }
      await new Promise((r) => setTimeout(r, 100));
    }
    if (!ready) {
      child.kill('SIGKILL');
      await exited;
      if (attempt < 3 && /address already in use/.test(log())) continue;
      throw new Error(`docker-registry did not serve on ${host}:\n${log().slice(-3000)}`);
    }
    return {
      host,
      log,
      pushImage: (repository, files) => pushImage(host, repository, files),
      stop: () => stopChild(child, exited, dir),
    };
  }
}

const sha256 = (data: Uint8Array): string => `sha256:${createHash('sha256').update(data).digest('hex')}`;

/** The image's platform: the runtime refuses a single manifest whose config names another. */
function platform(): { os: string; architecture: string } {
  const arch: Record<string, string> = { x64: 'amd64', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x' };
  return { os: 'linux', architecture: arch[process.arch] ?? process.arch };
}

async function pushImage(host: string, repository: string, files: Record<string, string>): Promise<PushedImage> {
  const tar = tarOf(files);
  const layer = gzipSync(tar);
  const config = Buffer.from(JSON.stringify({
    ...platform(),
    config: {},
    rootfs: { type: 'layers', diff_ids: [sha256(tar)] },
    history: [{ created_by: 'mcplane test/helpers/registry.ts' }],
  }));
  await pushBlob(host, repository, layer);
  await pushBlob(host, repository, config);
  const manifest = Buffer.from(JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: config.byteLength, digest: sha256(config) },
    layers: [{ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', size: layer.byteLength, digest: sha256(layer) }],
  }));
  const digest = sha256(manifest);
  const res = await fetch(`http://${host}/v2/${repository}/manifests/${digest}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/vnd.docker.distribution.manifest.v2+json' },
    body: manifest,
  });
  if (res.status !== 201) throw new Error(`registry refused the manifest of ${repository}: ${res.status} ${await res.text()}`);
  return { reference: `${host}/${repository}@${digest}`, digest, layerBytes: layer.byteLength };
}

/** The two-step upload: POST opens a session, PUT with the digest sends the whole blob and closes it. */
async function pushBlob(host: string, repository: string, blob: Buffer): Promise<void> {
  const start = await fetch(`http://${host}/v2/${repository}/blobs/uploads/`, { method: 'POST' });
  if (start.status !== 202) throw new Error(`registry refused an upload to ${repository}: ${start.status} ${await start.text()}`);
  const location = new URL(start.headers.get('location')!, `http://${host}`);
  location.searchParams.set('digest', sha256(blob));
  const put = await fetch(location, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: blob });
  if (put.status !== 201) throw new Error(`registry refused a blob of ${repository}: ${put.status} ${await put.text()}`);
}

/** A ustar archive of regular files (mode 0644, owner 0, mtime 0). */
function tarOf(files: Record<string, string>): Buffer {
  const blocks: Buffer[] = [];
  for (const [name, text] of Object.entries(files)) {
    const body = Buffer.from(text);
    const header = Buffer.alloc(512);
    const put = (value: string, offset: number, length: number): void => { header.write(value, offset, length, 'ascii'); };
    put(name, 0, 100);
    put('0000644\0', 100, 8);
    put('0000000\0', 108, 8);
    put('0000000\0', 116, 8);
    put(`${body.byteLength.toString(8).padStart(11, '0')}\0`, 124, 12);
    put('00000000000\0', 136, 12);
    put('        ', 148, 8);
    put('0', 156, 1);
    put('ustar\0', 257, 6);
    put('00', 263, 2);
    let sum = 0;
    for (const b of header) sum += b;
    put(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
    blocks.push(header, body, Buffer.alloc((512 - (body.byteLength % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}
