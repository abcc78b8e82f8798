// One sandbox host whose reboot can be made to fail, on a sandbox fixture of its own, for the tests of
// what an undone update leaves behind (undone-karg-added, undone-karg-removed): they start the
// same bed and host, and change 50-kargs and wait for the pool's next target the same way.

import { readFileSync } from 'node:fs';
import { call } from '../../src/cli/client/call.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { sandboxFixture, type SandboxFixture } from './sandbox-fixture.ts';
import { mcYaml, poolYaml } from './manifests.ts';

export interface FailableRebootHost {
  readonly bed: SandboxFixture;
  readonly host: SandboxHost;
  /** The worker pool's target. */
  target(): Promise<string>;
  /** Applies MachineConfig 50-kargs for worker with this spec; resolves with the pool's new target. */
  applyKargsConfig(spec: string): Promise<string>;
  /** The kernel command line the host booted. */
  cmdline(): string[];
}

/** Starts the fixture (worker: `poolSpec`) and host `name` before the file's tests, and stops them after. */
export function failableRebootHost(name: string, poolSpec: string): FailableRebootHost {
  let host: SandboxHost | undefined;
  const bed = sandboxFixture({
    sharedSystemd: true,
    manifests: [poolYaml('worker', poolSpec)],
    setUp: async () => {
      host = new SandboxHost({ name, server: bed.server.address, pki: bed.server.pki, systemd: bed.systemd, failableReboot: true });
      bed.hosts.push(host);
      await host.start();
    },
  });
  const started = <T>(what: T | undefined): T => {
    if (what === undefined) throw new Error('the failable-reboot host is used outside its file\'s tests');
    return what;
  };
  const fixture: FailableRebootHost = {
    bed,
    get host() { return started(host); },
    target: async () => {
      const c = fixture.bed.c;
      return (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
    },
    applyKargsConfig: async (spec) => {
      const c = fixture.bed.c;
      const previous = await fixture.target();
      await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'k.yaml', text: mcYaml('50-kargs', 'worker', spec) }], dryRun: false }, 'apply');
      for (let now = await fixture.target(); ; now = await fixture.target()) {
        if (now !== previous) return now;
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    cmdline: () => readFileSync(fixture.host.cmdlineFile, 'utf8').trim().split(/\s+/),
  };
  return fixture;
}
