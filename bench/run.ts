// `npm run bench -- <name...> [--compare REF]`: runs the named benchmarks, or all of them with no name.

const BENCHMARKS: Record<string, () => Promise<{ run: () => void | Promise<void> }>> = {
  render: () => import('./render.ts'),
  controlplane: () => import('./controlplane.ts'),
  'agent-memory': () => import('./agent-memory.ts'),
  agent: () => import('./agent.ts'),
  // The agent's memory table alone (agent runs it too).
  'agent-rss': async () => ({ run: (await import('./agent-rss.ts')).benchRss }),
  'cli-startup': () => import('./cli-startup.ts'),
  // Real agents and a slow image source: minutes, not seconds.
  staging: () => import('./staging.ts'),
};

// `--compare REF` (controlplane): the same sizes on REF's server and this one's, with ratios.
const args = process.argv.slice(2);
const compareAt = args.indexOf('--compare');
if (compareAt >= 0) {
  const ref = args[compareAt + 1];
  if (!ref || ref.startsWith('-')) {
    console.error('--compare needs a git ref: npm run bench -- controlplane --compare <commit|branch|tag>');
    process.exit(2);
  }
  process.env.BENCH_COMPARE = ref;
  args.splice(compareAt, 2);
}
const names = args;
const unknown = names.filter((n) => !(n in BENCHMARKS));
if (unknown.length) {
  console.error(`unknown benchmark ${unknown.join(', ')}; available: ${Object.keys(BENCHMARKS).join(', ')}`);
  process.exit(2);
}
for (const name of names.length ? names : Object.keys(BENCHMARKS)) {
  await (await BENCHMARKS[name]!()).run();
}
