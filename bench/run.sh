#!/bin/sh
# Runs every benchmark of the workspace (`cargo bench --workspace --bench '*'`) and prints their
# figures as one table. Each bench prints its rows on stdout as `| figure | measured | target |
# status |`; progress and cargo's output go to stderr. BATON_BENCH_QUICK=1 runs smaller
# parameters (the figure names say which) for a quick try.
set -u
cd "$(dirname "$0")/.." || exit 1
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
cargo bench --workspace --bench '*' >"$rows"
status=$?
echo
if [ -n "${BATON_BENCH_QUICK:-}" ] && [ "${BATON_BENCH_QUICK}" != 0 ]; then
    echo "Baton benchmarks (quick mode: smaller parameters than the full run's)"
else
    echo "Baton benchmarks"
fi
echo "(real batond, mock agent processes and the typed client over loopback;"
echo " status: ok or MISS against the target, - where no target is set)"
echo
echo "| figure | measured | target | status |"
echo "|---|---|---|---|"
grep '^| ' "$rows"
if [ "$status" -ne 0 ]; then
    echo
    echo "a benchmark failed (exit status $status); the table above is incomplete" >&2
fi
exit "$status"
