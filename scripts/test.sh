#!/usr/bin/env bash
# The whole test run, from a fresh clone (npm test and .ci/run call this):
#   1. the Debian packages the tests drive for real (installed when root, else the exact
#      apt-get command is printed and the run stops),
#   2. npm ci when node_modules is missing or does not match package-lock.json,
#   3. every test file on SQLite and the files whose outcome depends on the store on etcd as well
#      (lists below), in two lanes side by side: the files that assert wall-clock bounds one at a
#      time at high priority, everything else TEST_CONCURRENCY (default 3) at a time ten nice levels lower
#      (see run_lanes); the typecheck beside them. With MCPLANE_TEST_COVERAGE=1, coverage (off by
#      default: V8's precise coverage about doubles the CPU of the test files that run a server in
#      their own process, and the run is CPU-bound on two cores),
#   4. the 15 slowest files, each lane's wall time, and every skipped test (a skip fails the run).
# Arguments: files to run instead of the whole suite (on SQLite, and on etcd those in the etcd
# list), e.g. scripts/test.sh test/controlplane/rollout.test.ts; or --etcd-only: the etcd list
# alone (npm run test:etcd). Neither typechecks nor collects coverage.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# --- 1. Debian packages (also listed in .ci/run's header) -------------------------------------
missing=()
command -v rpmbuild >/dev/null || missing+=(rpm)                    # rpmbuild, rpm: the RPM tests
[ -x /lib/systemd/systemd ] || missing+=(systemd)                    # real systemd user managers
command -v unshare >/dev/null || missing+=(util-linux)               # their private mount namespaces
[ -x /usr/bin/etcd ] || missing+=(etcd-server)                       # real etcd members
command -v fish >/dev/null || missing+=(fish)                       # mcctl completion fish, loaded by fish
command -v etcdctl >/dev/null || missing+=(etcd-client)              # etcdctl snapshot save/restore (backup-restore test)
[ -x /usr/bin/chromium ] || missing+=(chromium fonts-liberation)     # mcctl dashboard in a browser
{ [ -x /usr/bin/prometheus ] && command -v promtool >/dev/null; } || missing+=(prometheus)  # scrapes, alert rules
[ -x /usr/bin/containerd ] || missing+=(containerd)                  # a real CRI for the pinned image puller
[ -x /usr/bin/docker-registry ] || missing+=(docker-registry)        # the registry it pulls from, on loopback
if [ ${#missing[@]} -gt 0 ]; then
  # No recommends: they pull in a desktop (printing, exporters) the tests do not use.
  install=(apt-get install -y -qq --no-install-recommends "${missing[@]}")
  if [ "$(id -u)" != 0 ]; then
    echo "missing Debian packages: ${missing[*]}; as root run:" >&2
    echo "  apt-get update && ${install[*]}" >&2
    exit 1
  fi
  echo "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${install[@]}" >/dev/null
fi
if [ "$(id -u)" != 0 ] && [ "${MCPLANE_TEST_ALLOW_SKIPS:-}" != 1 ]; then
  echo "the agent and packaging tests start systemd user managers in private mount namespaces and" >&2
  echo "cgroups, which needs root: run as root (or set MCPLANE_TEST_ALLOW_SKIPS=1 to skip them)" >&2
  exit 1
fi

# --- 2. npm packages ---------------------------------------------------------------------------
# `npm ls` fails when a package is missing or does not match package.json. A node_modules that is
# a link (a worktree sharing another checkout's) is someone else's to update: left alone.
if [ ! -e node_modules ] || { [ ! -L node_modules ] && ! npm ls --depth=0 >/dev/null 2>&1; }; then
  npm ci --no-audit --no-fund
fi
# Node 24 comes from the node@24 dev dependency even where the machine's node is older.
export PATH="$ROOT/node_modules/.bin:$PATH"

# The programs the tests start (mcctl, servers, agents) run from the esbuild bundles that npm pack
# and the RPMs ship: a start through tsx costs about 2 s of CPU resolving and transforming
# modules (a bundle: 0.35 s), and the suite starts hundreds. They are copied to a directory of
# their own, because the tests of the bundles rebuild dist/bundle (npm pack, the bundle tests) and
# must not pull it from under a neighbour. MCPLANE_TEST_BUNDLES=0 runs everything from source.
if [ "${MCPLANE_TEST_BUNDLES:-1}" = 1 ]; then
  npm run -s build >/dev/null
  rm -rf dist/test-bundle && cp -r dist/bundle dist/test-bundle
  export MCPLANE_TEST_BUNDLES=1
  # Servers the test files run in their own process come from source; their worker threads (the
  # etcd lease thread, the status thread) run from the bundle (src/runtime/worker-thread.ts).
  export MCPLANE_THREAD_BUNDLE=$ROOT/dist/test-bundle/mcplane-server.cjs
fi

# The test files themselves run on Node's own type stripping, not tsx: tsx's loader, resolver
# and source maps cost about 1.5 s of CPU in every file's process that imports the server (a
# quarter of a short file's CPU), and the suite runs some 250 such processes. The sources keep to
# the syntax Node can strip (tsconfig's erasableSyntaxOnly: no parameter properties or enums).

RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/mcplane-test-run-XXXXXX")
# Node's compile cache for every process of the run: the suite starts the 5 MiB server bundle and
# the agent's some hundreds of times, and each start compiles it again without one (0.54 s of CPU
# for `mcplane-server --version`, 0.40 s with it).
export NODE_COMPILE_CACHE=$RUN_DIR/compile-cache
export MCPLANE_TEST_RECORD=$RUN_DIR/record.jsonl
WALL=$RUN_DIR/wall.txt
: >"$MCPLANE_TEST_RECORD"
CONCURRENCY=${TEST_CONCURRENCY:-3}

# --- 3. The suite ------------------------------------------------------------------------------
# Files that assert wall-clock bounds (failover and re-registration times, deadlines, exit within
# N s of a signal, lease expiry margins) or race timers against real processes: one at a time.
SERIAL=(
  test/controlplane/replica-failover.test.ts      # a new leader within 10 s, agents back within 5 s
  test/controlplane/replica-partition.test.ts     # NOT_SERVING within 5 s of the cut
  test/controlplane/store-contract.test.ts        # deadlines + 500 ms, lease loss within its TTL
  test/controlplane/durability.test.ts            # exits within 2 s of SIGTERM
  test/kubernetes/drain-failover.test.ts          # a drain resumed by the next leader
  test/agent/multiple-servers.test.ts             # re-registers on the second replica within 5 s
  test/agent/drift-and-failures.test.ts           # drift reported within 2 s
  test/agent/dbus-deadlines.test.ts               # D-Bus call deadlines against a frozen manager
  test/agent/watchdog.test.ts                     # the watchdog starves on a step deadline
  test/agent/enrollment-wait-systemd.test.ts      # the agent's first poll within TimeoutStartSec=5
  test/agent/health-gate.test.ts                  # health checks' timeouts and intervals
  test/agent/health-gate-crash.test.ts
  test/agent/try-mode.test.ts                     # a try's deadline against the test's own steps
  test/packaging/demo.test.ts                     # every process gone within 5 s of Ctrl-C
  test/kubernetes/held-drain-isolation.test.ts    # one pool's rollout time with and without a held drain
  test/controlplane/status-thread.test.ts         # reads answered while the main thread is held 3 s
)

# The etcd pass: the files whose outcome depends on the store and that reach it through
# startTestServer (MCPLANE_TEST_STORE picks the store). Files that start etcd themselves (the
# store contract, replicas, failover, partition, cluster cache, drain failover, Kubernetes-source
# replicas, replica metrics) already ran on etcd above; the CLI's, the agent's, the Kubernetes
# client's, the pure machineconfig and the packaging files do not touch the store beyond what
# these cover, so they run once.
ETCD=(
  test/controlplane/config-api.test.ts            # apply/delete: transactions, resource versions
  test/controlplane/input-limits.test.ts          # size limits vs etcd's request size
  test/controlplane/enrollment-tokens.test.ts     # tokens stored, swept, used once
  test/controlplane/enrollment-token-lifetime.test.ts # tokens swept with their bootstrap token
  test/controlplane/enrollment-phantoms.test.ts   # a never-connected node deleted, fenced, with its request
  test/controlplane/bootstrap-endpoint.test.ts    # enrollment through the store
  test/controlplane/bootstrap-token-scope.test.ts # stored bootstrap tokens, read through the cache
  test/controlplane/certificate-revocation.test.ts # revocations and bindings checked in the commit
  test/controlplane/revocation-generations.test.ts # generations raised and checked in the commit
  test/controlplane/audit-trail.test.ts           # audit records written, listed, pruned in the store
  test/controlplane/durability.test.ts            # a server restarted on its data (etcd prefix)
  test/controlplane/render-controller.test.ts     # controllers: renders and their collection
  test/controlplane/higher-level-configs-api.test.ts # generated configs written, owned, deleted with their source
  test/controlplane/rollout.test.ts               # controllers: the rollout
  test/controlplane/rollout-safety.test.ts
  test/controlplane/canary-breaker.test.ts
  test/controlplane/policy-redecision.test.ts
  test/controlplane/assignment-stored-whole.test.ts # assignments decided by the leader, sent as stored
  test/controlplane/cluster-disruption-policy-api.test.ts
  test/controlplane/session-end-status.test.ts    # sessions: fencing, end of stream
  test/controlplane/status-reads.test.ts          # reads and watches; names the store
  test/controlplane/status-thread.test.ts         # the status thread's cache, fed by the store's relay
  test/controlplane/server-metrics.test.ts        # store metrics per backend
  test/kubernetes/drain.test.ts                   # drain state kept in the store
  test/kubernetes/held-drain-isolation.test.ts    # controller lanes: a held drain slows no other pool
  test/kubernetes/kubernetes-source.test.ts       # cluster objects mirrored into the store
  test/agent/update-flow.test.ts                  # one real agent's whole update over an etcd-backed server
  test/agent/model-based.test.ts                  # random updates, failures and kills: its own seed on etcd (about 2 min)
)

in_list() { local x=$1; shift; for y in "$@"; do [ "$x" = "$y" ] && return 0; done; return 1; }

# Files that take 20 s or more on their own: each lane starts them first, so the run does not end
# on one long file while the other cores idle (node --test sorts the files it is given, which is
# why every file runs through a small wrapper whose name carries its place in the order).
SLOW_FIRST=(
  test/agent/crash-safety.test.ts
  test/cli/dashboard-500-nodes.test.ts
  test/agent/symlink-race.test.ts
  test/agent/model-based.test.ts
  test/packaging/rpm-packages.test.ts
  test/kubernetes/drain-real-agent.test.ts
  test/kubernetes/registries-drain-real-agent.test.ts
  test/agent/update-flow.test.ts
  test/packaging/first-boot.test.ts
  test/cli/dashboard-browser.test.ts
  test/controlplane/replica-failover.test.ts
  test/controlplane/store-contract.test.ts
  test/agent/drift-and-failures.test.ts
  test/agent/health-gate.test.ts
  test/agent/try-mode.test.ts
  test/packaging/demo.test.ts
)

# The two lanes run at the same time. The serial lane (the SERIAL files, one at a time) asserts
# wall-clock bounds; the parallel lane (everything else, CONCURRENCY at a time) runs ten nice
# levels below it, so the kernel gives the serial lane's processes the CPU whenever they want it
# (ten levels weigh about a tenth) and the parallel lane the rest: the serial files mostly wait
# on leases, timers and processes, and their idle time is no longer the machine's. As root the
# serial lane runs at nice -10 and the parallel lane at 0, not 0 and 10: at 10 the parallel lane
# weighed a tenth of any other work on the machine, and beside two CPU hogs a run that takes
# 25 minutes alone took hours. Each file runs through a wrapper that sets its store, so one lane
# runs the SQLite and the etcd files together instead of a pass per store, each with its own tail.
if [ "$(id -u)" = 0 ]; then SERIAL_NICE=-10 PARALLEL_NICE=0; else SERIAL_NICE=0 PARALLEL_NICE=10; fi
WRAPPERS=$RUN_DIR/files
export MCPLANE_TEST_FILES=$RUN_DIR/files.tsv   # wrapper -> store, file and CPU cgroup, for the reporter
: >"$MCPLANE_TEST_FILES"
failed=0

# CPU per file: each file's process moves itself into a cgroup of its own before it imports the
# file, so the CPU of everything it starts (servers, agents, etcd, mcctl, systemd user managers)
# is counted to it, and the summary prints it beside the wall time: on two cores the suite is
# CPU-bound, and wall time says more about the neighbours than about the file. cgroup v1's cpuacct
# where mounted (the sandbox's managers move only in the name=systemd and unified hierarchies, so
# they stay counted); on cgroup v2 alone, the cgroup's cpu.stat, where the managers, which move to
# cgroups of their own, are not counted. Root only (MCPLANE_TEST_CPU=0 turns it off).
CPU_CGROUP=
if [ "$(id -u)" = 0 ] && [ "${MCPLANE_TEST_CPU:-1}" = 1 ]; then
  for root in /sys/fs/cgroup/cpuacct /sys/fs/cgroup; do
    if { [ -f $root/cpuacct.usage ] || [ -f $root/cgroup.controllers ]; } && mkdir "$root/mcplane-test-${RUN_DIR##*-}" 2>/dev/null; then
      CPU_CGROUP=$root/mcplane-test-${RUN_DIR##*-}; break
    fi
  done
fi
# Removed at exit: a cgroup whose processes are gone is an empty directory (rmdir, not rm -r).
remove_cpu_cgroup() { [ -n "$CPU_CGROUP" ] && { rmdir "$CPU_CGROUP"/* "$CPU_CGROUP" 2>/dev/null || true; }; }
trap remove_cpu_cgroup EXIT

# wrap LANE ENTRY... : prints one wrapper path per "store:file" entry, slow files first.
wrap() {
  local lane=$1; shift
  local ordered=() e n=0
  for e in "$@"; do in_list "${e#*:}" "${SLOW_FIRST[@]}" && ordered+=("$e"); done
  for e in "$@"; do in_list "${e#*:}" "${SLOW_FIRST[@]}" || ordered+=("$e"); done
  mkdir -p "$WRAPPERS/$lane"
  for e in "${ordered[@]}"; do
    local store=${e%%:*} file=${e#*:}
    local w
    w=$WRAPPERS/$lane/$(printf '%03d' $n)-$store-$(echo "${file#test/}" | tr / -).test.mjs
    local cg=
    if [ -n "$CPU_CGROUP" ]; then
      cg=$CPU_CGROUP/$lane-$(printf '%03d' $n); mkdir -p "$cg"
      printf "import { writeFileSync } from 'node:fs';\ntry { writeFileSync('%s/cgroup.procs', String(process.pid)); } catch {}\n" "$cg" >"$w"
    else
      : >"$w"
    fi
    printf "process.env.MCPLANE_TEST_STORE = '%s';\nawait import('%s');\n" "$store" "$ROOT/$file" >>"$w"
    printf '%s\t%s\t%s\t%s\n' "$w" "$store" "$file" "$cg" >>"$MCPLANE_TEST_FILES"
    echo "$w"; n=$((n + 1))
  done
}

# lane NAME CONCURRENCY NICE ENTRY... : one node --test run over the entries; its wall time.
# A test that hangs fails after 5 minutes, named (the slowest passes in about 50 s), instead of
# holding the run until CI's limit stops it with no word on which test it was.
lane() {
  local name=$1 concurrency=$2 niceness=$3; shift 3
  [ $# -gt 0 ] || return 0
  local files rc; mapfile -t files < <(wrap "$name" "$@")
  local start=$SECONDS
  MCPLANE_TEST_PASS=$name nice -n "$niceness" node --import ./scripts/test/no-child-coverage.mjs \
    --test --test-force-exit --test-timeout=300000 --test-concurrency="$concurrency" \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=./scripts/test/reporter.mjs --test-reporter-destination="$RUN_DIR/reporter-$name.out" \
    "${files[@]}" && rc=0 || rc=1
  echo "$name $((SECONDS - start))" >>"$WALL"
  return "$rc"
}

# run_lanes FILES_ON_SQLITE FILES_ON_ETCD: splits both into the lanes and runs them side by side.
# The serial lane's output is kept apart and printed after the parallel lane's, so neither
# interleaves with the other.
run_lanes() {
  local -n on_sqlite=$1 on_etcd=$2
  local par=() ser=() f
  for f in "${on_sqlite[@]}"; do if in_list "$f" "${SERIAL[@]}"; then ser+=("sqlite:$f"); else par+=("sqlite:$f"); fi; done
  for f in "${on_etcd[@]}"; do if in_list "$f" "${SERIAL[@]}"; then ser+=("etcd:$f"); else par+=("etcd:$f"); fi; done
  echo "=== ${#par[@]} files side by side ($CONCURRENCY at a time, nice $PARALLEL_NICE), ${#ser[@]} one at a time at nice $SERIAL_NICE beside them (output below)"
  lane serial 1 "$SERIAL_NICE" "${ser[@]}" >"$RUN_DIR/serial.out" 2>&1 &
  local serial_pid=$!
  lane parallel "$CONCURRENCY" "$PARALLEL_NICE" "${par[@]}" || failed=1
  wait "$serial_pid" || failed=1
  echo "=== the files run one at a time"
  cat "$RUN_DIR/serial.out"
}

total_start=$SECONDS
none=()
if [ "${1:-}" = --etcd-only ]; then
  run_lanes none ETCD
elif [ $# -gt 0 ]; then
  chosen=("$@")
  mapfile -t chosen_etcd < <(for f in "$@"; do in_list "$f" "${ETCD[@]}" && echo "$f"; done)
  run_lanes chosen chosen_etcd
else
  for f in "${ETCD[@]}" "${SERIAL[@]}" "${SLOW_FIRST[@]}"; do [ -f "$f" ] || { echo "scripts/test.sh: $f in a list above does not exist" >&2; exit 1; }; done
  # The typecheck runs beside the tests, at low priority: it needs nothing they build.
  nice -n "$PARALLEL_NICE" npm run -s typecheck >"$RUN_DIR/typecheck.out" 2>&1 &
  typecheck_pid=$!
  # Coverage in the test files' processes (see scripts/test/no-child-coverage.mjs).
  [ "${MCPLANE_TEST_COVERAGE:-0}" = 1 ] && export NODE_V8_COVERAGE=$RUN_DIR/coverage
  mapfile -t all < <(find test -name '*.test.ts' | sort)
  run_lanes all ETCD
  if [ "${MCPLANE_TEST_COVERAGE:-0}" = 1 ]; then
    unset NODE_V8_COVERAGE
    c8 report --temp-directory "$RUN_DIR/coverage" --reporter=text-summary || true
  fi
  if wait "$typecheck_pid"; then echo "=== typecheck: no errors"; else echo "=== typecheck failed:"; failed=1; fi
  cat "$RUN_DIR/typecheck.out"
fi
echo "total $((SECONDS - total_start))" >>"$WALL"

# --- 4. What the run found ---------------------------------------------------------------------
node scripts/test/summary.mjs "$MCPLANE_TEST_RECORD" "$WALL" || failed=1
if [ "$failed" = 0 ]; then rm -rf "$RUN_DIR"; else echo "the run's record and coverage stay in $RUN_DIR"; fi
exit "$failed"
