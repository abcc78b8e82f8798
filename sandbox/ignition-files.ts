// What a new host does before its agent runs: fetch its config from mcplane's bootstrap
// endpoint with the bootstrap token, and lay the files down as Ignition would (under a root,
// with /usr/local going into /var as on CoreOS).

import { mkdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { dirname, join } from 'node:path';
import { decodeDataUrl } from '../src/machineconfig/index.ts';

export interface IgnitionSource {
  port: number;
  ca: Buffer;
  token: string;
}

export function fetchIgnition(source: IgnitionSource, pool: string, version = '3.4.0'): Promise<any> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1', port: source.port, path: `/config/${pool}`, servername: 'localhost', ca: source.ca,
      headers: { authorization: `Bearer ${source.token}`, accept: `application/vnd.coreos.ignition+json;version=${version}` },
    }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(body)) : reject(new Error(`GET /config/${pool}: ${res.statusCode}: ${body}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Writes the config's storage.files under `root`; returns the paths written. */
export function applyIgnitionFiles(ignition: { storage: { files: { path: string; mode: number; contents: { source: string } }[] } }, root: string): string[] {
  const written: string[] = [];
  for (const f of ignition.storage.files) {
    const decoded = decodeDataUrl(f.contents.source);
    if ('error' in decoded) throw new Error(`${f.path}: ${decoded.error}`);
    const target = join(root, f.path.replace(/^\/usr\/local\//, '/var/usrlocal/'));
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, decoded.bytes, { mode: f.mode });
    written.push(f.path);
  }
  return written;
}
