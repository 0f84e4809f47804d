#!/bin/sh
# make installcheck, man pages: what make install put under MANDIR (under
# DESTDIR when one is given), as man finds it:
#   - every page of man_pages (Makefile.am's lists: gpuport_info.1,
#     gpuport.7, gpuport_bench.1 where it is built, man/man3.am's pages) and
#     every page of the source tree's man/man3 is installed as
#     MANDIR/manN/PAGE (N its section), the same file as the source's;
#   - each .so page (another form of a call: gpuport_comm_create_v.3) names
#     an installed page that is not itself a .so page;
#   - every installed page, .so pages through the page they name, formats
#     without a warning under groff -man -ww (skipped, saying so, without
#     groff).
# Any missing page, dangling .so or warning fails it, naming the pages.
# Run by installcheck-local (Makefile.am), which sets the variables below.
set -u
: "${DESTDIR=}" "${mandir:?}" "${man_pages:?}" "${top_srcdir:?}"

fail=0
pass() { echo "PASS: man: $*"; }
failed() { echo "FAIL: man: $*"; fail=1; }

man=$DESTDIR$mandir
srcdir=$(cd "$top_srcdir" && pwd)
if test ! -d "$man"; then
    echo "FAIL: man: $man is not there: run make install${DESTDIR:+ DESTDIR=$DESTDIR} first"
    exit 1
fi

# The pages, as source paths (man/man3/X.3): the lists, then man/man3's own
# pages (a page missing from man/man3.am would not be installed).
pages=
for p in $man_pages "$srcdir"/man/man3/*.3; do
    p=${p#"$srcdir"/}
    case " $pages " in *" $p "*) continue ;; esac
    pages="$pages $p"
done

missing=
differ=
real=
links=
n=0
for p in $pages; do
    name=${p##*/}
    page=man${name##*.}/$name
    n=$((n + 1))
    if test ! -f "$man/$page"; then
        missing="$missing $page"
        continue
    fi
    cmp -s "$man/$page" "$srcdir/$p" || differ="$differ $page"
    if grep -q '^\.so ' "$man/$page"; then links="$links $page"; else real="$real $page"; fi
done
nreal=$(echo "$real" | wc -w)
nlinks=$(echo "$links" | wc -w)
if test -z "$missing"; then
    pass "all $n pages are installed in $man ($nreal pages, $nlinks .so pages)"
else
    failed "not installed in $man:$missing"
fi
if test -z "$differ"; then
    pass "each installed page is the source tree's"
else
    failed "installed, but not the source tree's page (an old install?):$differ"
fi

# .so pages: relative to MANDIR, as man reads them
bad=
for page in $links; do
    target=$(sed -n 's/^\.so[[:space:]]*//p' "$man/$page" | head -n 1)
    if test ! -f "$man/$target"; then
        bad="$bad $page(.so $target: not installed)"
    elif grep -q '^\.so ' "$man/$target"; then
        bad="$bad $page(.so $target: itself a .so page)"
    fi
done
if test -z "$bad"; then
    pass "each of the $nlinks .so pages names an installed page"
else
    failed "dangling .so pages:$bad"
fi

if ! command -v groff >/dev/null 2>&1; then
    echo "SKIP: man: groff is not installed (Debian package groff-base): the installed pages are not formatted"
else
    tmp=$(mktemp "${TMPDIR:-/tmp}/gpuport_man_check.XXXXXX") || exit 1
    trap 'rm -f "$tmp"' EXIT
    warned=
    for page in $real $links; do
        # from MANDIR, where a .so page's name is resolved; -ww: every
        # warning; -z: no output, only the warnings
        (cd "$man" && groff -man -Tutf8 -ww -z "$page") >"$tmp" 2>&1
        if test $? -ne 0 || test -s "$tmp"; then
            warned="$warned $page"
            sed "s|^|  $page: |" "$tmp"
        fi
    done
    if test -z "$warned"; then
        pass "the $((nreal + nlinks)) installed pages format without a warning (groff -man -ww)"
    else
        failed "groff -man -ww warns on (or fails):$warned"
    fi
fi

if test $fail -ne 0; then
    echo "installcheck (man): FAILED (the lines above say what)"
    exit 1
fi
echo "installcheck (man): the man pages are installed in $man and read as man reads them"
