#!/bin/sh
# The man pages (man/): gpuport.7's ENVIRONMENT entries are exactly
# gpuport_info -c --man (the library's configuration table); each page
# formats without a warning under groff -man -ww; every option of
# gpuport_info --help is in gpuport_info.1's OPTIONS, and every option of
# gpuport_bench's usage text (tools/gpuport_bench.c, read as text: the
# program needs MPI to start) in gpuport_bench.1's; each page's .TH names
# this version; make install-man installs the pages (gpuport_bench.1 where
# gpuport_bench is built, with MPI).
#
# With --update, rewrites man/gpuport.7's generated entries instead of
# comparing them (make update-man).
#
# The groff checks are skipped, with a line saying so, where groff is not
# installed (Debian: groff-base); the others run everywhere.
build=${top_builddir:-.}
src=${top_srcdir:-.}
info=$build/tools/gpuport_info
page7=$src/man/gpuport.7
fail=0
tmp=${TMPDIR:-/tmp}/gpuport_man.$$
trap 'rm -rf "$tmp".*' EXIT

check() { # check NAME CONDITION-COMMAND...
    name=$1
    shift
    if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fail=1; fi
}

begin='.\" BEGIN gpuport_info -c --man'
end='.\" END gpuport_info -c --man'

# splice GENERATED PAGE: PAGE with the lines between its BEGIN and END
# markers replaced by GENERATED; exit 1 unless each marker is there once,
# BEGIN first
splice() {
    # through the environment: awk -v would read the markers' backslashes
    # as escapes
    GEN=$1 BEGIN_LINE=$begin END_LINE=$end awk '
        BEGIN { gen = ENVIRON["GEN"]; begin = ENVIRON["BEGIN_LINE"]; end = ENVIRON["END_LINE"] }
        $0 == begin { nb++; print; while ((getline l < gen) > 0) print l; skip = 1; next }
        $0 == end { ne++; if (!skip) bad = 1; skip = 0 }
        !skip { print }
        END { exit (nb == 1 && ne == 1 && !bad) ? 0 : 1 }' "$2"
}

if ! "$info" -c --man >"$tmp.gen"; then
    echo "FAIL: $info -c --man"
    exit 1
fi
if ! splice "$tmp.gen" "$page7" >"$tmp.page7"; then
    echo "FAIL: $page7 needs one '$begin' line followed by one '$end' line"
    exit 1
fi

if test "${1:-}" = --update; then
    if cmp -s "$tmp.page7" "$page7"; then
        echo "$page7 is up to date"
    else
        cat "$tmp.page7" >"$page7" && echo "rewrote the generated entries of $page7"
    fi
    exit
fi

check "gpuport.7's ENVIRONMENT entries equal gpuport_info -c --man" cmp -s "$tmp.page7" "$page7"
if ! cmp -s "$tmp.page7" "$page7"; then
    diff -u "$page7" "$tmp.page7" | head -n 40
    echo "  (make update-man in the build directory rewrites them)"
fi
entries=$(grep -c '^\.TP$' "$tmp.gen")
vars=$("$info" -c --env 2>/dev/null | grep -c '^GPUPORT_[A-Z0-9_]*=')
check "one entry per variable ($entries entries, $vars variables)" test "$entries" -eq "$vars" -a "$vars" -gt 0

version=$("$info" --version | sed -n 's/^gpuport_info (gpuport) //p')
for page in gpuport_info.1 gpuport_bench.1 gpuport.7; do
    check "$page: .TH names gpuport $version" \
        grep -q "^\\.TH [A-Z_]* [17] [0-9-]* \"gpuport $version\" \"gpuport\"\$" "$src/man/$page"
done

# The options in a usage text (the program's output, or the C string
# literals of its source): its lines "  -x, --long ARG  text" and
# "  -c --form  text", each as written up to the two blanks before the
# description, without the argument's name (upper case).
options() {
    sed -n 's/^ *"\{0,1\}  \(-[a-z-].*\)/\1/p' | sed 's/  .*//; s/ [A-Z][A-Z]*\( \|$\)/\1/g'
}

if ! command -v groff >/dev/null 2>&1; then
    echo "SKIP groff checks: groff is not installed (Debian package groff-base)"
    exit $fail
fi

for page in gpuport_info.1 gpuport_bench.1 gpuport.7; do
    # -ww: every warning; -z: no output, only the warnings
    groff -man -Tutf8 -ww -z "$src/man/$page" >"$tmp.warn" 2>&1
    check "$page formats without a warning" test ! -s "$tmp.warn"
    sed 's/^/  /' "$tmp.warn"
    # plain ASCII text: no bold by overstriking, \- as "-"
    groff -man -Tascii -P-cbou "$src/man/$page" 2>/dev/null >"$tmp.$page.txt"
    for section in NAME DESCRIPTION "SEE ALSO"; do
        check "$page has $section" grep -q "^$section\$" "$tmp.$page.txt"
    done
done

# documented PAGE <OPTIONS: each option (a line) is in the page's OPTIONS
# section
documented() {
    sed -n '/^OPTIONS$/,/^[A-Z][A-Z ]*[A-Z]$/p' "$tmp.$1.txt" >"$tmp.$1.options"
    missing=
    n=0
    while IFS= read -r opt; do
        n=$((n + 1))
        grep -qFw -- "$opt" "$tmp.$1.options" || missing="$missing '$opt'"
    done
    check "$1 documents all $n options of the usage text" test -z "$missing" -a "$n" -gt 0
    test -z "$missing" || echo "  missing:$missing"
}
"$info" --help | options >"$tmp.opts"
documented gpuport_info.1 <"$tmp.opts"
sed -n '/^static void usage/,/^}/p' "$src/tools/gpuport_bench.c" | options >"$tmp.bopts"
documented gpuport_bench.1 <"$tmp.bopts"

# what make install puts in place
dest=$(cd "$build" && pwd)/test/tools/man.destdir
rm -rf "$dest"
if MAKEFLAGS='' MFLAGS='' MAKELEVEL='' ${MAKE:-make} -s -C "$build" DESTDIR="$dest" install-man \
    >"$tmp.install" 2>&1; then
    pages="man1/gpuport_info.1 man7/gpuport.7"
    # gpuport_bench and its page are built and installed with MPI only
    test -x "$build/tools/gpuport_bench" && pages="$pages man1/gpuport_bench.1"
    for page in $pages; do
        check "make install-man installs $page" sh -c "find '$dest' -path '*/$page' | grep -q ."
    done
else
    cat "$tmp.install"
    check "make install-man DESTDIR=$dest" false
fi
rm -rf "$dest"

exit $fail
