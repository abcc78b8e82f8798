#!/usr/bin/env node
// STAND-IN for rpm-ostree, which is not packaged for Debian. It follows the documented command
// line and the `status --json` shape of the real tool for the commands mcplane uses, and keeps
// its deployments in a JSON state file (--standin-state FILE or RPM_OSTREE_STANDIN_STATE).
// With --standin-cmdline FILE it also plays the kernel: FILE always holds the command line the
// booted deployment was booted with, as /proc/cmdline does on a host.
//
//   status --json                         {deployments: [...], transaction: null}
//   kargs                                 rpm-ostree(1): "Without options, display current default
//                                         kernel arguments": the default deployment's (index 0 in
//                                         the boot order, the next boot's: staged, one a rollback
//                                         moved up, else the booted one)
//   kargs --append-if-missing=A --delete-if-present=B ...   stages a deployment: rpm-ostree(1)
//                                         "By default, modifications are applied to the kernel
//                                         arguments of the default deployment"
//   override remove PKG... [--install P]  /  override reset PKG... [--uninstall P]
//   update [--install P] [--uninstall P]
//   rebase [--experimental] ostree-unverified-registry:IMAGE
//   cleanup -p|--pending                  rpm-ostree(1): "Use -p/--pending to remove the pending
//                                         deployment" ("the \"pending\" deployment (the next
//                                         boot)": the default one when it is not the booted one);
//                                         without one it does nothing and succeeds
//   cancel
//   rollback                              as rpm-ostree(1): "Prepare the previous deployment to be
//                                         booted next": a staged deployment is dropped (the booted
//                                         one stays the default); otherwise the rollback deployment
//                                         moves to the top of the boot order. Without one it fails
//                                         with rpm-ostree's "No rollback deployment found".
//
// Test-only verbs (not rpm-ostree's): `standin-boot` makes the staged deployment the booted
// one (what a reboot does); `standin-busy N` makes the next N commands fail as if another
// transaction were running, with rpm-ostree's message; `standin-hang N` makes the next N
// commands that stage a deployment hang forever, as a wedged rpm-ostreed would;
// `standin-fail VERB [N]` makes the next N commands with that verb fail with an error that is
// not a busy daemon's (one rpm-ostree cannot do, such as a cleanup that fails).

import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';

let args = process.argv.slice(2);
let statePath = process.env.RPM_OSTREE_STANDIN_STATE;
if (args[0] === '--standin-state') {
  statePath = args[1];
  args = args.slice(2);
}
let cmdlinePath = process.env.RPM_OSTREE_STANDIN_CMDLINE;
if (args[0] === '--standin-cmdline') {
  cmdlinePath = args[1];
  args = args.slice(2);
}
if (!statePath) {
  process.stderr.write('rpm-ostree stand-in: no state file (--standin-state FILE)\n');
  process.exit(2);
}

function load() {
  try {
    return JSON.parse(readFileSync(statePath, 'utf8'));
  } catch {
    return {
      busy: 0,
      calls: [],
      deployments: [deployment({ image: 'ostree-unverified-registry:quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:base', kargs: ['rw', 'root=UUID=standin'], booted: true })],
    };
  }
}
function save(state) {
  writeFileSync(statePath + '.tmp', JSON.stringify(state, null, 2));
  renameSync(statePath + '.tmp', statePath);
  if (cmdlinePath) {
    const b = state.deployments.find((d) => d.booted);
    writeFileSync(cmdlinePath + '.tmp', `BOOT_IMAGE=(hd0,gpt3)/ostree/${b.id}/vmlinuz ostree=/ostree/boot.1/rhcos/${b.checksum}/0 ${b['standin-kargs'].join(' ')}\n`);
    renameSync(cmdlinePath + '.tmp', cmdlinePath);
  }
}
function deployment({ image, kargs, packages = [], removals = [], booted = false, staged = false }) {
  const d = { booted, staged, 'container-image-reference': image, 'requested-packages': packages, 'requested-base-removals': removals, 'standin-kargs': kargs, osname: 'rhcos', version: 'standin' };
  d.checksum = createHash('sha256').update(JSON.stringify([image, kargs, packages, removals])).digest('hex');
  d.id = `rhcos-${d.checksum.slice(0, 12)}.0`;
  return d;
}
function fail(message, code = 1) {
  process.stderr.write(`error: ${message}\n`);
  process.exit(code);
}

const state = load();
const verb = args[0];
if (verb !== 'standin-boot' && verb !== 'standin-busy' && verb !== 'standin-fail') state.calls.push(args.join(' '));
if (state.fail?.[verb] > 0) {
  state.fail[verb]--;
  save(state);
  fail(`${verb} failed (standin-fail)`);
}
if (state.busy > 0 && !verb.startsWith('standin-') && !(verb === 'status')) {
  state.busy--;
  save(state);
  fail('Transaction in progress: deploy --lock-finalization\n You can cancel the current transaction with `rpm-ostree cancel`');
}

const booted = () => state.deployments.find((d) => d.booted);
const staged = () => state.deployments.find((d) => d.staged);
/**
 * rpm-ostree's pending deployment: the one the next boot uses when it is not the booted one (a
 * staged deployment, or the one a rollback moved to the top of the boot order); undefined when
 * the booted one boots next.
 */
const pending = () => staged() ?? (state.deployments[0]?.booted ? undefined : state.deployments[0]);
/** Stage a change on top of the default deployment (the pending one, else the booted one), as rpm-ostree does. */
function stage(change) {
  if (state.hang > 0) {
    state.hang--;
    save(state);
    setInterval(() => undefined, 1 << 30); // never returns
    return new Promise(() => undefined);
  }
  const base = pending() ?? booted();
  const next = { image: base['container-image-reference'], kargs: [...base['standin-kargs']], packages: [...base['requested-packages']], removals: [...base['requested-base-removals']] };
  change(next);
  const d = deployment({ ...next, staged: true });
  state.deployments = [d, ...state.deployments.filter((x) => x.booted)];
  save(state);
}
const opts = (name) => args.filter((a) => a.startsWith(`--${name}=`)).map((a) => a.slice(name.length + 3))
  .concat(args.flatMap((a, i) => (a === `--${name}` ? [args[i + 1]] : [])));
const positional = () => args.slice(1).filter((a, i, all) => !a.startsWith('--') && !['--install', '--uninstall'].includes(all[i - 1]));

switch (verb) {
  case 'status':
    if (!args.includes('--json')) fail('the stand-in only implements status --json');
    save(state);
    process.stdout.write(JSON.stringify({ deployments: state.deployments, transaction: null, 'cached-update': null, 'update-driver': null }, null, 2) + '\n');
    break;
  case 'kargs': {
    const append = opts('append-if-missing').concat(opts('append'));
    const remove = opts('delete-if-present').concat(opts('delete'));
    if (append.length === 0 && remove.length === 0) {
      save(state);
      process.stdout.write((pending() ?? booted())['standin-kargs'].join(' ') + '\n');
      break;
    }
    stage((d) => {
      d.kargs = d.kargs.filter((k) => !remove.includes(k));
      for (const k of append) if (!d.kargs.includes(k)) d.kargs.push(k);
    });
    process.stdout.write('Kernel arguments updated.\nRun "systemctl reboot" to start a reboot\n');
    break;
  }
  case 'override': {
    const sub = args[1];
    const pkgs = positional().slice(1);
    const install = opts('install');
    const uninstall = opts('uninstall');
    if (sub !== 'remove' && sub !== 'reset') fail(`unknown override subcommand ${sub}`);
    stage((d) => {
      if (sub === 'remove') d.removals = [...new Set([...d.removals, ...pkgs])];
      else d.removals = d.removals.filter((p) => !pkgs.includes(p));
      d.packages = [...new Set([...d.packages.filter((p) => !uninstall.includes(p)), ...install])];
    });
    process.stdout.write('Staging deployment... done\n');
    break;
  }
  case 'update': {
    const install = opts('install');
    const uninstall = opts('uninstall');
    stage((d) => { d.packages = [...new Set([...d.packages.filter((p) => !uninstall.includes(p)), ...install])]; });
    process.stdout.write('Staging deployment... done\n');
    break;
  }
  case 'rebase': {
    const ref = positional()[0];
    if (!ref || !/^ostree-(unverified-registry|image-signed|remote-image):/.test(ref)) fail(`rebase needs an ostree container reference, got ${ref}`);
    stage((d) => { d.image = ref; });
    process.stdout.write('Staging deployment... done\n');
    break;
  }
  case 'cleanup': {
    // Only -p: the agent drops an undone update's deployment with it (-r, -b, -m are not used).
    if (!args.includes('-p') && !args.includes('--pending')) fail('the stand-in only implements cleanup -p');
    const p = pending();
    if (p) state.deployments = state.deployments.filter((d) => d !== p);
    save(state);
    process.stdout.write(p ? `Deleting deployment ${p.checksum}.0\n` : 'Deployments unchanged.\n');
    break;
  }
  case 'cancel':
    save(state);
    break;
  case 'rollback': {
    const s = staged();
    const previous = state.deployments.find((d) => !d.booted && !d.staged);
    if (s) {
      state.deployments = state.deployments.filter((d) => d !== s);
    } else if (previous) {
      state.deployments = [previous, ...state.deployments.filter((d) => d !== previous)];
    } else {
      fail('No rollback deployment found');
    }
    save(state);
    process.stdout.write(`Moving '${(s ? booted() : previous).checksum}.0' to be first deployment\nRun "systemctl reboot" to start a reboot\n`);
    break;
  }
  case 'standin-boot': {
    // The default deployment (first in boot order) boots: the staged one, or one a rollback moved up.
    const s = staged() ?? (state.deployments[0].booted ? undefined : state.deployments[0]);
    if (s) {
      s.staged = false;
      s.booted = true;
      state.deployments = [s, ...state.deployments.filter((d) => d !== s).map((d) => ({ ...d, booted: false }))].slice(0, 2);
    }
    save(state);
    break;
  }
  case 'standin-hang':
    state.hang = Number(args[1] ?? 1);
    save(state);
    break;
  case 'standin-fail':
    state.fail = { ...state.fail, [args[1]]: Number(args[2] ?? 1) };
    save(state);
    break;
  case 'standin-busy':
    state.busy = Number(args[1] ?? 1);
    save(state);
    break;
  default:
    fail(`the stand-in does not implement "${verb}"`);
}
