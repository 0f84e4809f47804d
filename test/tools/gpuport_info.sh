#!/bin/sh
# gpuport_info: its -c --markdown rows are exactly README.md's variable
# table (the README is generated from, and checked against, the library's
# configuration table); a bad GPUPORT_* value is reported, naming it, with
# exit 1; on the committed synthetic topologies it finds the GPUs and places
# every local rank's threads on distinct PUs.
info=${top_builddir:-.}/tools/gpuport_info
src=${top_srcdir:-.}
fail=0
tmp=${TMPDIR:-/tmp}/gpuport_info.$$
trap 'rm -f "$tmp".*' EXIT

check() { # check NAME CONDITION-COMMAND...
    name=$1
    shift
    if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fail=1; fi
}

"$info" -c --markdown >"$tmp.rows" || fail=1
grep '^| `GPUPORT_' "$src/README.md" >"$tmp.readme"
check "README table equals gpuport_info -c --markdown" diff -u "$tmp.readme" "$tmp.rows"

GPUPORT_FIFO_SIZE=1000 "$info" -c >"$tmp.bad" 2>&1
rc=$?
check "a bad value exits 1" test "$rc" -eq 1
check "the error names the variable and what it accepts" \
    grep -q 'GPUPORT_FIFO_SIZE="1000" is not valid: expected a power of two' "$tmp.bad"

"$info" >"$tmp.plain" 2>&1
check "runs on this machine" test $? -eq 0
check "names every transport" sh -c "grep -c '^  \(shm\|cuda_ipc\|ib\|tcp\) ' '$tmp.plain' | grep -qx 4"

# tcp's interface choice (GPUPORT_SOCKET_IFNAME): loopback by name (alone and
# as the second prefix of a list), an exclusion that leaves nothing, and a
# name that matches nothing
if ip -o -4 addr show dev lo 2>/dev/null | grep -q '127\.0\.0\.1'; then
    GPUPORT_SOCKET_IFNAME=lo "$info" >"$tmp.lo" 2>&1
    check "tcp listens on lo when asked" grep -q '^  tcp .*interface lo, address 127\.0\.0\.1 (GPUPORT_SOCKET_IFNAME)' "$tmp.lo"
    GPUPORT_SOCKET_IFNAME=nosuchif0,lo "$info" >"$tmp.lo2" 2>&1
    check "tcp takes an interface the list's second prefix names" \
        grep -q '^  tcp .*interface lo, address 127\.0\.0\.1 (GPUPORT_SOCKET_IFNAME)' "$tmp.lo2"
    GPUPORT_SOCKET_IFNAME=nosuchif0 "$info" >"$tmp.noif" 2>&1
    check "tcp says no interface matches, and names those up" \
        grep -q '^  tcp .*GPUPORT_SOCKET_IFNAME=nosuchif0 matches no interface.*up here: .*lo' "$tmp.noif"
else
    echo "SKIP tcp interface checks: no lo with 127.0.0.1 here"
fi
GPUPORT_SOCKET_IFNAME='eth 0' "$info" -c >"$tmp.badif" 2>&1
check "a bad GPUPORT_SOCKET_IFNAME is reported" \
    grep -q 'GPUPORT_SOCKET_IFNAME="eth 0" is not valid' "$tmp.badif"

"$info" --xml "$src/test/topo/dual-socket-8gpu.xml" -t >"$tmp.near" 2>&1
check "dual-socket-8gpu: GPUs 0-3 nearest mlx5_0, 4-7 nearest mlx5_1" sh -c \
    "grep -c '^GPU 0000:\(1b\|43\|52\|61\):.*nearest RDMA device mlx5_0\$' '$tmp.near' | grep -qx 4 &&
     grep -c '^GPU 0000:\(9d\|c3\|d1\|df\):.*nearest RDMA device mlx5_1\$' '$tmp.near' | grep -qx 4"

for topo in dual-socket-8gpu:8 single-socket-4gpu:4; do
    file=$src/test/topo/${topo%%:*}.xml
    n=${topo##*:}
    "$info" --xml "$file" -t -n "$n" >"$tmp.topo" 2>&1
    check "$topo: exit 0" test $? -eq 0
    check "$topo: $n placements" sh -c "grep -c '^  local rank ' '$tmp.topo' | grep -qx $n"
    check "$topo: every rank near its own GPU" \
        sh -c "grep -c '^  local rank .*(device, GPU ' '$tmp.topo' | grep -qx $n"
    check "$topo: $n GPUs described" sh -c "grep -c '^GPU ' '$tmp.topo' | grep -qx $n"
    # every proxy and flusher PU differs from every other
    pus=$(sed -n 's/^  local rank [0-9]*: proxy PU \([0-9-]*\), flusher PU \([0-9-]*\).*/\1 \2/p' "$tmp.topo" | tr ' ' '\n' | sort -n)
    check "$topo: $((2 * n)) distinct PUs" sh -c "test \$(echo '$pus' | sort -u | grep -c .) -eq $((2 * n))"
done

exit $fail
