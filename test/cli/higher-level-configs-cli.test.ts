// mcctl with KubeletConfig and the image mirror sets against a real server, run as a separate
// process: apply, get (table and -o yaml with MCO's conditions), the generated config in
// `get mc`, delete. Generation follows machine-config-operator 7ff337a4
// pkg/controller/kubelet-config/kubelet_config_controller.go and
// pkg/controller/container-runtime-config/container_runtime_config_controller.go.

import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { b64, kubeletBaseConfig, kubeletConfigYaml, UBI_MIRROR_SET } from '../helpers/higher-level-manifests.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { serverFixture } from '../helpers/server-fixture.ts';

const { conn } = serverFixture();
const dir = mkdtempSync(join(tmpdir(), 'mcplane-hl-'));
const mcctl = (...args: string[]) => runCliAsync([...conn, ...args]);

const MANIFESTS = kubeletBaseConfig() + kubeletConfigYaml('set-max-pods', 'worker', 500) + UBI_MIRROR_SET;

test('apply, get, get -o yaml, get mc and delete of a KubeletConfig and an ImageDigestMirrorSet', async () => {
  const file = join(dir, 'hl.yaml');
  writeFileSync(file, MANIFESTS);
  const applied = await mcctl('apply', '-f', file);
  assert.equal(applied.status, 0, applied.stderr);
  assert.match(applied.stdout, /^kubeletconfig\/set-max-pods created$/m);
  assert.match(applied.stdout, /^imagedigestmirrorset\/ubi created$/m);

  const table = await mcctl('get', 'kubeletconfig');
  assert.equal(table.status, 0, table.stderr);
  assert.match(table.stdout, /^NAME +STATUS +GENERATED +AGE$/m);
  assert.match(table.stdout, /^set-max-pods +Success +99-worker-generated-kubelet /m);

  const yaml = parse((await mcctl('get', 'kubeletconfig', 'set-max-pods', '-o', 'yaml')).stdout);
  assert.equal(yaml.kind, 'KubeletConfig');
  assert.deepEqual(yaml.status.conditions.map((c: { type: string; status: string }) => `${c.type}=${c.status}`), ['Accepted=True', 'Success=True']);
  assert.deepEqual(yaml.status.generatedMachineConfigs, ['99-worker-generated-kubelet']);

  // master's configs carry no registries.conf: the IDMS reports it (wide shows the message).
  const idms = await mcctl('get', 'idms', '-o', 'wide');
  assert.match(idms.stdout, /^ubi +Failure +.*no MachineConfig of the pool provides \/etc\/containers\/registries\.conf/m);

  const mcs = await mcctl('get', 'mc');
  assert.match(mcs.stdout, /^99-worker-generated-kubelet +worker /m);

  const deleted = await mcctl('delete', 'kubeletconfig', 'set-max-pods');
  assert.equal(deleted.stdout, 'kubeletconfig/set-max-pods deleted\n');
  assert.doesNotMatch((await mcctl('get', 'mc')).stdout, /99-worker-generated-kubelet/);
});

test('a ClusterImagePolicy through the binary: apply, get clusterimagepolicy, -o yaml, delete; a CRD rule broken is refused naming the field', async () => {
  const key = b64(`-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE${'A'.repeat(40)}\n-----END PUBLIC KEY-----\n`);
  const policy = (scope: string) => `apiVersion: config.openshift.io/v1\nkind: ClusterImagePolicy\nmetadata: {name: signed}\nspec:\n  scopes: ["${scope}"]\n  policy:\n    rootOfTrust:\n      policyType: PublicKey\n      publicKey: {keyData: ${key}}\n`;
  const file = join(dir, 'cip.yaml');
  writeFileSync(file, policy('quay'));
  const refused = await mcctl('apply', '-f', file);
  assert.equal(refused.status, 1);
  assert.match(refused.stderr, /ClusterImagePolicy\/signed: spec\.scopes\[0\]: "quay": invalid image scope format, scope must contain a fully qualified domain name or 'localhost' \[image-scope\]/);
  writeFileSync(file, policy('quay.io/team'));
  const applied = await mcctl('apply', '-f', file);
  assert.equal(applied.status, 0, applied.stderr);
  assert.match(applied.stdout, /^clusterimagepolicy\/signed created$/m);
  assert.match((await mcctl('get', 'clusterimagepolicy')).stdout, /^NAME +STATUS +GENERATED +AGE\nsigned +/m);
  const yaml = parse((await mcctl('get', 'clusterimagepolicy', 'signed', '-o', 'yaml')).stdout);
  assert.equal(yaml.kind, 'ClusterImagePolicy');
  assert.deepEqual(yaml.spec.scopes, ['quay.io/team']);
  assert.equal((await mcctl('delete', 'clusterimagepolicy', 'signed')).stdout, 'clusterimagepolicy/signed deleted\n');
});

test('get criocredentialproviderconfig shows the outcome by its reason: the first condition that is False, else the last', async () => {
  const file = join(dir, 'crio-cp.yaml');
  writeFileSync(file, 'apiVersion: config.openshift.io/v1\nkind: CRIOCredentialProviderConfig\nmetadata: {name: cluster}\nspec:\n  matchImages: [quay.io]\n');
  const applied = await mcctl('apply', '-f', file);
  assert.equal(applied.status, 0, applied.stderr);
  assert.match((await mcctl('get', 'criocredentialproviderconfig')).stdout, /^cluster +MachineConfigRenderingSucceeded +97-master-generated-credentialproviderconfig,97-worker-generated-credentialproviderconfig /m);
  assert.equal((await mcctl('delete', 'criocredentialproviderconfig', 'cluster')).status, 0);
});

test('describe machineconfiguration cluster lists MCO\'s built-in policies, and an applied entry over them', async () => {
  const builtins = await mcctl('describe', 'machineconfiguration', 'cluster');
  assert.equal(builtins.status, 0, builtins.stderr);
  assert.match(builtins.stdout, /^Stored: +no: MCO's built-in policies are the whole policy$/m);
  assert.match(builtins.stdout, /^ {4}\/etc\/containers\/registries\.conf +reload crio\.service; drain unless every change is safe \(MCO's Special\) +built-in$/m);
  assert.match(builtins.stdout, /^ {4}\/etc\/containers\/policy\.json +reload crio\.service +built-in$/m);
  assert.match(builtins.stdout, /^ {4}\/var\/lib\/kubelet\/config\.json +none +built-in$/m);
  const file = join(dir, 'mcfg.yaml');
  writeFileSync(file, 'apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n      - path: /etc/containers/policy.json\n        actions: [{type: Restart, restart: {serviceName: crio.service}}]\n');
  assert.equal((await mcctl('apply', '-f', file)).status, 0);
  const overridden = (await mcctl('describe', 'machineconfiguration', 'cluster')).stdout;
  assert.match(overridden, /^ {4}\/etc\/containers\/policy\.json +restart crio\.service +MachineConfiguration\/cluster$/m);
  assert.doesNotMatch(overridden, /policy\.json +reload/);
});
