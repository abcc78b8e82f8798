// CRI-O's pinned images drop-in, byte for byte as MCO's daemon writes it
// (pkg/daemon/pinned_image_set.go: crioPinnedImagesDropInFilePath, createCrioConfigFileBytes,
// ensureCrioPinnedImagesConfigFile, uniqueSortedImageNames). CRI-O never garbage-collects a pinned
// image; it reads the list on reload, so the file changes only with the list and every change (a
// removal included) is followed by a reload of CRI-O, and an unchanged file by none.

import { readFileSync } from 'node:fs';
import { UpdateStepError } from '../machineconfig/errors.ts';
import { writeFileAtomic, unlinkDurable } from './durable-fs.ts';
import { resolveManagedPath } from './host-paths.ts';

export const CRIO_PINNED_IMAGES_DROP_IN = '/etc/crio/crio.conf.d/50-pinned-images';

/** MCO's uniqueSortedImageNames: blank names dropped, duplicates once, sorted by bytes (Go's sort.Strings). */
export function uniqueSortedImageNames(images: Iterable<string>): string[] {
  const unique = new Set<string>();
  for (const image of images) if (image.trim() !== '') unique.add(image);
  return [...unique].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
}

/**
 * What BurntSushi/toml v1.5.0's encoder (MCO vendors it) writes for
 * `struct{Crio struct{Image struct{PinnedImages []string "pinned_images,omitempty"} "image"} "crio"}`:
 * each table header indented two spaces per level below the top, the key four, the array on one
 * line with ", " between elements, a newline after each line. An empty list has no key at all.
 */
export function crioPinnedImagesToml(images: readonly string[]): string {
  const key = images.length > 0 ? `    pinned_images = [${images.map(tomlQuoted).join(', ')}]\n` : '';
  return `[crio]\n  [crio.image]\n${key}`;
}

// BurntSushi's dblQuotedReplacer: quote and backslash escaped, control characters as \uXXXX except
// the five with short escapes. Digest references hold none of them; kept for exactness.
function tomlQuoted(s: string): string {
  const short: Record<string, string> = { '"': '\\"', '\\': '\\\\', '\b': '\\b', '\t': '\\t', '\n': '\\n', '\f': '\\f', '\r': '\\r' };
  return `"${s.replace(/["\\\x00-\x1f\x7f]/g, (c) => short[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}"`;
}

export interface DropInResult {
  /** The file's path on the host (under the agent's root). */
  hostPath: string;
  /** 'written', 'removed', or 'unchanged' (then CRI-O was not reloaded). */
  change: 'written' | 'removed' | 'unchanged';
}

/**
 * MCO's ensureCrioPinnedImagesConfigFile under `root`: with no images the file is removed (and
 * CRI-O reloaded) if it exists; otherwise it is written when its content, trimmed of surrounding
 * white space, differs, then CRI-O reloaded. `reload` rejects to say the reload failed.
 */
export async function ensureCrioPinnedImagesDropIn(root: string, images: readonly string[], reload: () => Promise<void>): Promise<DropInResult> {
  const resolved = resolveManagedPath(root, CRIO_PINNED_IMAGES_DROP_IN);
  if (!resolved.ok) throw new UpdateStepError('pin images', `file ${CRIO_PINNED_IMAGES_DROP_IN}`, resolved.reason);
  const { hostPath } = resolved;
  let existing: string | undefined;
  try {
    existing = readFileSync(hostPath, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (images.length === 0) {
    if (existing === undefined) return { hostPath, change: 'unchanged' };
    unlinkDurable(hostPath);
    await reload();
    return { hostPath, change: 'removed' };
  }
  const content = crioPinnedImagesToml(images);
  if (existing !== undefined && existing.trim() === content.trim()) return { hostPath, change: 'unchanged' };
  writeFileAtomic(hostPath, content, { mode: 0o644 });
  await reload();
  return { hostPath, change: 'written' };
}
