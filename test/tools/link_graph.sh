#!/bin/sh
# The layering of the core's folders, the transport boundary and the absence
# of cycles, checked on what was built: the objects of libgpuport_core and,
# from nm, "object A uses a symbol that object B defines". Prints, for each
# folder of src/ (base: src/*.c; transport: the registry, src/transport/*.c;
# transport/<X>: a transport), what it uses of the others. Fails on
#   - a use across folders that test/tools/layers.txt, the table of which
#     folder may use which, does not allow (named: both objects, both
#     folders, the symbols); a folder with no row there; a name in the table
#     that is no folder or file under src/ (the table is read from the tree:
#     a stale row fails);
#   - a cycle between objects (printed A -> B -> ... -> A, one symbol an edge;
#     enough cycles to show every edge that lies on one);
#   - the registry (src/transport/transport.c, registry.c) using anything of a
#     transport but its ops table, gpuport_transport_<X>, and its settings
#     table, gpuport_<X>_settings (the table lets the registry, and only it,
#     use the transports; which of them may use sm/ is the table's too);
#   - a transport using a symbol of the core (or the registry) that the
#     transport interface does not name: src/transport/tl_core.h,
#     src/transport/transport.h and the service headers tl_core.h marks
#     (an include with a "/* service:" comment, or a "service header: X"
#     line). The allowed names are read from those headers' code, comments
#     stripped, so the header is the list;
#   - finding no objects, no transport objects or no rows of the table: a
#     check that sees nothing must not pass.
# The graph and the rules are in link_graph.awk; this script finds the
# objects (the list make links into the library, so stale objects of
# renamed files do not count), the interface's names, and feeds it both.
# Skips (77) only without nm.
build=${top_builddir:-.}
src=${top_srcdir:-.}
here=$(dirname "$0")
awkprog=$here/link_graph.awk
test -f "$awkprog" || awkprog=$src/test/tools/link_graph.awk
layers=$here/layers.txt
test -f "$layers" || layers=$src/test/tools/layers.txt

if ! command -v nm >/dev/null 2>&1; then
    echo "SKIP: nm is not installed (binutils); the link graph needs it"
    exit 77
fi

# make knows which objects go into the core: ask it (MAKEFLAGS cleared, so a
# jobserver of the make running this test is not expected).
# shellcheck disable=SC2016 # $(...) is make's, not the shell's
lobjs=$(printf 'gpuport-print-core-objects:\n\t@echo $(src_libgpuport_core_la_OBJECTS)\n' |
    MAKEFLAGS='' MFLAGS='' MAKELEVEL='' ${MAKE:-make} -s -C "$build" -f Makefile -f - \
        gpuport-print-core-objects 2>/dev/null)

tmp=${TMPDIR:-/tmp}/gpuport_link_graph.$$
trap 'rm -f "$tmp".*' EXIT
: >"$tmp.nm"
n=0
for lo in $lobjs; do
    test -f "$build/$lo" || continue
    dir=$(dirname "$lo")
    # a libtool object names its real objects; either has the same symbols
    obj=$(sed -n "s/^non_pic_object='\(.*\)'\$/\1/p" "$build/$lo")
    if test -z "$obj" || test "$obj" = none; then
        obj=$(sed -n "s/^pic_object='\(.*\)'\$/\1/p" "$build/$lo")
    fi
    test -f "$build/$dir/$obj" || continue
    # named for its source: src/transport/tcp/libgpuport_core_la-tcp.lo -> src/transport/tcp/tcp.c
    stem=$(basename "$lo" .lo)
    stem=${stem#*_la-}
    label=$dir/$stem.o
    for ext in c cu cc S; do
        if test -f "$src/$dir/$stem.$ext"; then label=$dir/$stem.$ext; break; fi
    done
    nm -P "$build/$dir/$obj" | awk -v obj="$label" 'NF >= 2 { print obj, $1, $2 }' >>"$tmp.nm" || {
        echo "FAIL: nm -P $build/$dir/$obj"
        exit 1
    }
    n=$((n + 1))
done
if test "$n" -eq 0; then
    echo "FAIL: no objects of libgpuport_core found under $build (build the library first)"
    exit 1
fi

# The transport interface's names: every identifier in the code of
# tl_core.h, transport.h and the service headers tl_core.h names.
tlcore=$src/src/transport/tl_core.h
headers="$tlcore $src/src/transport/transport.h"
for h in $(sed -n 's/^#include "\([^"]*\)".*\/\* service:.*/\1/p
                  s/.*service header: \([A-Za-z0-9_/.]*\.h\).*/\1/p' "$tlcore"); do
    if test -f "$src/src/$h"; then
        headers="$headers $src/src/$h"
    elif test -f "$src/include/$h"; then
        headers="$headers $src/include/$h"
    else
        echo "FAIL: $tlcore names service header $h, which is in neither src/ nor include/"
        exit 1
    fi
done
for h in $headers; do
    awk '{ text = text $0 "\n" }
        END {
            gsub(/\/\*([^*]|\*+[^*\/])*\*+\//, " ", text)
            gsub(/\/\/[^\n]*/, " ", text)
            while (match(text, /[A-Za-z_][A-Za-z0-9_]*/)) {
                print "ALLOW", substr(text, RSTART, RLENGTH)
                text = substr(text, RSTART + RLENGTH)
            }
        }' "$h"
done | LC_ALL=C sort -u >"$tmp.allow"
echo "link graph of $n objects of libgpuport_core; the transport interface:" \
    "$(echo $headers | sed "s|$src/||g")"

# Every name in the folder table is a folder or file under src/ (base and
# transport/* are the table's own words).
stale=$(sed 's/#.*//' "$layers" | awk '{ for (i = 1; i <= NF; i++) print $i }' |
    sed 's/:$//' | LC_ALL=C sort -u |
    while read -r w; do
        case $w in '' | base | 'transport/*') continue ;; esac
        test -e "$src/src/$w" || printf ' %s' "$w"
    done)
if test -n "$stale"; then
    echo "FAIL: test/tools/layers.txt names what is under src/ no more:$stale"
    exit 1
fi
LC_ALL=C sort -k1,1 -k2,2 "$tmp.nm" |
    awk -v layers="$layers" -v layers_name=test/tools/layers.txt -f "$awkprog" "$tmp.allow" -
