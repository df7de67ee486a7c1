#!/usr/bin/env bash
# Compares the bench lines of two revisions, interleaved on the same servers.
#
#   tools/bench/compare.sh OLD NEW [ROUNDS] [-- BENCH FLAGS...]
#   tools/bench/compare.sh --summarize DIR
#
# Builds tools/bench at the revisions OLD and NEW (git archive into a
# directory of its own, so the work tree is not touched), then runs the two
# binaries ROUNDS times (3 by default) in turn: old new, new old, old new...
# Each run gets the BENCH FLAGS and the environment (BENCH_QUICK, the
# SIMBA_TEST_* variables of the servers: eval "$(tools/testenv/env)" first,
# or run it under tools/testenv/with-servers). Then it prints, per line, the
# median ops_s of each side over the rounds, new/old, and the lowest and
# highest new/old of the rounds taken pair by pair (old and new of round i):
# comparing a revision with itself shows the noise of the machine.
#
# The outputs stay in the work directory (BENCH_COMPARE_DIR, or a new one
# under the temporary directory, printed first): old.<i>.out and new.<i>.out,
# with the stderr of each run beside (.log). --summarize DIR prints the
# table again from such a directory.
set -euo pipefail

usage() {
	sed -n '2,20s/^# \{0,1\}//p' "$0" >&2
	exit 2
}

summarize() {
	local dir=$1
	shopt -s nullglob
	local files=("$dir"/old.*.out "$dir"/new.*.out)
	if [ ${#files[@]} -eq 0 ]; then
		echo "compare: no old.<i>.out or new.<i>.out in $dir" >&2
		exit 1
	fi
	"${AWK:-awk}" '
	function median(list,   v, n, i, j, x) {
		n = split(list, v, " ")
		for (i = 2; i <= n; i++) {        # insertion sort, numerically
			x = v[i] + 0
			for (j = i - 1; j >= 1 && v[j] + 0 > x; j--) v[j + 1] = v[j]
			v[j + 1] = x
		}
		if (n == 0) return ""
		if (n % 2) return v[(n + 1) / 2] + 0
		return (v[n / 2] + v[n / 2 + 1]) / 2
	}
	FNR == 1 {
		f = FILENAME; sub(/.*\//, "", f)            # old.3.out
		split(f, part, ".")
		side = part[1]; round = part[2] + 0
	}
	$1 == "bench" {
		key = ""; ops = ""
		for (i = 2; i <= NF; i++) {
			eq = index($i, "=")
			k = substr($i, 1, eq - 1); v = substr($i, eq + 1)
			if (k == "backend" || k == "impl" || k == "op") key = key (key == "" ? "" : " ") v
			if (k == "ops_s") ops = v
		}
		if (!(key in seen)) { seen[key] = 1; order[++nkeys] = key }
		vals[side, key] = vals[side, key] " " ops
		at[side, key, round] = ops
		if (round > maxround) maxround = round
	}
	END {
		printf "%-52s %10s %10s %8s %17s\n", "line", "old ops_s", "new ops_s", "new/old", "pairs min-max"
		for (i = 1; i <= nkeys; i++) {
			key = order[i]
			o = median(vals["old", key]); n = median(vals["new", key])
			lo = ""; hi = ""
			for (r = 1; r <= maxround; r++) {
				if (!(("old", key, r) in at) || !(("new", key, r) in at) || at["old", key, r] + 0 <= 0) continue
				x = at["new", key, r] / at["old", key, r]
				if (lo == "" || x < lo) lo = x
				if (hi == "" || x > hi) hi = x
			}
			ratio = (o != "" && n != "" && o > 0) ? sprintf("%.2f", n / o) : "-"
			pairs = (lo == "") ? "-" : sprintf("%.2f-%.2f", lo, hi)
			printf "%-52s %10s %10s %8s %17s\n", key, (o == "" ? "-" : sprintf("%.6g", o)), (n == "" ? "-" : sprintf("%.6g", n)), ratio, pairs
		}
	}' "${files[@]}"
}

if [ "${1:-}" = "--summarize" ]; then
	[ $# -eq 2 ] || usage
	summarize "$2"
	exit 0
fi
[ $# -ge 2 ] || usage
old=$1 new=$2
shift 2
rounds=3
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
	rounds=$1
	shift
fi
[ "${1:-}" = "--" ] && shift
case $rounds in '' | *[!0-9]* | 0) echo "compare: ROUNDS must be a positive number, not $rounds" >&2; exit 2 ;; esac

repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
work=${BENCH_COMPARE_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/simba-bench-compare.XXXXXX")}
mkdir -p "$work"
echo "compare: work directory $work" >&2

# build SIDE REV: the bench binary of REV as $work/bench-SIDE.
build() {
	local side=$1 rev=$2 sha
	sha=$(git -C "$repo" rev-parse --verify --quiet "$rev^{commit}") || { echo "compare: $rev is not a commit" >&2; exit 2; }
	rm -rf "$work/src-$side"
	mkdir -p "$work/src-$side"
	git -C "$repo" archive "$sha" | tar -x -C "$work/src-$side"
	echo "compare: building $side = $rev ($sha)" >&2
	(cd "$work/src-$side/tools/bench" && go build -o "$work/bench-$side" .)
	echo "$sha" >"$work/$side.rev"
}
build old "$old"
build new "$new"

status=0
for ((i = 1; i <= rounds; i++)); do
	order="old new"
	[ $((i % 2)) -eq 0 ] && order="new old"
	for side in $order; do
		echo "compare: round $i/$rounds: $side" >&2
		if ! "$work/bench-$side" "$@" >"$work/$side.$i.out" 2>"$work/$side.$i.log"; then
			echo "compare: round $i $side failed (exit status not 0): see $work/$side.$i.log" >&2
			status=1
		fi
	done
done
summarize "$work"
exit $status
