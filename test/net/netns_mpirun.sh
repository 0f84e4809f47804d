#!/usr/bin/env bash
# Runs an MPI program with its ranks on two simulated hosts of this machine.
#
# Usage: netns_mpirun.sh [--cut-after SEC [--restore-after SEC] [--cut-when-ready]]
#                        NP PROGRAM [ARGS...]
#
# Each host is a network namespace with its own UTS namespace (host name
# gpuport-host-a or gpuport-host-b), so gpuport's host identity differs
# between them; a veth pair named gp0 at both ends joins them. Open MPI's
# mpirun runs on host a and starts the orted of host b through its rsh
# launcher, with netns_agent.sh in place of ssh (test/net/README.md).
#
# Ranks see, besides every GPUPORT_* variable of the caller:
#   GPUPORT_TEST_NETNS_IFNAME  the veth's name (the same on both hosts)
#   GPUPORT_TEST_NETNS_ADDRS   "ADDR_A ADDR_B", the veth addresses of host a, b
#   GPUPORT_TEST_CUT_FILE      with --cut-after: appears, holding the time of
#                              the cut in ns since the epoch, once the link is down
#   GPUPORT_TEST_READY_FILE    with --cut-when-ready: a rank creates it when its
#                              traffic runs; the SEC of --cut-after count from then
#
# --cut-after SEC: SEC seconds after mpirun starts, the link goes down (on host
# a's end); --restore-after SEC (default 5) seconds later it comes up again.
#
# MPIRUN (default mpirun) must be Open MPI's. GPUPORT_TEST_TIMEOUT (seconds,
# default 300) bounds the run. Exit status: mpirun's; 124 on timeout; 77 when
# namespaces cannot be made here (not root, no iproute2, no permission).

set -u

me=netns_mpirun.sh
say() { echo "$me: $*" >&2; }
skip() { say "SKIP: $*"; exit 77; }
usage() {
    echo "usage: $me [--cut-after SEC [--restore-after SEC] [--cut-when-ready]] NP PROGRAM [ARGS...]" >&2
    exit 2
}
is_seconds() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }

cut_after=''
restore_after=5
cut_when_ready=''
while [ $# -gt 0 ]; do
    case $1 in
        --cut-when-ready) cut_when_ready=1; shift ;;
        --cut-after|--restore-after)
            if [ $# -lt 2 ] || ! is_seconds "$2"; then usage; fi
            if [ "$1" = --cut-after ]; then cut_after=$2; else restore_after=$2; fi
            shift 2 ;;
        --) shift; break ;;
        -*) usage ;;
        *) break ;;
    esac
done
[ $# -ge 2 ] || usage
np=$1
shift
[[ $np =~ ^[1-9][0-9]*$ ]] || usage

limit=${GPUPORT_TEST_TIMEOUT:-300}
[[ $limit =~ ^[0-9]+$ ]] || { say "GPUPORT_TEST_TIMEOUT must be a number of seconds, not '$limit'"; exit 2; }

# --- can this machine make the two hosts? ---
[ "$(id -u)" = 0 ] || skip "network namespaces need root (uid $(id -u))"
for tool in ip unshare hostname timeout; do
    command -v "$tool" >/dev/null 2>&1 || skip "'$tool' not found (packages iproute2, util-linux, hostname, coreutils)"
done
mpirun=${MPIRUN:-mpirun}
command -v "$mpirun" >/dev/null 2>&1 || skip "no MPI launcher '$mpirun'"
case $("$mpirun" --version 2>&1 </dev/null) in
    *"Open MPI"*) ;;
    *) skip "'$mpirun' is not Open MPI's mpirun, whose rsh launcher this harness drives" ;;
esac
unshare --uts true 2>/dev/null || skip "unshare --uts is not permitted here"

run=$$-$RANDOM
ns_a=gpuport-$run-a
ns_b=gpuport-$run-b
host_a=gpuport-host-a
host_b=gpuport-host-b
ifname=gp0
# The addresses live only inside the two namespaces, so concurrent runs
# cannot clash; the subnet still varies, so that their logs tell them apart.
net=10.213.$(( $$ % 250 + 1 ))
subnet=$net.0/24
addr_a=$net.1
addr_b=$net.2

tmp=
job=
cut_job_pid=

# Everything in our namespaces is ours: end it, then the namespaces (which
# takes the veth with them), then the temporary folder; a second signal
# does not interrupt that.
# shellcheck disable=SC2317  # called by the trap
cleanup() {
    trap - EXIT
    trap '' INT TERM HUP
    if [ -n "$cut_job_pid" ]; then
        kill "$cut_job_pid" 2>/dev/null
        wait "$cut_job_pid" 2>/dev/null
    fi
    if [ -n "$job" ]; then
        kill "$job" 2>/dev/null
        wait "$job" 2>/dev/null
    fi
    local ns pids left=0 _
    for ns in "$ns_a" "$ns_b"; do
        [ -e "/run/netns/$ns" ] || continue
        pids=$(ip netns pids "$ns" 2>/dev/null)
        if [ -n "$pids" ]; then
            say "ending processes left in $ns: ${pids//$'\n'/ }"
            # shellcheck disable=SC2086
            kill -TERM $pids 2>/dev/null
            for _ in $(seq 50); do
                [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
                sleep 0.1
            done
            pids=$(ip netns pids "$ns" 2>/dev/null)
            # shellcheck disable=SC2086
            [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
        fi
        ip netns del "$ns" || left=1
    done
    [ "$left" = 0 ] || say "could not delete namespace $ns_a or $ns_b"
    [ -n "$tmp" ] && rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuport-netns.XXXXXX") || exit 1

# --- the two hosts ---
out=$(ip netns add "$ns_a" 2>&1) || skip "cannot create a network namespace: $out"
out=$(ip netns add "$ns_b" 2>&1) || skip "cannot create a network namespace: $out"
# Created straight inside the namespaces: the name never exists outside them.
out=$(ip link add name "$ifname" netns "$ns_a" type veth peer name "$ifname" netns "$ns_b" 2>&1) ||
    skip "cannot create a veth pair: $out"
set -e
ip -n "$ns_a" addr add "$addr_a/24" dev "$ifname"
ip -n "$ns_b" addr add "$addr_b/24" dev "$ifname"
for ns in "$ns_a" "$ns_b"; do
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "$ifname" up
done
set +e

# The agent's map: host file address, namespace, host name.
printf '%s %s %s\n' "$addr_a" "$ns_a" "$host_a" "$addr_b" "$ns_b" "$host_b" > "$tmp/hosts.map"
# --map-by node places ranks round-robin over the hosts in host file order:
# rank 0 on host a, rank 1 on host b, rank 2 on host a, ...
slots=$(( (np + 1) / 2 ))
printf '%s slots=%s\n' "$addr_a" "$slots" "$addr_b" "$slots" > "$tmp/hostfile"
# Open MPI splits the agent's value at blanks; a path under mktemp has none
# (the source tree might), and the copy is executable whatever the tarball kept.
cp "$(dirname "$0")/netns_agent.sh" "$tmp/agent" && chmod 755 "$tmp/agent" || exit 1

export GPUPORT_TEST_NETNS_IFNAME=$ifname
export GPUPORT_TEST_NETNS_ADDRS="$addr_a $addr_b"
if [ -n "$cut_after" ]; then
    export GPUPORT_TEST_CUT_FILE=$tmp/cut
    if [ -n "$cut_when_ready" ]; then
        export GPUPORT_TEST_READY_FILE=$tmp/ready
    fi
fi
xflags=()
for v in $(compgen -e); do
    # the sanitizers' options too: the other host's ranks start from an
    # empty environment (netns_agent.sh), and without its suppressions and
    # unwinding LeakSanitizer there reports Open MPI's own allocations
    case $v in GPUPORT_* | ASAN_OPTIONS | LSAN_OPTIONS | UBSAN_OPTIONS | TSAN_OPTIONS)
        xflags+=(-x "$v") ;;
    esac
done
# For the agent only (mpirun's environment reaches it); not passed to ranks.
export GPUPORT_TEST_NETNS_MAP=$tmp/hosts.map

# Out-of-band and MPI traffic on the veth subnet only; ob1 with tcp between
# hosts (vader within one), so nothing takes a shortcut through this machine's
# shared memory that a real pair of hosts would not have.
cmd=("$mpirun" -np "$np" --hostfile "$tmp/hostfile" --map-by node
     --bind-to none --oversubscribe
     --mca plm rsh --mca plm_rsh_agent "$tmp/agent"
     --mca oob_tcp_if_include "$subnet" --mca btl_tcp_if_include "$subnet"
     --mca pml ob1 --mca btl 'self,vader,tcp')
[ "$(id -u)" = 0 ] && cmd+=(--allow-run-as-root)
cmd+=("${xflags[@]}" "$@")

say "host a: $host_a, netns $ns_a, $ifname $addr_a (mpirun, ranks 0, 2, ...)"
say "host b: $host_b, netns $ns_b, $ifname $addr_b (orted via agent, ranks 1, 3, ...)"
say "${cmd[*]}"

# The link goes down after $1 s and up $2 s later; the time of the cut is
# published (temporary file, then rename) only once the link is down.
cut_link() {
    local sp t
    trap '[ -n "${sp:-}" ] && kill "$sp" 2>/dev/null; exit 0' TERM
    if [ -n "$cut_when_ready" ]; then
        # start-up takes what it takes (MPI, CUDA probing): count from the
        # moment a rank says its traffic runs
        while [ ! -e "$GPUPORT_TEST_READY_FILE" ]; do
            sleep 0.1 & sp=$!; wait "$sp"
        done
        say "cut: a rank is ready"
    fi
    sleep "$1" & sp=$!; wait "$sp"
    if ! ip -n "$ns_a" link set "$ifname" down; then
        say "cut: could not set $ifname down in $ns_a"
        exit 1
    fi
    t=$(date +%s%N)
    say "cut: $ifname down in $ns_a ($host_a) at $t"
    echo "$t" > "$GPUPORT_TEST_CUT_FILE.tmp" && mv "$GPUPORT_TEST_CUT_FILE.tmp" "$GPUPORT_TEST_CUT_FILE"
    say "cut: wrote $GPUPORT_TEST_CUT_FILE"
    sleep "$2" & sp=$!; wait "$sp"
    if ip -n "$ns_a" link set "$ifname" up; then
        say "restore: $ifname up in $ns_a after ${2}s"
    else
        say "restore: could not set $ifname up in $ns_a"
    fi
}

# timeout puts itself and mpirun's whole tree in a process group of their own
# and signals the group on expiry; a signal to this script reaches them
# through cleanup. In the background so that traps run while it is waited on.
start=$(date +%s)
# shellcheck disable=SC2016  # $1 and $@ are the inner shell's
timeout --kill-after=10 "$limit" \
    ip netns exec "$ns_a" unshare --uts \
    sh -c 'hostname "$1" || exit 1; shift; exec "$@"' sh "$host_a" "${cmd[@]}" </dev/null &
job=$!
if [ -n "$cut_after" ]; then
    say "cut: link down after ${cut_after}s${cut_when_ready:+ from the ready file}, up again ${restore_after}s later"
    cut_link "$cut_after" "$restore_after" &
    cut_job_pid=$!
fi
wait "$job"
rc=$?
job=
elapsed=$(( $(date +%s) - start ))
if { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && [ "$elapsed" -ge "$limit" ]; then
    say "TIMEOUT after ${limit}s: ${cmd[*]}"
    exit 124
fi
exit $rc
