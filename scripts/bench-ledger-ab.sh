#!/usr/bin/env bash
# bench-ledger-ab.sh: the ledger benchmarks of two builds, alternately, in
# one run, so that a change to the ledger's write path is judged on the
# same machine load as what it replaces: OLD (a commit, default main) and the working
# tree. Each build's test binary of audit/postgres runs in its own
# checkout, ROUNDS times each, old then new, so that both see the same
# machine load. Lines are prefixed "old:" or "new:".
#
#   BENCH=<-test.bench regexp>  default BenchmarkLedgerFourWriters/closed=4x64/schema=0002[2-5]$
#   BENCH_LEDGER_N=<events>     default 40000
#   ROUNDS=<n>                  default 2
#   scripts/bench-ledger-ab.sh [OLD]
set -euo pipefail
old=${1:-main}
bench=${BENCH:-'BenchmarkLedgerFourWriters/closed=4x64/schema=0002[2-5]$'}
n=${BENCH_LEDGER_N:-40000}
rounds=${ROUNDS:-2}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/old"
git -C "$root" archive "$old" | tar -x -C "$tmp/old"
(cd "$tmp/old" && go test -c -o "$tmp/old.test" ./audit/postgres)
(cd "$root" && go test -c -o "$tmp/new.test" ./audit/postgres)
grep -m1 'model name' /proc/cpuinfo
for _ in $(seq "$rounds"); do
	for v in old new; do
		dir=$root/audit/postgres
		[ "$v" = old ] && dir=$tmp/old/audit/postgres
		echo "$v: load $(cut -d' ' -f1-3 /proc/loadavg)"
		(cd "$dir" && "$tmp/$v.test" -test.run '^$' -test.bench "$bench" -test.benchtime "${n}x") 2>&1 |
			grep -E '^(Benchmark|--- FAIL|FAIL)' | sed "s/^/$v: /"
	done
done
