#!/bin/sh
# Open MPI's remote shell for netns_mpirun.sh's simulated hosts: does what ssh
# to that host would, without the network hop. Open MPI 4.1 calls it as
#   AGENT HOST WORD...
# where the words are the orted command line already quoted for a remote
# shell (' orted' '-mca' 'ess' '"env"' ...); like ssh, it joins them with
# blanks and hands the string to the login shell, started in the host's
# namespaces, in $HOME, with a login's small environment instead of the
# caller's.
#
# GPUPORT_TEST_NETNS_MAP names a file of "ADDRESS NETNS HOSTNAME" lines; HOST
# is matched against the address or the host name.

me=netns_agent.sh
map=${GPUPORT_TEST_NETNS_MAP:-}
if [ -z "$map" ] || [ ! -r "$map" ]; then
    echo "$me: GPUPORT_TEST_NETNS_MAP does not name a readable map file ('$map')" >&2
    exit 255
fi

# ssh-style options (Open MPI adds -x for ssh; none for other agents) go.
while [ $# -gt 0 ]; do
    case $1 in
        -*) shift ;;
        *) break ;;
    esac
done
if [ $# -lt 2 ]; then
    echo "$me: usage: $me HOST COMMAND..." >&2
    exit 255
fi
host=$1
shift

ns=''
name=''
while read -r m_addr m_ns m_name; do
    if [ "$host" = "$m_addr" ] || [ "$host" = "$m_name" ]; then
        ns=$m_ns
        name=$m_name
        break
    fi
done < "$map"
if [ -z "$ns" ]; then
    echo "$me: $host: no such simulated host in $map" >&2
    exit 255
fi

cmd=$*
echo "$me: $host -> netns $ns, host name $name:$cmd" >&2

# The environment a login on a cluster node would have: a PATH (and library
# path) that finds Open MPI; root needs Open MPI's consent, as with mpirun.
set -- PATH="$PATH" HOME="${HOME:-/}" SHELL="${SHELL:-/bin/sh}"
[ -n "${LD_LIBRARY_PATH:-}" ] && set -- "$@" LD_LIBRARY_PATH="$LD_LIBRARY_PATH"
[ -n "${TMPDIR:-}" ] && set -- "$@" TMPDIR="$TMPDIR"
[ "$(id -u)" = 0 ] && set -- "$@" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shellcheck disable=SC2016  # $1, $HOME and $@ are the inner shell's
exec ip netns exec "$ns" unshare --uts \
    sh -c 'hostname "$1" || exit 255; shift; cd "$HOME" || exit 255; exec env -i "$@"' \
    sh "$name" "$@" "${SHELL:-/bin/sh}" -c "$cmd"
