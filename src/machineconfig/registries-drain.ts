// Whether a registries.conf change needs the node drained, as MCO's daemon decides it
// (machine-config-operator 7ff337a4, pkg/daemon/drain.go: isDrainRequired and
// isSafeContainerRegistryConfChanges). The answer carries the rule that decided, in words, so a
// preview can say why ("new digest-only mirror: reload crio, no drain").

import { TomlSyntaxError } from './errors.ts';
import { decodeRegistriesConf, MIRROR_BY_DIGEST_ONLY, REGISTRIES_CONF_PATH, type Registry, type RegistryEndpoint } from './registries-config.ts';

export interface RegistriesChangeVerdict {
  safe: boolean;
  /** The rule that decided, e.g. "mirror mirror.com/x has been removed in registry example.com/x". */
  reason: string;
}

const scopeOf = (r: Registry): string => (r.prefix !== '' ? r.prefix : r.location);
const findMirror = (loc: string, mirrors: RegistryEndpoint[]): RegistryEndpoint | undefined => mirrors.find((m) => m.location === loc);

function allDigestOnly(reg: Registry): boolean {
  if (reg.mirrors.length === 0) return reg.mirrorByDigestOnly;
  return reg.mirrors.every((m) => m.pullFromMirror === MIRROR_BY_DIGEST_ONLY);
}

function sameRegistry(a: Registry, b: Registry): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * isSafeContainerRegistryConfChanges: safe are appended search registries, a new registry whose
 * mirrors are all digest-only, new digest-only mirrors (or any new mirror of a
 * mirror-by-digest-only registry) and reordered mirrors; anything removed, a changed prefix,
 * location, blocked or insecure, or a mirror that is not digest-only is not. Unparsable TOML
 * raises TomlSyntaxError (MCO's error, which then drains).
 */
export function registriesChangeVerdict(oldText: string, newText: string): RegistriesChangeVerdict {
  const oldConf = decodeRegistriesConf(oldText);
  const newConf = decodeRegistriesConf(newText);
  const oldSearch = oldConf.unqualifiedSearchRegistries ?? [];
  const newSearch = newConf.unqualifiedSearchRegistries ?? [];
  // Search order matters (images are looked up in order): only appending is safe.
  if (oldSearch.length > newSearch.length) return { safe: false, reason: 'an unqualified-search-registries entry has been removed' };
  for (let i = 0; i < oldSearch.length; i++) {
    if (newSearch[i] !== oldSearch[i]) return { safe: false, reason: 'unqualified-search-registries have been reordered or replaced' };
  }
  const oldRegs = new Map((oldConf.registries ?? []).map((r) => [scopeOf(r), r]));
  const newRegs = new Map((newConf.registries ?? []).map((r) => [scopeOf(r), r]));
  for (const scope of oldRegs.keys()) {
    if (!newRegs.has(scope)) return { safe: false, reason: `registry ${scope} has been removed` };
  }
  for (const [scope, newReg] of newRegs) {
    const oldReg = oldRegs.get(scope);
    if (!oldReg) {
      if (!allDigestOnly(newReg)) return { safe: false, reason: `registry ${scope} has been added with a mirror that is not pull-from-mirror=digest-only` };
      continue;
    }
    if (sameRegistry(oldReg, newReg)) continue;
    if (oldReg.prefix !== newReg.prefix) return { safe: false, reason: `prefix of registry ${scope} has changed from "${oldReg.prefix}" to "${newReg.prefix}"` };
    if (oldReg.location !== newReg.location) return { safe: false, reason: `location of registry ${scope} has changed from "${oldReg.location}" to "${newReg.location}"` };
    if (oldReg.blocked !== newReg.blocked) return { safe: false, reason: `blocked of registry ${scope} has changed from ${oldReg.blocked} to ${newReg.blocked}` };
    if (oldReg.insecure !== newReg.insecure) return { safe: false, reason: `insecure of registry ${scope} has changed from ${oldReg.insecure} to ${newReg.insecure}` };
    for (const m of oldReg.mirrors) {
      if (!findMirror(m.location, newReg.mirrors)) return { safe: false, reason: `mirror ${m.location} has been removed in registry ${scope}` };
    }
    for (const m of newReg.mirrors) {
      const before = findMirror(m.location, oldReg.mirrors);
      if (before && m.pullFromMirror !== before.pullFromMirror && m.pullFromMirror !== MIRROR_BY_DIGEST_ONLY) {
        return { safe: false, reason: `pull-from-mirror of mirror ${m.location} has changed from "${before.pullFromMirror}" to "${m.pullFromMirror}"` };
      }
      if (!before && m.pullFromMirror !== MIRROR_BY_DIGEST_ONLY && !newReg.mirrorByDigestOnly) {
        return { safe: false, reason: `mirror ${m.location} has been added in registry ${scope} with pull-from-mirror "${m.pullFromMirror}", not digest-only` };
      }
    }
  }
  return { safe: true, reason: `${REGISTRIES_CONF_PATH}: only safe changes (appended search registries, new digest-only mirrors or registries, reordered mirrors)` };
}

/** MCO's post-config-change actions as the daemon spells them. */
export const POST_CONFIG_CHANGE_ACTION_NONE = 'none';
export const POST_CONFIG_CHANGE_ACTION_REBOOT = 'reboot';
export const POST_CONFIG_CHANGE_ACTION_RELOAD_CRIO = 'reload crio';
export const POST_CONFIG_CHANGE_ACTION_RESTART_CRIO = 'restart crio';

/**
 * isDrainRequired: a reboot drains; a crio reload or restart drains only for an unsafe
 * registries.conf change; none does not; anything else drains. `oldFile`/`newFile` read the two
 * versions of a path ("" when absent, as MCO's GetIgnitionFileDataByPath gives).
 */
export function isDrainRequired(actions: readonly string[], changedPaths: readonly string[], oldFile: (path: string) => string, newFile: (path: string) => string): RegistriesChangeVerdict & { drain: boolean } {
  if (actions.includes(POST_CONFIG_CHANGE_ACTION_REBOOT)) return { drain: true, safe: false, reason: 'the node reboots' };
  if (actions.includes(POST_CONFIG_CHANGE_ACTION_RELOAD_CRIO) || actions.includes(POST_CONFIG_CHANGE_ACTION_RESTART_CRIO)) {
    if (!changedPaths.includes(REGISTRIES_CONF_PATH)) return { drain: false, safe: true, reason: 'crio reload without a registries.conf change' };
    try {
      const v = registriesChangeVerdict(oldFile(REGISTRIES_CONF_PATH), newFile(REGISTRIES_CONF_PATH));
      return { ...v, drain: !v.safe };
    } catch (err) {
      if (err instanceof TomlSyntaxError) return { drain: true, safe: false, reason: `${REGISTRIES_CONF_PATH} does not parse: ${err.message}` };
      throw err;
    }
  }
  if (actions.includes(POST_CONFIG_CHANGE_ACTION_NONE)) return { drain: false, safe: true, reason: 'no action needed' };
  return { drain: true, safe: false, reason: 'an unhandled action drains by default' };
}
