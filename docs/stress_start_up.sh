#!/usr/bin/env bash
# Every start-up and fault test, N rounds in a row (default 20), each round a fresh pytest run,
# with two CPU hogs beside it: the races of start-up and supervision show up under load (see
# docs/testing.md). Stops at the first red round; each round's output is kept in
# test-artifacts/stress/. Usage: bash docs/stress_start_up.sh [ROUNDS]
set -uo pipefail
rounds=${1:-20}
cd "$(dirname "$0")/.."
logs=test-artifacts/stress
mkdir -p "$logs"
hogs=()
for _ in 1 2; do
  (while :; do :; done) &
  hogs+=($!)
done
trap 'kill "${hogs[@]}" 2>/dev/null' EXIT
tests=(
  tests/faults
  "tests/frontends/test_cli.py::test_start_up_stops_when_a_rank_dies"
  "tests/frontends/test_cli.py::test_serve_says_ready_and_stops_cleanly_on_sigint"
)
for round in $(seq "$rounds"); do
  started=$(date +%s)
  python -m pytest "${tests[@]}" -q -p no:cacheprovider >"$logs/round-$round.log" 2>&1
  rc=$?
  echo "round $round: exit $rc in $(($(date +%s) - started)) s," \
    "load $(cut -d' ' -f1-3 /proc/loadavg): $(tail -n 1 "$logs/round-$round.log")"
  [ "$rc" -eq 0 ] || exit "$rc"
done
echo "all $rounds rounds green"
