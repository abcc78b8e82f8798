// Which pools get `99-<pool>-generated-registries`: syncImageConfig lists the pools labelled
// machineconfiguration.openshift.io/mco-built-in="" (machine-config-operator 7ff337a4,
// container_runtime_config_controller.go builtInLabelKey; manifests/ label master, worker and
// arbiter), so an arbiter pool's nodes get the mirrors too, and a custom pool renders worker's.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { desiredGeneratedConfigs } from '../../src/machineconfig/generated-configs.ts';
import type { MirrorSetObject } from '../../src/machineconfig/image-config.ts';
import { parseDocuments, readDocuments } from '../../src/machineconfig/manifest.ts';
import { fileEntry, ign, mcDoc, poolDoc } from '../helpers/manifests.ts';

const REGISTRIES = 'unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]\n';
const POLICY = '{"default":[{"type":"insecureAcceptAnything"}]}';
const containerRuntime = (role: string) => mcDoc(`01-${role}-container-runtime`, role, { config: ign('3.4.0', { storage: { files: [fileEntry('/etc/containers/registries.conf', REGISTRIES), fileEntry('/etc/containers/policy.json', POLICY)] } }) });
const roleSelector = (role: string) => ({ machineConfigSelector: { matchLabels: { 'machineconfiguration.openshift.io/role': role } }, nodeSelector: { matchLabels: { [`node-role.kubernetes.io/${role}`]: '' } } });

test('the registries config goes to every mco-built-in pool (arbiter too), not to custom pools', () => {
  const arbiter = { ...poolDoc('arbiter', roleSelector('arbiter')), metadata: { name: 'arbiter', labels: { 'machineconfiguration.openshift.io/mco-built-in': '' } } };
  const docs = [
    poolDoc('master', roleSelector('master')), poolDoc('worker', roleSelector('worker')), arbiter, poolDoc('infra', roleSelector('infra')),
    containerRuntime('master'), containerRuntime('worker'), containerRuntime('arbiter'), containerRuntime('infra'),
    { apiVersion: 'config.openshift.io/v1', kind: 'ImageDigestMirrorSet', metadata: { name: 'mirrors' }, spec: { imageDigestMirrors: [{ source: 'quay.io/app', mirrors: ['mirror.local/app'] }] } },
  ];
  const parsed = parseDocuments(readDocuments(docs.map((d) => stringify(d)).join('---\n'), 'test.yaml').documents);
  assert.deepEqual(parsed.problems, []);
  const out = desiredGeneratedConfigs({ pools: parsed.pools, configs: parsed.configs, kubeletConfigs: [], containerRuntimeConfigs: [], mirrorSets: parsed.sources as MirrorSetObject[] });
  assert.deepEqual(out.configs.map((mc) => mc.metadata.name).sort(), ['99-arbiter-generated-registries', '99-master-generated-registries', '99-worker-generated-registries']);
  const arbiterMc = out.configs.find((mc) => mc.metadata.name === '99-arbiter-generated-registries')!;
  assert.equal(arbiterMc.metadata.labels?.['machineconfiguration.openshift.io/role'], 'arbiter');
});
