#!/bin/sh
# Every file that README.md, docs/*.md, examples/README.md and the man pages
# (man/*.[1-9], man/man3/*.3) name by its path in the repository (docs/..., scripts/..., test/...,
# tools/..., examples/..., man/..., include/..., src/..., mpi/..., m4/...,
# .ci/...) exists in the source tree and is in the release tarball, so that
# neither a checkout nor a tarball sends its reader to a missing file.
#   - in the tree: the path, or the source a program is built from
#     (tools/gpuport_bench: tools/gpuport_bench.c or .cu), or the template
#     configure makes it from (test/mpi/mpirun.sh: mpirun.sh.in);
#   - in the tarball: one of the files make distdir copies (make
#     print-distfiles: $(DISTFILES) as distdir sees them), or inside a folder
#     it copies whole, or the program's source or the template named above;
#     a folder, when something under it is.
# The paths are found by doc_paths.awk. A path that only a git checkout has
# is allowed by checkout_only below, each with its reason. Every missing
# file is named with the document and line that name it.
build=${top_builddir:-.}
src=${top_srcdir:-.}
here=$(dirname "$0")
awkprog=$here/doc_paths.awk
test -f "$awkprog" || awkprog=$src/test/tools/doc_paths.awk

# .ci/run: the CI entry point, run from a checkout (README's quick start);
# a tarball is built and checked by it, not for it.
checkout_only=".ci/run"

tmp=${TMPDIR:-/tmp}/gpuport_doc_paths.$$
trap 'rm -f "$tmp".*' EXIT

# MAKEFLAGS cleared: no jobserver of the make running this test is expected
if ! MAKEFLAGS='' MFLAGS='' MAKELEVEL='' ${MAKE:-make} -s -C "$build" print-distfiles \
    >"$tmp.out" 2>"$tmp.err"; then
    echo "FAIL: make print-distfiles in $build:"
    cat "$tmp.err"
    exit 1
fi
sed -n 's/^distfile: //p' "$tmp.out" >"$tmp.dist"
if ! grep -qx 'README.md' "$tmp.dist"; then
    echo "FAIL: make print-distfiles lists no README.md; its output does not look like DISTFILES:"
    head -n 5 "$tmp.out"
    exit 1
fi

# run in the source tree, so that messages name the documents as the tree does
case $awkprog in /*) ;; *) awkprog=$(pwd)/$awkprog ;; esac
if ! (cd "$src" && awk -f "$awkprog" README.md docs/*.md examples/README.md man/*.[1-9] \
    man/man3/*.3) >"$tmp.paths"; then
    echo "FAIL: $awkprog failed"
    exit 1
fi
if ! test -s "$tmp.paths"; then
    echo "FAIL: no repository paths found in README.md, docs/*.md, examples/README.md, the man pages"
    exit 1
fi

in_dist() {
    # the file itself, or a folder of it that distdir copies whole
    p=$1
    while :; do
        grep -qxF "$p" "$tmp.dist" && return 0
        case $p in */*) p=${p%/*} ;; *) return 1 ;; esac
    done
}

fail=0
n=0
while read -r where path; do
    p=${path%/}
    n=$((n + 1))
    case " $checkout_only " in *" $p "*) continue ;; esac
    tree=
    for cand in "$p" "$p.c" "$p.cu" "$p.in"; do
        if test -e "$src/$cand"; then tree=$cand; break; fi
    done
    if test -z "$tree"; then
        echo "FAIL: $where names $path, which is not in the source tree"
        fail=1
        continue
    fi
    if test -d "$src/$tree"; then
        awk -v d="$p/" 'index($0, d) == 1 { found = 1 } END { exit !found }' "$tmp.dist" ||
            in_dist "$p" || {
            echo "FAIL: $where names the folder $path, of which nothing is in the tarball"
            fail=1
        }
    elif ! in_dist "$tree"; then
        echo "FAIL: $where names $path, which is not in the tarball ($tree is not among make distdir's files)"
        fail=1
    fi
done <"$tmp.paths"

if test $fail -eq 0; then
    echo "PASS: $n paths named by the documents, each in the source tree and the tarball"
fi
exit $fail
