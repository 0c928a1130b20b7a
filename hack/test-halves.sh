#!/usr/bin/env bash
# test-halves.sh BINARY PACKAGE_DIR PATTERN [test flags...]
#
# Runs a package's compiled test binary as two processes side by side: the
# tests whose names match PATTERN in one, the others in the other (-test.run
# and -test.skip), each in the package's directory as go test would. Prints
# each half's output once it ends, with a summary line like go test's, and
# fails if either half fails. make test runs pkg/actuator this way: its
# integration tests mostly wait on their control planes, and one after the
# other they took as long as every other package together.
set -uo pipefail
bin=$1 dir=$2 pattern=$3
shift 3
flags=("$@")
pkg=$(cd "$dir" && go list .)

half() { # NAME FLAG: one half, its output and its summary line
	local name=$1 flag=$2 start=$SECONDS out rc
	out=$(cd "$dir" && "$bin" "${flags[@]}" "$flag" "$pattern" 2>&1)
	rc=$?
	printf '%s\n' "$out" | grep -v '^PASS$' || true
	if ((rc == 0)); then
		printf 'ok  \t%s (%s)\t%ds\n' "$pkg" "$name" $((SECONDS - start))
	else
		printf 'FAIL\t%s (%s)\t%ds\n' "$pkg" "$name" $((SECONDS - start))
	fi
	return $rc
}

half "tests matching $pattern" -test.run &
first=$!
half "the other tests" -test.skip &
second=$!
rc=0
wait "$first" || rc=1
wait "$second" || rc=1
exit $rc
