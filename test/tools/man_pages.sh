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
# Section 3 (man/man3, a page per public call and .so pages for their other
# forms, listed by man/man3.am): the files are what scripts/gen-man3.py
# makes of the headers' comments now; each page formats without a groff
# warning and has NAME, SYNOPSIS, DESCRIPTION, RETURN VALUE and SEE ALSO
# naming gpuport(7), and its .TH this version; each .so page names a page
# that is there; make install-man installs them all into man3.
#
# With --update, rewrites man/gpuport.7's generated entries and man/man3
# instead of comparing them (make update-man); with --update-man3, man/man3
# alone (make man3: no gpuport_info needed).
#
# The groff checks are skipped, with a line saying so, where groff is not
# installed (Debian: groff-base), and the comparison of man/man3 with the
# headers where python3 is not; the others run everywhere.
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

# man3_make DIR: the section-3 pages as scripts/gen-man3.py makes them of
# the headers now, in DIR/man3 and DIR/man3.am
man3_make() {
    rm -rf "$1" && mkdir -p "$1" && python3 "$src/scripts/gen-man3.py" --srcdir "$src" --out "$1"
}

# man3_update: man/man3 and man/man3.am rewritten where they differ
man3_update() {
    if ! command -v python3 >/dev/null 2>&1; then
        echo "python3 is needed to generate the section-3 man pages (scripts/gen-man3.py)"
        return 1
    fi
    man3_make "$tmp.man3" || return 1
    mkdir -p "$src/man/man3" || return 1
    n=0
    for f in "$tmp.man3"/man3/*.3 "$tmp.man3/man3.am"; do
        case $f in *.am) dst=$src/man/man3.am ;; *) dst=$src/man/man3/${f##*/} ;; esac
        if ! cmp -s "$f" "$dst"; then
            cat "$f" >"$dst" || return 1
            n=$((n + 1))
        fi
    done
    for f in "$src"/man/man3/*.3; do
        if test -f "$f" && ! test -f "$tmp.man3/man3/${f##*/}"; then
            rm -f "$f" && n=$((n + 1))
        fi
    done
    if test $n = 0; then
        echo "$src/man/man3 is up to date"
    else
        echo "rewrote $n file(s) of $src/man/man3 and man3.am"
    fi
}

if test "${1:-}" = --update-man3; then
    man3_update
    exit
fi

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
    man3_update
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

# section 3: the pages (real ones and .so ones) and their list
pages3=
links3=
for f in "$src"/man/man3/*.3; do
    test -f "$f" || continue
    if grep -q '^\.so ' "$f"; then links3="$links3 ${f##*/}"; else pages3="$pages3 ${f##*/}"; fi
done
n3=$(echo $pages3 | wc -w)
check "man/man3 has pages ($n3, and $(echo $links3 | wc -w) .so pages)" test "$n3" -gt 0
if command -v python3 >/dev/null 2>&1; then
    if man3_make "$tmp.man3" >"$tmp.man3.err" 2>&1; then
        diff -r "$tmp.man3/man3" "$src/man/man3" >"$tmp.man3.diff" 2>&1 &&
            diff "$tmp.man3/man3.am" "$src/man/man3.am" >>"$tmp.man3.diff" 2>&1
        check "man/man3 and man/man3.am are what scripts/gen-man3.py makes of the headers" \
            test ! -s "$tmp.man3.diff"
        if test -s "$tmp.man3.diff"; then
            head -n 40 "$tmp.man3.diff" | sed 's/^/  /'
            echo "  (make man3 in the build directory rewrites them)"
        fi
    else
        check "scripts/gen-man3.py makes the section-3 pages" false
        sed 's/^/  /' "$tmp.man3.err"
    fi
else
    echo "SKIP man/man3 against the headers: python3 is not installed"
fi
bad=
for page in $pages3; do
    grep -q "^\\.TH [A-Z0-9_]* 3 [0-9-]* \"gpuport $version\" \"gpuport\"\$" "$src/man/man3/$page" ||
        bad="$bad $page"
done
check "man/man3: every page's .TH names gpuport $version" test -z "$bad"
test -z "$bad" || echo "  not:$bad"
bad=
for page in $links3; do
    target=$(sed -n 's/^\.so //p' "$src/man/man3/$page")
    case " $pages3 " in *" ${target#man3/} "*) ;; *) bad="$bad $page" ;; esac
done
check "man/man3: every .so page names a page of man/man3" test -z "$bad"
test -z "$bad" || echo "  not:$bad"
bad=
for page in $pages3 $links3; do
    grep -qx "	man/man3/$page\( \\\\\)\{0,1\}" "$src/man/man3.am" || bad="$bad $page"
done
check "man/man3.am lists every page of man/man3" test -z "$bad"
test -z "$bad" || echo "  not:$bad"

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

# section 3: one line for all the pages, naming those that fail
warned=
missing=
for page in $pages3; do
    groff -man -Tutf8 -ww -z "$src/man/man3/$page" >"$tmp.warn" 2>&1
    if test -s "$tmp.warn"; then
        warned="$warned $page"
        sed "s/^/  $page: /" "$tmp.warn"
    fi
    groff -man -Tascii -P-cbou "$src/man/man3/$page" 2>/dev/null >"$tmp.txt"
    for section in NAME SYNOPSIS DESCRIPTION "RETURN VALUE" "SEE ALSO"; do
        grep -q "^$section\$" "$tmp.txt" || missing="$missing $page($section)"
    done
    sed -n '/^SEE ALSO$/,$p' "$tmp.txt" | grep -q 'gpuport(7)' || missing="$missing $page(gpuport(7))"
    grep -q '#include <gpuport/gpuport[a-z_]*\.h>' "$tmp.txt" || missing="$missing $page(#include)"
done
check "man/man3: the $n3 pages format without a warning" test -z "$warned"
check "man/man3: every page has NAME, SYNOPSIS (#include), DESCRIPTION, RETURN VALUE, SEE ALSO gpuport(7)" \
    test -z "$missing"
test -z "$missing" || echo "  missing:$missing"

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
    man3dir=$(find "$dest" -type d -name man3 | head -n 1)
    bad=
    for page in $pages3 $links3; do
        test -n "$man3dir" && cmp -s "$man3dir/$page" "$src/man/man3/$page" || bad="$bad $page"
    done
    check "make install-man installs the $n3 pages and $(echo $links3 | wc -w) .so pages of man/man3" \
        test -z "$bad"
    test -z "$bad" || echo "  not:$bad"
else
    cat "$tmp.install"
    check "make install-man DESTDIR=$dest" false
fi
rm -rf "$dest"

exit $fail
