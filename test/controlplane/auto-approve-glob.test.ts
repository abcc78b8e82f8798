// Auto-approve globs match in linear time (issue 31, hole 11). Each `*` used to become `.*` in a
// RegExp: with five stars, one anonymous request for a 252-character name blocked the event loop
// 82 s (gRPC calls hit their deadlines). Now a two-pointer matcher answers in microseconds, and
// means what the RegExp meant on every name.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { autoApproveRuleFor, globMatches } from '../../src/controlplane/api/enrollment-requests.ts';
import { createCertificateRequest } from '../../src/runtime/pki.ts';
import { requestEnrollment } from '../helpers/bootstrap-client.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

/** What the glob meant: the old RegExp, safe to use on the short names below. */
const compiled = new Map<string, RegExp>();
const reference = (glob: string, name: string): boolean => {
  let re = compiled.get(glob);
  if (!re) compiled.set(glob, re = new RegExp(`^${glob.replaceAll('.', '\\.').replaceAll('*', '.*').replaceAll('?', '.')}$`));
  return re.test(name);
};

test('the matcher agrees with the RegExp meaning of * and ? on every short pattern and name', () => {
  const cases: [string, string, boolean][] = [
    ['edge-*', 'edge-1', true], ['edge-*', 'edge-', true], ['edge-*', 'edg', false], ['edge-*', 'xedge-1', false],
    ['*', '', true], ['*', 'anything', true], ['?', 'a', true], ['?', '', false], ['?', 'ab', false],
    ['rack?-*', 'rack7-n1', true], ['rack?-*', 'rack-n1', false], ['a*b*c', 'abc', true], ['a*b*c', 'aXbYc', true], ['a*b*c', 'acb', false],
    ['*.example.com', 'n1.example.com', true], ['*.example.com', 'n1xexample.com', false], ['a.b', 'a.b', true], ['a.b', 'axb', false],
    ['**a', 'a', true], ['*a*', 'bab', true], ['*a*', 'bbb', false], ['a*', 'a', true], ['*a', 'ba', true], ['*a', 'ab', false],
  ];
  for (const [glob, name, expected] of cases) {
    assert.equal(globMatches(glob, name), expected, `${glob} vs ${name}`);
    assert.equal(reference(glob, name), expected, `the reference agrees on ${glob} vs ${name}`);
  }
  // Every pattern of up to 4 characters over a small alphabet against every name of up to 5.
  const alphabet = ['a', 'b', '-'];
  const words = (chars: string[], n: number): string[] => (n === 0 ? [''] : [...words(chars, n - 1), ...words(chars, n - 1).flatMap((w) => (w.length === n - 1 ? chars.map((c) => w + c) : []))]);
  const names = [...new Set(words(alphabet, 5))];
  const globs = [...new Set(words([...alphabet, '*', '?'], 4))];
  let checked = 0;
  for (const glob of globs) {
    for (const name of names) {
      assert.equal(globMatches(glob, name), reference(glob, name), `${JSON.stringify(glob)} vs ${JSON.stringify(name)}`);
      checked++;
    }
  }
  assert.ok(checked > 100_000, `${checked} cases`);
  assert.equal(autoApproveRuleFor([{ pool: 'worker', nodeNamePattern: 'edge-*' }], 'master', 'edge-1'), undefined, 'a rule serves its own pool only');
});

let server: TestServer;
before(async () => {
  server = await startTestServer({ bootstrap: { autoApprove: [{ pool: 'worker', nodeNamePattern: 'edge-*-*-*-*-*-x' }] } });
});
after(() => server.close());

test('a pathological name against a five-star rule is answered at once, and the server stays responsive', async () => {
  // A valid node name of 246 characters that almost matches: every split of its dashes among the
  // stars is tried by a backtracking RegExp (tens of seconds at this length on the old server).
  const name = `edge-${'-'.repeat(240)}y`;
  const key = await createCertificateRequest(name);
  const started = performance.now();
  const asked = await requestEnrollment(server, name, 'worker', { key });
  const took = performance.now() - started;
  assert.equal(asked.status, 202, JSON.stringify(asked.body));
  assert.equal(asked.body.state, 'Pending', 'no rule matched: it waits for an operator');
  // Generous (a TLS handshake and a store write on a shared, loaded machine): the old matcher
  // took 82 s on an idle one, 207 s while this suite's neighbours ran.
  assert.ok(took < 5000, `answered in ${Math.round(took)} ms`);
  // The rule still approves what it names.
  const real = await requestEnrollment(server, 'edge-a-b-c-d-e-x', 'worker');
  assert.equal(real.body.state, 'Approved', JSON.stringify(real.body));
});
