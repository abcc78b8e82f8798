import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseManifests, readDocuments } from '../../src/machineconfig/index.ts';

const chrony = `
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-chrony
  labels: {machineconfiguration.openshift.io/role: worker}
spec:
  config:
    ignition: {version: 3.2.0}
    storage:
      files:
      - path: /etc/chrony.conf
        mode: 0644
        contents: {source: "data:,server%20a"}
`;

test('YAML 1.1: mode 0644 is octal 420, as Kubernetes reads it', () => {
  const { configs, problems } = parseManifests(chrony, 'chrony.yaml');
  assert.deepEqual(problems, []);
  assert.equal(configs[0]!.spec.config.storage.files[0]!.mode, 420);
});

test('YAML 1.1: mode 0755 is 493 and a decimal 420 stays 420', () => {
  const { configs } = parseManifests(chrony.replace('0644', '0755'));
  assert.equal(configs[0]!.spec.config.storage.files[0]!.mode, 0o755);
  const decimal = parseManifests(chrony.replace('0644', '420'));
  assert.equal(decimal.configs[0]!.spec.config.storage.files[0]!.mode, 0o644);
});

test('several documents in one text, empty documents skipped', () => {
  const text = `---\n${chrony}\n---\n---\n${chrony.replace('50-chrony', '51-chrony')}`;
  const { configs, problems } = parseManifests(text);
  assert.deepEqual(problems, []);
  assert.deepEqual(configs.map((c) => c.metadata.name), ['50-chrony', '51-chrony']);
});

test('JSON input, a single object or a list', () => {
  const doc = { apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfig', metadata: { name: 'j' }, spec: { kernelArguments: ['a=1'] } };
  assert.equal(parseManifests(JSON.stringify(doc)).configs[0]!.spec.kernelArguments[0], 'a=1');
  assert.equal(parseManifests(JSON.stringify([doc, { ...doc, metadata: { name: 'k' } }])).configs.length, 2);
});

test('kind: List, as `oc get mc -o yaml` prints, is unwrapped', () => {
  const text = `apiVersion: v1\nkind: List\nitems:\n- apiVersion: machineconfiguration.openshift.io/v1\n  kind: MachineConfig\n  metadata: {name: a}\n  spec: {}\n`;
  const { configs, problems } = parseManifests(text);
  assert.deepEqual(problems, []);
  assert.equal(configs[0]!.metadata.name, 'a');
});

test('a YAML syntax error is a problem with the source, not an exception', () => {
  const { problems, configs } = parseManifests('kind: MachineConfig\nmetadata: {name: [unclosed\n', 'broken.yaml');
  assert.equal(configs.length, 0);
  assert.equal(problems[0]!.rule, 'yaml-syntax');
  assert.equal(problems[0]!.source, 'broken.yaml#0');
});

test('a duplicate key is a syntax problem (uniqueKeys), not a silent overwrite', () => {
  const { problems } = parseManifests('kind: MachineConfig\nkind: MachineConfigPool\n');
  assert.equal(problems[0]!.rule, 'yaml-syntax');
});

test('a document that is not a mapping, and an unknown kind, are named', () => {
  const { problems } = parseManifests('- just\n- a list\n---\nkind: ConfigMap\nmetadata: {name: x}\n', 'f.yaml');
  const rules = problems.map((p) => p.rule).sort();
  assert.deepEqual(rules, ['document-type', 'unknown-kind']);
  const unknown = problems.find((p) => p.rule === 'unknown-kind')!;
  assert.equal(unknown.object, 'ConfigMap/x');
  assert.equal(unknown.field, 'kind');
});

test('an MCO kind mcplane does not implement is refused saying what MCO does with it and behind which feature gate', () => {
  const text = ['ImagePolicy', 'APIServer'].map((kind) => `apiVersion: config.openshift.io/v1\nkind: ${kind}\nmetadata: {name: cluster}\n`).join('---\n');
  const { problems } = parseManifests(text, 'f.yaml');
  assert.deepEqual(problems.map((p) => `${p.object} ${p.field} ${p.rule}`), ['ImagePolicy/cluster kind kind-not-implemented', 'APIServer/cluster kind kind-not-implemented']);
  assert.match(problems[0]!.message, /namespaced object.*SigstoreImageVerification feature gate \(on in the Default feature set at MCO 7ff337a4\).*\/etc\/crio\/policies\/<namespace>\.json.*A ClusterImagePolicy/);
  assert.match(problems[1]!.message, /use KubeletConfig spec\.tlsSecurityProfile/);
});

test('the same object twice in one input is refused and both places are named', () => {
  const { problems } = parseManifests(`${chrony}\n---\n${chrony}`, 'dup.yaml');
  assert.equal(problems.length, 1);
  assert.equal(problems[0]!.rule, 'duplicate-object');
  assert.match(problems[0]!.message, /dup\.yaml#0/);
});

test('alias bombs are cut off rather than expanded', () => {
  // Five levels of ten: 111,111 nodes once expanded, past the 100,000 one request may hold.
  const bomb = 'a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n';
  const { problems } = readDocuments(bomb, 'bomb.yaml');
  assert.equal(problems[0]?.rule, 'yaml-expansion');
});
