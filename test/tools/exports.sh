#!/bin/sh
# What one install of gpuport offers and needs. Installs the libraries and
# headers into a DESTDIR under the build tree, then checks, on the installed
# files:
#   - nm -D --defined-only libgpuport.so: only gpuport_* functions that the
#     installed headers declare (the list is read from the headers), and each
#     of those; the same for libgpuport_mpi.so and gpuport_mpi.h;
#   - readelf -d libgpuport.so: no MPI library, no libibverbs, no libcuda
#     among NEEDED (the MPI bootstrap is libgpuport_mpi; verbs and the CUDA
#     driver are loaded at run time), so one install serves every MPI and
#     machines without those libraries;
#   - libgpuport_mpi.so NEEDS libgpuport (its soname) and an MPI library;
#   - where configure enabled symbol versions (GPUPORT_HAVE_SYMVER in
#     build_config.h): every export of libgpuport.so carries a version node
#     of src/libgpuport.map, every export of libgpuport_mpi.so one of
#     mpi/libgpuport_mpi.map, and libgpuport_mpi.so's references to
#     libgpuport name libgpuport's nodes (as a program linked to it does).
# Every failed check prints what was wrong. Skips (77) without nm or readelf
# or without shared libraries.
build=${top_builddir:-.}
src=${top_srcdir:-.}
fail=0

for tool in nm readelf; do
    if ! command -v $tool >/dev/null 2>&1; then
        echo "SKIP: $tool is not installed (binutils)"
        exit 77
    fi
done

dest=$(cd "$build" && pwd)/test/tools/exports.destdir
tmp=${TMPDIR:-/tmp}/gpuport_exports.$$
trap 'rm -rf "$dest" "$tmp".*' EXIT
rm -rf "$dest"
# only the libraries and headers; MAKEFLAGS cleared, so a jobserver of the
# make running this test is not expected
if ! MAKEFLAGS='' MFLAGS='' MAKELEVEL='' ${MAKE:-make} -s -C "$build" DESTDIR="$dest" \
    install-libLTLIBRARIES install-gpuportincludeHEADERS >"$tmp.install" 2>&1; then
    cat "$tmp.install"
    echo "FAIL: make install DESTDIR=$dest"
    exit 1
fi

lib=$(find "$dest" -name libgpuport.so | head -n 1)
mpilib=$(find "$dest" -name libgpuport_mpi.so | head -n 1)
header=$(find "$dest" -path '*/gpuport/gpuport.h' | head -n 1)
if test -z "$lib"; then
    echo "SKIP: no libgpuport.so installed (configure --disable-shared?)"
    exit 77
fi
if test -z "$header"; then
    echo "FAIL: gpuport/gpuport.h was not installed"
    exit 1
fi
incdir=$(dirname "$header")
echo "installed: ${lib#"$dest"}${mpilib:+, ${mpilib#"$dest"}}; headers: $(cd "$incdir" && echo *.h)"

check() { # check NAME CONDITION-COMMAND...
    name=$1
    shift
    if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fail=1; fi
}

# The functions a header declares: file-scope declarations outside the parts
# only C++ or CUDA compilers see, not static, not typedefs.
declared() {
    awk '
    function mentions_skip(s) { return s ~ /__cplusplus|__CUDACC__/ }
    {
        line = $0
        out = ""
        # comments, possibly across lines
        while (line != "") {
            if (incomment) {
                i = index(line, "*/")
                if (i == 0) { line = ""; break }
                line = substr(line, i + 2)
                incomment = 0
            }
            i = index(line, "/*")
            j = index(line, "//")
            if (j && (!i || j < i)) { out = out substr(line, 1, j - 1); line = ""; break }
            if (!i) { out = out line; line = ""; break }
            out = out substr(line, 1, i - 1) " "
            line = substr(line, i + 2)
            incomment = 1
        }
        if (cont) { cont = (out ~ /\\$/); next }
        if (out ~ /^[ \t]*#/) {
            cont = (out ~ /\\$/)
            d = out
            sub(/^[ \t]*#[ \t]*/, "", d)
            if (d ~ /^if/) {
                depth++
                skipf[depth] = mentions_skip(d)
            } else if (d ~ /^(else|elif)/) {
                if (skipf[depth]) skipf[depth] = 0
                else if (d ~ /^elif/ && mentions_skip(d)) skipf[depth] = 1
            } else if (d ~ /^endif/) {
                depth--
            }
            next
        }
        for (k = 1; k <= depth; k++)
            if (skipf[k])
                next
        code = code " " out
    }
    function emit(stmt, name) {
        if (stmt ~ /typedef|static|GPUPORT_HD|GPUPORT_DEV|GPUPORT_GRANT_FN|\(\*/)
            return
        if (match(stmt, /gpuport_[A-Za-z0-9_]+[ \t]*\(/)) {
            name = substr(stmt, RSTART, RLENGTH)
            sub(/[ \t]*\($/, "", name)
            print name
        }
    }
    END {
        n = length(code)
        braces = 0
        stmt = ""
        for (i = 1; i <= n; i++) {
            c = substr(code, i, 1)
            if (c == "{") {
                if (braces == 0) emit(stmt)
                braces++
                stmt = ""
            } else if (c == "}") {
                braces--
                stmt = ""
            } else if (braces == 0 && c == ";") {
                emit(stmt)
                stmt = ""
            } else if (braces == 0) {
                stmt = stmt c
            }
        }
    }' "$@"
}

# the defined dynamic symbols of a shared library, without the version
# definitions' own absolute symbols (A GPUPORT_1.0)
exported() {
    nm -D --defined-only "$1" | awk 'NF >= 3 && $2 != "A" { sub(/@.*/, "", $3); print $3 }' |
        LC_ALL=C sort -u
}

# "symbol version" of each defined gpuport_* symbol (version "-" when none)
exported_versions() {
    nm -D --defined-only "$1" | awk 'NF >= 3 && $2 != "A" && $3 ~ /^gpuport_/ {
        n = $3; v = "-"
        if (match(n, /@+/)) { v = substr(n, RSTART + RLENGTH); n = substr(n, 1, RSTART - 1) }
        print n, v }' | LC_ALL=C sort -u
}

# the version nodes a linker version script defines
map_nodes() { sed -n 's/^\([A-Za-z_][A-Za-z0-9_.]*\)[ \t]*{.*/\1/p' "$1"; }

# check_versions LIB MAP: every gpuport_* export of LIB carries a node of MAP
check_versions() {
    nodes=$(map_nodes "$2" | tr '\n' ' ' | sed 's/ $//')
    if test -z "$nodes"; then
        echo "FAIL no version node found in $2"
        fail=1
        return
    fi
    exported_versions "$1" >"$tmp.ver"
    bad=$(awk -v nodes="$nodes" 'BEGIN { split(nodes, a, " "); for (i in a) ok[a[i]] = 1 }
        !($2 in ok) { printf "%s@%s ", $1, $2 }' "$tmp.ver")
    check "$(basename "$1") exports carry a version of $(basename "$2") ($nodes)" test -z "$bad"
    test -n "$bad" && echo "  without one of those versions: $bad"
    echo "  $(wc -l <"$tmp.ver") exports, versions: $(awk '{ print $2 }' "$tmp.ver" | LC_ALL=C sort -u | tr '\n' ' ')"
}

list() { tr '\n' ' ' <"$1"; }

# the symbols in $1 that are not in $2, one line, or nothing
missing_from() { LC_ALL=C comm -23 "$1" "$2" | tr '\n' ' '; }

core_headers=
for h in "$incdir"/*.h; do
    test "$(basename "$h")" = gpuport_mpi.h || core_headers="$core_headers $h"
done
# shellcheck disable=SC2086
declared $core_headers | LC_ALL=C sort -u >"$tmp.decl"
exported "$lib" >"$tmp.exp"
echo "libgpuport.so exports $(wc -l <"$tmp.exp") symbols; the headers (but gpuport_mpi.h) declare $(wc -l <"$tmp.decl") functions"
if test ! -s "$tmp.decl"; then
    echo "FAIL: no function declarations found in $core_headers"
    exit 1
fi

grep -v '^gpuport_' "$tmp.exp" >"$tmp.unprefixed"
check "libgpuport.so exports only gpuport_* symbols" test ! -s "$tmp.unprefixed"
test -s "$tmp.unprefixed" && echo "  exported without the gpuport_ prefix ($(wc -l <"$tmp.unprefixed")): $(list "$tmp.unprefixed")"
grep '^gpuport_' "$tmp.exp" >"$tmp.prefixed"
extra=$(missing_from "$tmp.prefixed" "$tmp.decl")
check "libgpuport.so exports only functions the installed headers declare" test -z "$extra"
test -n "$extra" && echo "  exported but declared in no installed header: $extra"
absent=$(missing_from "$tmp.decl" "$tmp.exp")
check "libgpuport.so exports every function the installed headers declare" test -z "$absent"
test -n "$absent" && echo "  declared but not exported (missing GPUPORT_API?): $absent"

readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' >"$tmp.needed"
echo "libgpuport.so NEEDED: $(list "$tmp.needed")"
mpi_re='^lib(mpi|mpich|mpifort|open-pal|open-rte|pmix|pmi|pmi2)([._-]|$)'
forbid() { # forbid WHAT ERE WHY: no NEEDED entry of libgpuport.so matches ERE
    bad=$(grep -E "$2" "$tmp.needed")
    if test $? -gt 1; then
        echo "FAIL bad pattern for $1: $2"
        fail=1
        return
    fi
    check "libgpuport.so does not need $1" test -z "$bad"
    test -z "$bad" || echo "  NEEDED $(printf '%s' "$bad" | tr '\n' ' '): $3"
}
forbid "an MPI library" "$mpi_re" "the MPI bootstrap belongs in libgpuport_mpi"
forbid libibverbs '^libibverbs[.]' "verbs must be loaded at run time (dlopen)"
forbid libcuda '^libcuda[.]' "the CUDA driver is loaded at run time (dlopen)"
forbid libcudart '^libcudart[.]' "the library uses the CUDA driver API only"

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if test -f "$incdir/gpuport_mpi.h"; then
    if test -z "$mpilib"; then
        echo "FAIL gpuport_mpi.h is installed but libgpuport_mpi.so is not"
        fail=1
    else
        declared "$incdir/gpuport_mpi.h" | LC_ALL=C sort -u >"$tmp.mdecl"
        exported "$mpilib" >"$tmp.mexp"
        echo "libgpuport_mpi.so exports $(wc -l <"$tmp.mexp") symbols; gpuport_mpi.h declares $(wc -l <"$tmp.mdecl") functions"
        extra=$(missing_from "$tmp.mexp" "$tmp.mdecl")
        check "libgpuport_mpi.so exports only the functions of gpuport_mpi.h" test -z "$extra"
        test -n "$extra" && echo "  exported but not declared in gpuport_mpi.h: $extra"
        absent=$(missing_from "$tmp.mdecl" "$tmp.mexp")
        check "libgpuport_mpi.so exports every function of gpuport_mpi.h" test -z "$absent"
        test -n "$absent" && echo "  declared but not exported (missing GPUPORT_API?): $absent"
        readelf -d "$mpilib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' >"$tmp.mneeded"
        echo "libgpuport_mpi.so NEEDED: $(list "$tmp.mneeded")"
        check "libgpuport_mpi.so needs $soname" grep -qxF "$soname" "$tmp.mneeded"
        check "libgpuport_mpi.so needs an MPI library" grep -qE "$mpi_re" "$tmp.mneeded"
    fi
else
    echo "SKIP libgpuport_mpi checks: built without MPI (gpuport_mpi.h not installed)"
    if test -n "$mpilib"; then
        echo "FAIL libgpuport_mpi.so is installed without gpuport_mpi.h"
        fail=1
    fi
fi

if grep -q '^#define GPUPORT_HAVE_SYMVER 1' "$build/build_config.h" 2>/dev/null; then
    check_versions "$lib" "$src/src/libgpuport.map"
    if test -n "$mpilib"; then
        check_versions "$mpilib" "$src/mpi/libgpuport_mpi.map"
        nodes=$(map_nodes "$src/src/libgpuport.map" | tr '\n' ' ' | sed 's/ $//')
        nm -D --undefined-only "$mpilib" | awk '$2 ~ /^gpuport_/ { print $2 }' >"$tmp.refs"
        bad=$(awk -v nodes="$nodes" 'BEGIN { split(nodes, a, " "); for (i in a) ok[a[i]] = 1 }
            { v = $1; sub(/^[^@]*@+/, "", v); if (v == $1 || !(v in ok)) printf "%s ", $1 }' "$tmp.refs")
        check "libgpuport_mpi.so's $(wc -l <"$tmp.refs") references to libgpuport carry its versions" \
            test -s "$tmp.refs" -a -z "$bad"
        test -n "$bad" && echo "  unversioned or of another version: $bad"
    fi
else
    echo "SKIP symbol versions: configured without them (the linker takes no version script, or --disable-symbol-versions)"
fi

exit $fail
