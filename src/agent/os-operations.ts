// Kernel arguments, kernel type, extensions and the OS image through rpm-ostree. Each change is
// computed against rpm-ostree's own pending deployment (the next boot's, else the booted one),
// which every rpm-ostree change builds on, so running it again after a crash does nothing twice
// and a deployment left over from an undone update cannot slip its changes into this one.

import { splitKernelArguments, UpdateStepError, type MachineConfigSpec } from '../machineconfig/index.ts';
import { readKernelCmdline } from './kernel-cmdline.ts';
import { EXTENSION_PACKAGES, extensionsOf, imageOf, KERNEL_PACKAGES, kernelTypeOf, type Deployment, type RpmOstree } from './rpm-ostree.ts';

/**
 * `undone`: kernel arguments and extensions of undone updates, which the pending deployment may
 * still hold when their deployment could not be dropped (or was the one left to boot next); taken
 * out unless `to` wants them.
 */
export async function applyOsChanges(rpm: RpmOstree, from: MachineConfigSpec | null, to: MachineConfigSpec, undone: { kargs?: readonly string[] | null; extensions?: readonly string[] | null } = {}, { cacheOnly = false } = {}): Promise<string[]> {
  const done: string[] = [];
  const step = async (object: string, fn: () => Promise<void>): Promise<void> => {
    try {
      await fn();
      done.push(object);
    } catch (err) {
      throw new UpdateStepError('apply', object, (err as Error).message);
    }
  };
  const status = await rpm.status();
  const pending = status.pending ?? status.booted;

  // Against what the pending deployment holds, not what `from` says it should: the two differ
  // when an undone update's deployment is still pending (it holds that update's arguments).
  const have = await rpm.kargs().catch((err: Error) => { throw new UpdateStepError('apply', 'kernelArguments', err.message); });
  const newKargs = splitKernelArguments(to.kernelArguments);
  const managed = [...new Set([...splitKernelArguments(from?.kernelArguments ?? []), ...(undone.kargs ?? [])])];
  const remove = managed.filter((k) => !newKargs.includes(k) && have.includes(k));
  const add = newKargs.filter((k) => !have.includes(k));
  if (remove.length || add.length) await step('kernelArguments', () => rpm.changeKargs(remove, add));

  const kernelType = kernelTypeOf(pending);
  if (kernelType !== to.kernelType) await step('kernelType', () => rpm.setKernelType(kernelType, to.kernelType, cacheOnly));

  const installed = extensionsOf(pending);
  const extAdd = to.extensions.filter((e) => !installed.includes(e) && EXTENSION_PACKAGES[e]);
  const extRemove = [...new Set([...(from?.extensions ?? []), ...(undone.extensions ?? [])])].filter((e) => !to.extensions.includes(e) && installed.includes(e));
  if (extAdd.length || extRemove.length) await step('extensions', () => rpm.changeExtensions(extRemove, extAdd, cacheOnly));

  if (to.osImageURL && imageOf(pending) !== to.osImageURL) await step('osImageURL', () => rpm.rebase(to.osImageURL, cacheOnly));
  return done;
}

/** What `to` needs downloaded on top of rpm-ostree's pending (else booted) deployment: what staging fetches. */
export interface OsDownloads {
  image?: string;
  packages: string[];
}

export async function osDownloadsFor(rpm: RpmOstree, to: MachineConfigSpec): Promise<OsDownloads> {
  const status = await rpm.status();
  return osDownloadsFrom(status.pending ?? status.booted, to);
}

export function osDownloadsFrom(base: Deployment, to: MachineConfigSpec): OsDownloads {
  const out: OsDownloads = { packages: [] };
  if (to.osImageURL && imageOf(base) !== to.osImageURL) out.image = to.osImageURL;
  const kernelType = kernelTypeOf(base);
  if (kernelType !== to.kernelType && to.kernelType !== 'default') out.packages.push(...KERNEL_PACKAGES[to.kernelType]);
  const installed = extensionsOf(base);
  for (const e of to.extensions) if (!installed.includes(e)) out.packages.push(...(EXTENSION_PACKAGES[e] ?? []));
  return out;
}

/**
 * OS mismatches for validation: kernel arguments (and fips) against the booted kernel's command
 * line, the rest against rpm-ostree's booted deployment.
 */
export async function osMismatches(rpm: RpmOstree, from: MachineConfigSpec | null, to: MachineConfigSpec, cmdlineFile: string): Promise<string[]> {
  const out: string[] = [];
  const { booted } = await rpm.status();
  const cmdline = readKernelCmdline(cmdlineFile);
  if (!cmdline.ok) {
    out.push(`kernelArguments: ${cmdline.reason}`);
  } else {
    const kargs = cmdline.args;
    // `rpm-ostree kargs` prints the pending deployment's: only to say why one is missing.
    const pending = await rpm.kargs().catch(() => [] as string[]);
    const where = `the booted kernel command line (${cmdlineFile})`;
    const wanted = splitKernelArguments(to.kernelArguments);
    for (const k of wanted) {
      if (kargs.includes(k)) continue;
      out.push(`kernelArguments: ${k} is not on ${where}${pending.includes(k) ? '; rpm-ostree has it only in the pending deployment, so the host has not booted into it' : ''}`);
    }
    for (const k of splitKernelArguments(from?.kernelArguments ?? [])) {
      if (!wanted.includes(k) && kargs.includes(k)) out.push(`kernelArguments: ${k} was removed but is still on ${where}`);
    }
    if (to.fips !== kargs.includes('fips=1')) out.push(`fips: expected ${to.fips}, the booted kernel has fips=1 ${kargs.includes('fips=1') ? 'set' : 'unset'}`);
  }
  const kernelType = kernelTypeOf(booted);
  if (kernelType !== to.kernelType) out.push(`kernelType: expected ${to.kernelType}, booted ${kernelType}`);
  const ext = extensionsOf(booted);
  for (const e of to.extensions) if (!ext.includes(e)) out.push(`extensions: ${e} is not installed in the booted deployment`);
  if (to.osImageURL && imageOf(booted) !== to.osImageURL) out.push(`osImageURL: expected ${to.osImageURL}, booted ${imageOf(booted) || '<none>'}`);
  return out;
}
