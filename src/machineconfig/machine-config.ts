import { parseHooksAnnotation } from './lifecycle-hooks.ts';
import {
  API_VERSION,
  KERNEL_TYPES,
  KIND_MACHINE_CONFIG,
  SUPPORTED_EXTENSIONS,
  type KernelType,
} from './constants.ts';
import { configBudget, type ContentsBudget } from './contents-budget.ts';
import { parseIgnition } from './ignition.ts';
import { checkApiVersion, parseObjectMeta } from './object-meta.ts';
import type { ProblemCollector } from './problem-collector.ts';
import type { MachineConfig, MachineConfigSpec } from './types.ts';

const SPEC_KEYS = [
  'config', 'kernelArguments', 'kernelType', 'fips', 'extensions', 'osImageURL', 'baseOSExtensionsContainerImage',
];

/** Validates and normalizes one MachineConfig document; every problem goes into `c`. `applyBudget`
 * bounds the decoded contents of every config parsed with it together (one request's). */
export function parseMachineConfig(doc: Record<string, unknown>, c: ProblemCollector, applyBudget?: ContentsBudget): MachineConfig | undefined {
  checkApiVersion(doc, c);
  const metadata = parseObjectMeta(doc.metadata, c);
  const rawSpec = c.record(doc.spec, 'spec') ?? {};
  c.onlyKeys(rawSpec, 'spec', SPEC_KEYS);

  const config = parseIgnition(rawSpec.config, c, 'spec.config', configBudget(applyBudget));

  const kernelArguments = c.stringList(rawSpec.kernelArguments, 'spec.kernelArguments') ?? [];
  // Loops rather than forEach: no closure per MachineConfig (a render parses a thousand).
  for (let i = 0; i < kernelArguments.length; i++) {
    if (kernelArguments[i]!.trim() === '') c.add(`spec.kernelArguments[${i}]`, 'kernel-argument', 'a kernel argument cannot be empty');
  }

  const rawKernelType = c.string(rawSpec.kernelType, 'spec.kernelType') ?? '';
  let kernelType: KernelType = 'default';
  if (rawKernelType !== '') {
    if ((KERNEL_TYPES as readonly string[]).includes(rawKernelType)) kernelType = rawKernelType as KernelType;
    else c.add('spec.kernelType', 'kernel-type', `unknown kernelType "${rawKernelType}"; expected one of: ${KERNEL_TYPES.join(', ')}`);
  }

  const extensions = c.stringList(rawSpec.extensions, 'spec.extensions') ?? [];
  for (let i = 0; i < extensions.length; i++) {
    const ext = extensions[i]!;
    if (!(SUPPORTED_EXTENSIONS as readonly string[]).includes(ext)) {
      c.add(`spec.extensions[${i}]`, 'extension-allowlist', `extension "${ext}" is not supported; supported extensions: ${SUPPORTED_EXTENSIONS.join(', ')}`);
    }
  }

  const fips = c.boolean(rawSpec.fips, 'spec.fips') ?? false;
  const osImageURL = c.string(rawSpec.osImageURL, 'spec.osImageURL') ?? '';
  const baseOSExtensionsContainerImage = c.string(rawSpec.baseOSExtensionsContainerImage, 'spec.baseOSExtensionsContainerImage') ?? '';

  // Hooks that ship with the config (mcplane.io/hooks): checked here so a bad one is refused at apply.
  parseHooksAnnotation(metadata?.annotations, c);

  if (!c.ok || !metadata || !config) return undefined;
  const spec: MachineConfigSpec = { config, kernelArguments, kernelType, fips, extensions, osImageURL, baseOSExtensionsContainerImage };
  return { apiVersion: API_VERSION, kind: KIND_MACHINE_CONFIG, metadata, spec };
}

