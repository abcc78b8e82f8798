// The booted kernel's command line (/proc/cmdline on a host). Kernel arguments are validated
// against it, not against `rpm-ostree kargs`, which prints the pending deployment's: a karg that
// is staged but not booted (the reboot has not happened, or came back on the old deployment)
// must not pass validation.

import { readFileSync } from 'node:fs';
import { splitKernelArguments } from '../machineconfig/index.ts';

/** Set by the boot loader and ostree, not by any config: left out of what the node reports. */
const BOOT_ONLY = /^(BOOT_IMAGE|ostree|initrd)=/;

export type Cmdline = { ok: true; args: string[] } | { ok: false; reason: string };

export function readKernelCmdline(path: string): Cmdline {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return { ok: false, reason: `cannot read the booted kernel command line from ${path}: ${(err as Error).message}` };
  }
  return { ok: true, args: splitKernelArguments([text.trim()]) };
}

/** The arguments a config could have set (the boot loader's own left out). */
export function configurableArgs(args: string[]): string[] {
  return args.filter((a) => !BOOT_ONLY.test(a));
}
