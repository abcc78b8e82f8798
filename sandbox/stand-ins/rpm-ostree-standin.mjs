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
//
// Download and cache, as rpm-ostree(1) documents them for rebase, upgrade (update) and deploy:
//   "--download-only to only download the target ostree and layered RPMs without actually
//    performing the deployment. This can be used with a subsequent --cache-only invocation to
//    perform the operation completely offline."
//   "--cache-only or -C to perform the rebase without trying to download the target tree from
//    the remote nor the latest packages."
// So `rebase --download-only REF` and `update --download-only --install P` only fill the cache
// (state.cache: images and packages) and stage nothing; with -C/--cache-only a command that needs
// an image or a package the cache lacks fails and stages nothing (the message is the stand-in's),
// so an agent cannot pass by downloading during the apply. Without either flag a command
// downloads what the cache lacks, then stages. The man page documents -C for deploy, install,
// rebase and upgrade only; the stand-in takes it on `override remove/reset ... --install P` too,
// as the agent passes it there for a kernel type (not checked against a real host). A download is a
// transaction: while one runs, other commands but `status` fail as busy, as rpm-ostreed's do.
//
// Test-only verbs (not rpm-ostree's): `standin-size NAME BYTES` gives an image reference (as
// written after ostree-unverified-registry:) or a package its download size (default 0);
// `standin-rate BYTES_PER_SECOND` makes every download take size/rate seconds (0: no limit), a
// slow image source on loopback; `standin-fail-download N CAUSE` makes the next N downloads fail
// with `error: CAUSE` (a registry that refuses, a network that drops); a download prints
// `Receiving NAME: DONE/TOTAL bytes` lines as it goes (the stand-in's format).
// Other test-only verbs: `standin-boot` makes the staged deployment the booted
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

let state = load();
const verb = args[0];
if (!verb.startsWith('standin-')) state.calls.push(args.join(' '));
if (state.fail?.[verb] > 0) {
  state.fail[verb]--;
  save(state);
  fail(`${verb} failed (standin-fail)`);
}
if (state.transaction && verb !== 'status' && !verb.startsWith('standin-') && alive(state.transaction.pid)) {
  save(state);
  fail(`Transaction in progress: ${state.transaction.what}\n You can cancel the current transaction with \`rpm-ostree cancel\``);
}
if (state.busy > 0 && !verb.startsWith('standin-') && !(verb === 'status')) {
  state.busy--;
  save(state);
  fail('Transaction in progress: deploy --lock-finalization\n You can cancel the current transaction with `rpm-ostree cancel`');
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
const cacheOnly = args.includes('-C') || args.includes('--cache-only');
const downloadOnly = args.includes('--download-only');
/**
 * What the command needs from the remote (the image, packages) against the cache: with -C a miss
 * fails; otherwise the misses are downloaded (at the set rate, failing as set) into the cache.
 * With --download-only the command ends here, having staged nothing.
 */
async function fetchInto(needed) {
  state.cache ??= { images: [], packages: [] };
  const missing = needed.filter((n) => !state.cache[n.kind].includes(n.name));
  if (cacheOnly && missing.length) {
    save(state);
    fail(`${missing.map((n) => n.name).join(', ')}: not in the local cache and --cache-only forbids downloading (stage it first with --download-only)`);
  }
  for (const n of missing) {
    if (state.failDownload?.count > 0) {
      state.failDownload.count--;
      save(state);
      fail(`fetching ${n.name}: ${state.failDownload.cause}`);
    }
    const total = state.sizes?.[n.name] ?? 0;
    const rate = state.rate ?? 0;
    state.transaction = { pid: process.pid, what: `${verb} ${n.name}` };
    save(state);
    const ms = rate > 0 ? (total / rate) * 1000 : 0;
    const started = Date.now();
    process.stdout.write(`Receiving ${n.name}: 0/${total} bytes\n`);
    while (Date.now() - started < ms) {
      await new Promise((r) => setTimeout(r, Math.min(200, ms - (Date.now() - started))));
      process.stdout.write(`Receiving ${n.name}: ${Math.min(total, Math.round(((Date.now() - started) / ms) * total))}/${total} bytes\n`);
    }
    process.stdout.write(`Receiving ${n.name}: ${total}/${total} bytes\n`);
    // Other commands (status) wrote the state meanwhile: start again from theirs.
    state = load();
    state.cache ??= { images: [], packages: [] };
    if (!state.cache[n.kind].includes(n.name)) state.cache[n.kind].push(n.name);
    delete state.transaction;
    save(state);
  }
  if (downloadOnly) {
    save(state);
    process.stdout.write(missing.length ? 'Downloaded; nothing deployed (--download-only)\n' : 'Nothing to download; nothing deployed (--download-only)\n');
    process.exit(0);
  }
}
const packagesOf = (list) => list.map((name) => ({ kind: 'packages', name }));
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
const positional = () => args.slice(1).filter((a, i, all) => !a.startsWith('-') && !['--install', '--uninstall'].includes(all[i - 1]));

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
    if (downloadOnly) fail('override does not take --download-only');
    await fetchInto(packagesOf(install));
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
    await fetchInto(packagesOf(install));
    stage((d) => { d.packages = [...new Set([...d.packages.filter((p) => !uninstall.includes(p)), ...install])]; });
    process.stdout.write('Staging deployment... done\n');
    break;
  }
  case 'rebase': {
    const ref = positional()[0];
    if (!ref || !/^ostree-(unverified-registry|image-signed|remote-image):/.test(ref)) fail(`rebase needs an ostree container reference, got ${ref}`);
    await fetchInto([{ kind: 'images', name: ref.replace(/^ostree-[a-z-]+:/, '') }]);
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
  case 'standin-size':
    state.sizes = { ...state.sizes, [args[1]]: Number(args[2] ?? 0) };
    save(state);
    break;
  case 'standin-rate':
    state.rate = Number(args[1] ?? 0);
    save(state);
    break;
  case 'standin-fail-download':
    state.failDownload = { count: Number(args[1] ?? 1), cause: args.slice(2).join(' ') || 'connection reset by peer' };
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
