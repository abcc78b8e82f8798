// Renders 1,000 MachineConfigs carrying 10,000 files, from JSON text to rendered JSON, beside
// JSON.parse + JSON.stringify of the same input (the floor any render must pay).
// Goal: render within 3x the floor.

import { defaultPools, parseManifests, renderPool, renderedConfigJson } from '../src/machineconfig/index.ts';
import { compareMedian, ms, report } from './harness.ts';

const CONFIGS = Number(process.env.BENCH_CONFIGS ?? 1000);
const FILES_PER_CONFIG = Number(process.env.BENCH_FILES_PER_CONFIG ?? 10);
const RUNS = Number(process.env.BENCH_RUNS ?? 41);

export function run(): void {
  const docs = [];
  for (let i = 0; i < CONFIGS; i++) {
    const files = [];
    for (let j = 0; j < FILES_PER_CONFIG; j++) {
      const body = `k${j}=${i}\n`;
      files.push({ path: `/etc/b/${i}-${j}`, mode: 0o644, contents: { source: 'data:text/plain;charset=utf-8;base64,' + Buffer.from(body).toString('base64') } });
    }
    docs.push({
      apiVersion: 'machineconfiguration.openshift.io/v1',
      kind: 'MachineConfig',
      metadata: { name: `${String(i).padStart(4, '0')}-bench`, labels: { 'machineconfiguration.openshift.io/role': 'worker' } },
      spec: { config: { ignition: { version: '3.2.0' }, storage: { files } }, kernelArguments: [`bench.${i}=1`] },
    });
  }
  const text = JSON.stringify(docs);
  const worker = defaultPools()[1]!;

  let renderedName = '';
  const { baseline: floor, candidate: render, baselineCpu: floorCpu, candidateCpu: renderCpu } = compareMedian(RUNS, () => {
    JSON.stringify(JSON.parse(text));
  }, () => {
    const { configs, problems } = parseManifests(text, 'bench');
    if (problems.length) throw new Error(problems[0]!.message);
    const rendered = renderPool(worker, configs);
    renderedName = renderedConfigJson(rendered).length > 0 ? rendered.name : '';
  });
  const ratio = render / floor;
  report(`render: ${CONFIGS} MachineConfigs, ${CONFIGS * FILES_PER_CONFIG} files, ${(text.length / 1048576).toFixed(1)} MiB of JSON (median of ${RUNS})`, [
    ['floor (JSON.parse + JSON.stringify)', ms(floor)],
    ['render (parse, validate, merge, hash, serialize)', ms(render)],
    ['rendered', renderedName],
    // The steadier figure on a shared machine: wall clock also counts waiting for a core.
    ['CPU: floor / render / ratio', `${ms(floorCpu)} / ${ms(renderCpu)} / ${(renderCpu / floorCpu).toFixed(2)}x`],
  ], { ratio, goal: '<= 3.00', ok: ratio <= 3 });
}
