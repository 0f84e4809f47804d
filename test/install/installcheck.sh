#!/bin/sh
# make installcheck: gpuport as a program outside the tree sees it once
# installed (under DESTDIR when one is given). pkg-config must find
# gpuport.pc (and gpuport-mpi.pc exactly when the MPI bootstrap was built)
# in the installed pkgconfig directory, as installed (they are relocatable:
# their libdir and includedir must be the DESTDIR ones, and nothing adds -I
# or -L); then, each linked shared and, with
# `pkg-config --static`, against the installed .a files (where no shared
# library was built, with the plain `pkg-config --libs`, which must then
# name all that the .a files need):
#   - a version probe (gpuport.h alone), run: its version must be this one;
#   - examples/host_channels.c, compiled with the MPI wrapper and run at 2
#     ranks through test/mpi/mpirun.sh: it must exit 0 with two OK lines.
# The shared programs run with LD_LIBRARY_PATH at the installed libdir, and
# must load libgpuport from there; the static ones must need no libgpuport
# at all. Then the documents (doc_files: LICENSE, README.md, docs/GUIDE.md
# and the others the man pages cite) must be in DOCDIR, each the source's.
# Any failure fails installcheck. A kind of library that configure did not
# build (--disable-shared, --disable-static) is skipped, saying so.
# Run by installcheck-local (Makefile.am), which sets the variables below.
set -u
: "${DESTDIR=}" "${libdir:?}" "${includedir:?}" "${pkgconfigdir:?}" "${PKG_CONFIG=}" "${CC:?}" "${CFLAGS=}"
: "${LDFLAGS=}" "${MPICC=}" "${PACKAGE_VERSION:?}" "${have_mpi:?}" "${enable_shared:?}"
: "${enable_static:?}" "${top_srcdir:?}" "${top_builddir:?}" "${docdir:?}" "${doc_files:?}"

fail=0
pass() { echo "PASS: $*"; }
failed() { echo "FAIL: $*"; fail=1; }

if test -z "$PKG_CONFIG"; then
    echo "FAIL: configure found no pkg-config, which installcheck tests the installed .pc files with"
    exit 1
fi
pcdir=$DESTDIR$pkgconfigdir
lib=$DESTDIR$libdir
if test ! -f "$pcdir/gpuport.pc"; then
    echo "FAIL: $pcdir/gpuport.pc is not there: run make install${DESTDIR:+ DESTDIR=$DESTDIR} first"
    exit 1
fi
builddir=$(cd "$top_builddir" && pwd)
srcdir=$(cd "$top_srcdir" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuport_installcheck.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# The .pc files find the prefix from their own place (${pcfiledir}), so the
# installed ones are used as they are, under DESTDIR too: no -I or -L is
# added anywhere below, and their libdir and includedir must be the
# installed ones, not those of another gpuport on the system.
usedir=$pcdir
PKG_CONFIG_PATH=$usedir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH

# pkg-config's answer in $answer, or a failure naming the question
pc() {
    if answer=$("$PKG_CONFIG" --print-errors "$@" 2>"$tmp/pc.err"); then
        return 0
    fi
    failed "$PKG_CONFIG $*: $(cat "$tmp/pc.err")"
    return 1
}

# the --static link line with -lgpuport and -lgpuport_mpi replaced by the
# installed archives, so that the static libraries are what is tested even
# where the shared ones are installed beside them
static_libs() {
    out=
    for w in $("$PKG_CONFIG" --static --libs "$@"); do
        case $w in
            -lgpuport) w=$lib/libgpuport.a ;;
            -lgpuport_mpi) w=$lib/libgpuport_mpi.a ;;
        esac
        out="$out $w"
    done
    echo "$out"
}

# the static link line of package $1, in $answer: with shared libraries
# beside the static ones, --static with the archives named (static_libs);
# without, the plain line of the README, which must link the .a files alone
static_line() {
    if test "$enable_shared" = yes; then
        pc --static --libs "$1" || return 1
        answer=$(static_libs "$1")
    else
        pc --libs "$1"
    fi
}

# after a failed link: the -l libraries of "$@" that the compiler cannot
# find, with the .pc file that asks for each (a missing development package,
# not a fault of gpuport's own files, but a static link needs them all)
unfound() {
    for w in "$@"; do
        case $w in
            -l*)
                n=${w#-l}
                if test "$($CC -print-file-name="lib$n.so")" = "lib$n.so" &&
                    test "$($CC -print-file-name="lib$n.a")" = "lib$n.a"; then
                    from=$(grep -l "^Libs.*[[:space:]]$w\([[:space:]]\|\$\)" \
                        "$usedir"/*.pc $("$PKG_CONFIG" --variable=pcfiledir hwloc 2>/dev/null)/hwloc.pc \
                        2>/dev/null | head -n 1)
                    echo "  the linker finds no lib$n (${from:+$(basename "$from") asks for it; }its development package is missing)"
                fi
                ;;
        esac
    done
}

# checks a linked program's dynamic needs: kind shared|static
check_linked() {
    prog=$1 kind=$2
    needed=$(readelf -d "$prog" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    if test "$kind" = shared; then
        case " $needed" in
            *" libgpuport.so."*) ;;
            *) failed "$(basename "$prog") does not need libgpuport.so (NEEDED: $needed)"; return 1 ;;
        esac
        where=$(LD_TRACE_LOADED_OBJECTS=1 LD_LIBRARY_PATH=$lib "$prog" 2>&1 |
            sed -n 's/^[[:space:]]*libgpuport\.so\.[0-9]* => \([^ ]*\).*/\1/p')
        case $where in
            "$lib"/*) ;;
            *) failed "$(basename "$prog") loads libgpuport from '${where:-nowhere}', not $lib"; return 1 ;;
        esac
    else
        case " $needed" in
            *" libgpuport"*) failed "$(basename "$prog") links statically yet needs: $needed"; return 1 ;;
        esac
    fi
    return 0
}

# same_dir A B: A and B name one existing directory
same_dir() {
    test -d "$1" && test -d "$2" && test "$(cd "$1" && pwd -P)" = "$(cd "$2" && pwd -P)"
}
for pkg in gpuport gpuport-mpi; do
    test "$pkg" = gpuport || test "$have_mpi" = yes || continue
    for v in libdir:$lib includedir:$DESTDIR$includedir; do
        var=${v%%:*} want=${v#*:}
        got=$("$PKG_CONFIG" --variable="$var" "$pkg" 2>&1)
        if same_dir "$got" "$want"; then
            pass "$pkg.pc's $var is where it was installed ($got)"
        else
            failed "$pkg.pc's $var is '$got', not the installed $want: the .pc file is not relocatable"
        fi
    done
done

version=$("$PKG_CONFIG" --modversion gpuport 2>&1)
if test "$version" = "$PACKAGE_VERSION"; then
    pass "pkg-config finds gpuport $version in $pcdir"
else
    failed "pkg-config --modversion gpuport: '$version', expected $PACKAGE_VERSION"
fi
if test "$have_mpi" = yes; then
    version=$("$PKG_CONFIG" --modversion gpuport-mpi 2>&1)
    if test "$version" = "$PACKAGE_VERSION"; then
        pass "pkg-config finds gpuport-mpi $version (MPI wrapper: $("$PKG_CONFIG" --variable=mpicc gpuport-mpi))"
    else
        failed "pkg-config --modversion gpuport-mpi: '$version', expected $PACKAGE_VERSION"
    fi
elif test -e "$pcdir/gpuport-mpi.pc"; then
    failed "gpuport-mpi.pc is installed although the MPI bootstrap was not built"
else
    pass "no gpuport-mpi.pc without the MPI bootstrap"
fi

cat >"$tmp/probe.c" <<EOF
#include <gpuport/gpuport.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    if (strcmp(gpuport_version_string(), "$PACKAGE_VERSION") != 0) {
        printf("version %s, expected $PACKAGE_VERSION\n", gpuport_version_string());
        return 1;
    }
    printf("gpuport %s: %s\n", gpuport_version_string(), gpuport_status_string(GPUPORT_OK));
    return 0;
}
EOF

for kind in shared static; do
    eval "built=\$enable_$kind"
    if test "$built" != yes; then
        echo "SKIP: $kind libraries: configure was told not to build them"
        continue
    fi
    # the version probe, on gpuport.pc alone
    probe=$tmp/probe-$kind
    pc --cflags gpuport || continue
    cflags=$answer
    if test $kind = shared; then
        pc --libs gpuport || continue
        libs=$answer
    else
        static_line gpuport || continue
        libs=$answer
    fi
    # shellcheck disable=SC2086  # flag lists are meant to split
    if ! $CC $CFLAGS $cflags -o "$probe" "$tmp/probe.c" $LDFLAGS $libs >"$tmp/cc.out" 2>&1; then
        cat "$tmp/cc.out"
        # shellcheck disable=SC2086
        unfound $libs
        failed "$kind link of a program on gpuport.pc: $CC $CFLAGS $cflags probe.c $LDFLAGS $libs"
    elif check_linked "$probe" $kind; then
        if LD_LIBRARY_PATH=$lib "$probe" >"$tmp/run.out" 2>&1; then
            pass "$kind: a program on gpuport.pc links ($libs) and runs: $(cat "$tmp/run.out")"
        else
            cat "$tmp/run.out"
            failed "$kind: the version probe did not run"
        fi
    fi

    test "$have_mpi" = yes || continue
    # the host example, with the MPI wrapper, on gpuport-mpi.pc
    prog=$tmp/host_channels-$kind
    pc --cflags gpuport-mpi || continue
    cflags=$answer
    if test $kind = shared; then
        pc --libs gpuport-mpi || continue
        libs=$answer
    else
        static_line gpuport-mpi || continue
        libs=$answer
    fi
    # shellcheck disable=SC2086
    if ! $MPICC $CFLAGS $cflags -o "$prog" "$srcdir/examples/host_channels.c" $LDFLAGS $libs \
        >"$tmp/cc.out" 2>&1; then
        cat "$tmp/cc.out"
        # shellcheck disable=SC2086
        unfound $libs
        failed "$kind link of examples/host_channels.c: $MPICC $CFLAGS $cflags host_channels.c $LDFLAGS $libs"
        continue
    fi
    check_linked "$prog" $kind || continue
    LD_LIBRARY_PATH=$lib "$builddir/test/mpi/mpirun.sh" 2 "$prog" >"$tmp/run.out" 2>&1
    rc=$?
    oks=$(grep -c ': OK$' "$tmp/run.out")
    if test $rc -eq 0 && test "$oks" -eq 2; then
        pass "$kind: examples/host_channels.c links ($libs) and runs at 2 ranks"
    else
        cat "$tmp/run.out"
        failed "$kind: examples/host_channels at 2 ranks exited $rc with $oks OK lines (expected 0 and 2)"
    fi
done

# the documents the man pages cite, in DOCDIR as in the sources
docs=$DESTDIR$docdir
missing=
for f in $doc_files; do
    cmp -s "$srcdir/$f" "$docs/$(basename "$f")" || missing="$missing $f"
done
if test -z "$missing"; then
    pass "the documents are installed in $docs: $doc_files"
else
    failed "not installed in $docs, or not the source's:$missing"
fi

if test $fail -ne 0; then
    echo "installcheck: FAILED (the lines above say what)"
    exit 1
fi
echo "installcheck: the installed gpuport builds and runs programs through pkg-config"
