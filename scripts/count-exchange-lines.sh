#!/bin/sh
# The lines of each workload's exchange beside NVSHMEM's and MPI's, counted
# from markers in the sources, so that workloads/README.md's table cannot
# drift from the code.
#
# Rule: the lines strictly between "/* TAG: begin */" and "/* TAG: end */"
# (each marker alone on its line; a file may hold several pairs of a tag,
# which add up) that hold code once comments are removed: blank lines and
# comment-only lines do not count; a statement wrapped over three lines
# counts three (the sources are clang-formatted at 100 columns). Tags:
#   exchange      what moves the data each step (in a kernel for the GPU
#                 programs and NVSHMEM, on the host for halo.c and co.)
#   setup         host code that makes that possible: memory the peers
#                 write, channels or signal words, handles for the kernels,
#                 the offsets the exchange uses
#   mpi exchange  MPI's version of the exchange (MPI needs no set-up)
# A "-" is a file without the tag's markers.
#
#   scripts/count-exchange-lines.sh [--check FILE]
# prints the Markdown table; --check compares it with the one in FILE
# between "<!-- exchange lines: begin -->" and "<!-- exchange lines: end -->"
# and exits 1 (with the difference) where they differ.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
wl=$top/workloads

# count FILE TAG: the rule above; "-" where FILE has no such markers
count() {
    [ -f "$1" ] || { echo "-"; return; }
    awk -v tag="$2" '
        $0 ~ "^[ \t]*/[*] " tag ": begin [*]/[ \t]*$" { on = 1; seen = 1; next }
        $0 ~ "^[ \t]*/[*] " tag ": end [*]/[ \t]*$" { on = 0; next }
        !on { next }
        {
            line = $0; code = ""
            while (line != "") {
                if (incomment) {
                    p = index(line, "*/")
                    if (!p) break
                    line = substr(line, p + 2); incomment = 0; continue
                }
                p = index(line, "/*"); q = index(line, "//")
                if (q && (!p || q < p)) { code = code substr(line, 1, q - 1); break }
                if (!p) { code = code line; break }
                code = code substr(line, 1, p - 1); line = substr(line, p + 2); incomment = 1
            }
            if (code ~ /[^ \t]/) n++
        }
        END { if (seen) print n + 0; else print "-" }' "$1"
}

table() {
    echo "| workload | gpuport kernel: exchange | gpuport GPU: set-up | NVSHMEM: exchange | NVSHMEM: set-up | gpuport host: exchange | gpuport host: set-up | MPI: exchange |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    for w in halo allreduce alltoall; do
        printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$w" \
            "$(count "$wl/${w}_gpu.cu" exchange)" "$(count "$wl/${w}_gpu.cu" setup)" \
            "$(count "$wl/peers/${w}_nvshmem.cu" exchange)" \
            "$(count "$wl/peers/${w}_nvshmem.cu" setup)" \
            "$(count "$wl/$w.c" exchange)" "$(count "$wl/$w.c" setup)" \
            "$(count "$wl/$w.c" "mpi exchange")"
    done
}

if [ $# -eq 2 ] && [ "$1" = --check ]; then
    want=$(table)
    have=$(awk '/^<!-- exchange lines: end -->/ { on = 0 } on { print }
                /^<!-- exchange lines: begin -->/ { on = 1 }' "$2")
    if [ "$want" != "$have" ]; then
        echo "$2: the exchange-lines table differs from the sources' count" >&2
        echo "counted now:" >&2
        echo "$want" >&2
        echo "in $2:" >&2
        echo "$have" >&2
        exit 1
    fi
    echo "$2: the exchange-lines table matches the sources"
elif [ $# -eq 0 ]; then
    table
else
    echo "usage: $0 [--check FILE]" >&2
    exit 2
fi
