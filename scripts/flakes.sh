#!/usr/bin/env bash
# Runs the timing-sensitive test files several times in a row, on both stores, to find flakes:
#   scripts/flakes.sh [-n RUNS] [FILE...]     (default: 5 runs of the files below)
# A file that reaches the store through startTestServer runs on SQLite and on etcd
# (MCPLANE_TEST_STORE); a file that starts etcd itself runs once per round (the store variable
# changes nothing for it). Each failed run's output is kept; the table at the end says how many
# runs of each file passed. Exit status 1 when any run failed. Files run one at a time, as in the
# serial passes of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

runs=5
if [ "${1:-}" = -n ]; then runs=$2; shift 2; fi
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  files=(
    test/controlplane/store-contract.test.ts
    test/controlplane/replica-failover.test.ts
    test/controlplane/replica-partition.test.ts
    test/kubernetes/drain-failover.test.ts
    test/kubernetes/drain.test.ts
    test/kubernetes/drain-real-agent.test.ts
    test/agent/health-gate.test.ts
    test/agent/health-gate-crash.test.ts
    test/agent/watchdog.test.ts
    test/agent/dbus-deadlines.test.ts
    test/agent/reboot-deadline.test.ts
    test/agent/multiple-servers.test.ts
    test/kubernetes/held-drain-isolation.test.ts
  )
fi

# The programs the tests start run from the bundles, as in scripts/test.sh.
npm run -s build >/dev/null
rm -rf dist/test-bundle && cp -r dist/bundle dist/test-bundle
export MCPLANE_TEST_BUNDLES=1
export MCPLANE_THREAD_BUNDLE=$PWD/dist/test-bundle/mcplane-server.cjs

out=$(mktemp -d "${TMPDIR:-/tmp}/mcplane-flakes-XXXXXX")
declare -A passed total
failed=0
for ((round = 1; round <= runs; round++)); do
  for f in "${files[@]}"; do
    stores=(sqlite)
    grep -qE 'startTestServer|sandboxFixture' "$f" && stores+=(etcd)
    for store in "${stores[@]}"; do
      key="$f $store"
      log="$out/$(basename "$f" .test.ts)-$store-$round.log"
      start=$SECONDS
      if MCPLANE_TEST_STORE=$store node --test --test-force-exit --test-concurrency=1 --test-reporter=spec "$f" >"$log" 2>&1; then
        passed[$key]=$(( ${passed[$key]:-0} + 1 )); rm -f "$log"; result=pass
      else
        failed=1; result="FAIL (kept $log)"
      fi
      total[$key]=$(( ${total[$key]:-0} + 1 ))
      echo "round $round/$runs  $store  $f: $result, $((SECONDS - start)) s"
    done
  done
done

echo
echo "passed/runs  store   file"
for key in "${!total[@]}"; do
  printf '%6s       %-7s %s\n' "${passed[$key]:-0}/${total[$key]}" "${key##* }" "${key% *}"
done | sort -k3
[ "$failed" = 0 ] && rm -rf "$out"
exit "$failed"
