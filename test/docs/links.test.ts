// The README and docs/ link each other by relative paths and #anchors; after the README was split
// into docs/ a link to a moved section would otherwise break silently. And every shipped alert's
// runbook_url must open a section of docs/troubleshooting.md.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { REPO_ROOT } from '../helpers/run-cli.ts';

function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return markdownFiles(path);
    return name.endsWith('.md') ? [path] : [];
  });
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fence = false;
  for (const line of text.split('\n')) {
    if (/^\s*```/.test(line)) fence = !fence;
    const m = fence ? null : /^#{1,6} (.*)$/.exec(line);
    if (!m) continue;
    const base = m[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  }
  return out;
}

/** Inline links outside code: [text](target). */
function links(text: string): string[] {
  const out: string[] = [];
  let fence = false;
  for (const line of text.split('\n')) {
    if (/^\s*```/.test(line)) fence = !fence;
    if (fence) continue;
    for (const m of line.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)\)/g)) out.push(m[1]!);
  }
  return out;
}

const pages = [join(REPO_ROOT, 'README.md'), ...markdownFiles(join(REPO_ROOT, 'docs'))];

test('every relative link in the README and docs/ names a file that exists, and an anchor that file has', () => {
  const broken: string[] = [];
  for (const page of pages) {
    const text = readFileSync(page, 'utf8');
    for (const target of links(text)) {
      if (/^[a-z]+:/.test(target)) continue; // https:, mailto:
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const file = path ? join(dirname(page), path) : page;
      const where = `${relative(REPO_ROOT, page)}: ${target}`;
      if (!existsSync(file)) {
        broken.push(`${where} (no such file)`);
        continue;
      }
      if (anchor && file.endsWith('.md') && !anchors(readFileSync(file, 'utf8')).has(anchor)) broken.push(`${where} (no such section)`);
    }
  }
  assert.deepEqual(broken, []);
});

test('every shipped alert has a runbook_url opening its own section of docs/troubleshooting.md', () => {
  const doc = parse(readFileSync(join(REPO_ROOT, 'packaging/prometheus/mcplane-alerts.yaml'), 'utf8')) as { groups: { rules: { alert: string; annotations: Record<string, string> }[] }[] };
  const sections = anchors(readFileSync(join(REPO_ROOT, 'docs/troubleshooting.md'), 'utf8'));
  const byAlert = new Map<string, Set<string>>();
  for (const rule of doc.groups.flatMap((g) => g.rules)) {
    const url = rule.annotations.runbook_url ?? '';
    assert.match(url, /^docs\/troubleshooting\.md#[a-z0-9-]+$/, `${rule.alert}: runbook_url`);
    const anchor = url.split('#')[1]!;
    assert.ok(sections.has(anchor), `${rule.alert}: docs/troubleshooting.md has no section #${anchor}`);
    byAlert.set(rule.alert, (byAlert.get(rule.alert) ?? new Set()).add(anchor));
  }
  // One section per alert: no two alerts share a section (both severities of one alert do).
  const all = [...byAlert.values()].map((s) => [...s]);
  assert.ok(all.every((s) => s.length === 1), 'each alert links one section');
  assert.equal(new Set(all.flat()).size, byAlert.size, 'each alert has a section of its own');
  assert.ok(byAlert.size >= 8);
});
