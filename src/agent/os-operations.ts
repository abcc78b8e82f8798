// Kernel arguments, kernel type, extensions and the OS image through rpm-ostree. Each change is
// computed against rpm-ostree's own pending deployment (staged, else booted), so running it
// again after a crash does nothing twice.

import { splitKernelArguments, UpdateStepError, type MachineConfigSpec } from '../machineconfig/index.ts';
import { readKernelCmdline } from './kernel-cmdline.ts';
import { EXTENSION_PACKAGES, extensionsOf, imageOf, kernelTypeOf, type RpmOstree } from './rpm-ostree.ts';

export async function applyOsChanges(rpm: RpmOstree, from: MachineConfigSpec | null, to: MachineConfigSpec): Promise<string[]> {
  const done: string[] = [];
  const step = async (object: string, fn: () => Promise<void>): Promise<void> => {
    try {
      await fn();
      done.push(object);
    } catch (err) {
      throw new UpdateStepError('apply', object, (err as Error).message);
    }
  };
  const { booted, staged } = await rpm.status();
  const pending = staged ?? booted;

  const oldKargs = splitKernelArguments(from?.kernelArguments ?? []);
  const newKargs = splitKernelArguments(to.kernelArguments);
  const remove = oldKargs.filter((k) => !newKargs.includes(k));
  const add = newKargs.filter((k) => !oldKargs.includes(k) || !from);
  if (remove.length || add.length) await step('kernelArguments', () => rpm.changeKargs(remove, add));

  const kernelType = kernelTypeOf(pending);
  if (kernelType !== to.kernelType) await step('kernelType', () => rpm.setKernelType(kernelType, to.kernelType));

  const have = extensionsOf(pending);
  const extAdd = to.extensions.filter((e) => !have.includes(e) && EXTENSION_PACKAGES[e]);
  const extRemove = (from?.extensions ?? []).filter((e) => !to.extensions.includes(e) && have.includes(e));
  if (extAdd.length || extRemove.length) await step('extensions', () => rpm.changeExtensions(extRemove, extAdd));

  if (to.osImageURL && imageOf(pending) !== to.osImageURL) await step('osImageURL', () => rpm.rebase(to.osImageURL));
  return done;
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
