#!/bin/sh
# The public device header on its own, compiled as a program compiles it
# (compile only: nothing runs, no GPU needed):
#   - the device calls are read from include/gpuport/gpuport_device.h: every
#     function its CUDA part defines (GPUPORT_DEV, or __device__), the
#     gpuport_dev_* / gpuport_mdev_* implementation of gpuport_device_impl.h
#     not among them. test/tools/device_header.cu must call each one: a call
#     added to the header and not to the test fails here, by name;
#   - device_header.cu, which includes nothing but <gpuport/gpuport_device.h>,
#     compiles with configure's $(NVCC) and $(NVCCFLAGS), only include/ on
#     the include path, nvcc's warnings as errors (the host compiler's shown,
#     not fatal: nvcc's generated host code is not ours to keep clean);
#   - the host part: test/tools/device_header.c, including nothing but that
#     header, compiles with $(CC) $(CFLAGS) (no CUDA), warnings as errors,
#     and declares gpuport_channel_device and gpuport_memory_channel_device
#     with their types; also as C++ where a C++ compiler is found.
# The list and the host part are checked in every build; without nvcc (a
# build without CUDA) the test then skips (77), the device part unchecked.
src=${top_srcdir:-.}
build=${top_builddir:-.}
here=$(dirname "$0")
test -f "$here/device_header.cu" || here=$src/test/tools
header=$src/include/gpuport/gpuport_device.h
peer_header=$src/include/gpuport/gpuport_peer.h # included by the other
cu=$here/device_header.cu
hostc=$here/device_header.c

# configure's compilers and flags, asked of make (MAKEFLAGS cleared, as in
# link_graph.sh); outside a build tree, the environment's
# shellcheck disable=SC2016 # $(...) is make's, not the shell's
if vars=$(printf '%s\n' 'gpuport-print-device-header:' \
        '	@echo "nvcc=$(NVCC)"' '	@echo "nvccflags=$(NVCCFLAGS)"' \
        '	@echo "cc=$(CC)"' '	@echo "cflags=$(CFLAGS)"' '	@echo "cxx=$(CXX)"' |
    MAKEFLAGS='' MFLAGS='' MAKELEVEL='' ${MAKE:-make} -s -C "$build" -f Makefile -f - \
        gpuport-print-device-header 2>/dev/null); then
    NVCC=$(echo "$vars" | sed -n 's/^nvcc=//p')
    NVCCFLAGS=$(echo "$vars" | sed -n 's/^nvccflags=//p')
    CC=$(echo "$vars" | sed -n 's/^cc=//p')
    CFLAGS=$(echo "$vars" | sed -n 's/^cflags=//p')
    CXX=$(echo "$vars" | sed -n 's/^cxx=//p')
fi
CC=${CC:-cc}
if test -z "$CXX"; then
    for c in c++ g++ clang++; do
        if command -v "$c" >/dev/null 2>&1; then CXX=$c; break; fi
    done
fi

tmp=${TMPDIR:-/tmp}/gpuport_device_header.$$
trap 'rm -f "$tmp".*' EXIT
fail=0

# The device calls: the function each GPUPORT_DEV or __device__ definition
# of the header names (a declaration may break its line before the "(").
awk '/^[ \t]*#/ { next }
    decl == "" && /^[ \t]*(GPUPORT_DEV|__device__|__host__ __device__|__device__ __host__)[ \t]/ {
        decl = " " }
    decl != "" {
        decl = decl " " $0
        if (index(decl, "(") == 0)
            next
        sub(/\(.*/, "", decl)
        sub(/[ \t]+$/, "", decl)
        n = split(decl, w, /[^A-Za-z0-9_]+/)
        print w[n]
        decl = ""
    }' "$header" "$peer_header" | LC_ALL=C sort -u >"$tmp.calls"
grep -v '^gpuport_[mp]\{0,1\}dev_' "$tmp.calls" >"$tmp.api"
if grep -v '^gpuport_' "$tmp.api" >"$tmp.odd"; then
    echo "FAIL: $header defines device functions not named gpuport_*: $(tr '\n' ' ' <"$tmp.odd")"
    fail=1
fi
for c in gpuport_put gpuport_wait gpuport_memory_put; do
    if ! grep -qx "$c" "$tmp.api"; then
        echo "FAIL: found no $c among the device calls of $header (found: $(tr '\n' ' ' <"$tmp.api"));" \
            "the way this test reads the header no longer fits it"
        fail=1
    fi
done

# What device_header.cu calls: identifiers before a "(", comments stripped.
awk '{ text = text $0 "\n" }
    END {
        gsub(/\/\*([^*]|\*+[^*\/])*\*+\//, " ", text)
        gsub(/\/\/[^\n]*/, " ", text)
        while (match(text, /[A-Za-z_][A-Za-z0-9_]*[ \t\n]*\(/)) {
            name = substr(text, RSTART, RLENGTH)
            sub(/[ \t\n]*\($/, "", name)
            print name
            text = substr(text, RSTART + RLENGTH)
        }
    }' "$cu" | LC_ALL=C sort -u >"$tmp.used"
echo "device calls of gpuport_device.h ($(wc -l <"$tmp.api" | tr -d ' ')):" \
    "$(tr '\n' ' ' <"$tmp.api")"
missing=$(LC_ALL=C comm -23 "$tmp.api" "$tmp.used" | tr '\n' ' ')
if test -n "$missing"; then
    echo "FAIL: test/tools/device_header.cu does not call these device calls of" \
        "include/gpuport/gpuport_device.h: $missing(add a call of each)"
    fail=1
fi

# The host part, without CUDA: C, then C++.
# shellcheck disable=SC2086 # CC and the flags are word lists
if $CC $CFLAGS -I"$src/include" -Wall -Wextra -Werror -c "$hostc" -o "$tmp.host.o" \
    >"$tmp.log" 2>&1; then
    echo "PASS: test/tools/device_header.c (host part, C) compiles: $CC $CFLAGS -Wall -Wextra -Werror"
else
    cat "$tmp.log"
    echo "FAIL: test/tools/device_header.c, with nothing but <gpuport/gpuport_device.h>," \
        "does not compile with $CC $CFLAGS -Wall -Wextra -Werror"
    fail=1
fi
if test -n "$CXX"; then
    # shellcheck disable=SC2086
    if $CXX -x c++ -I"$src/include" -Wall -Wextra -Werror -c "$hostc" -o "$tmp.hostxx.o" \
        >"$tmp.log" 2>&1; then
        echo "PASS: test/tools/device_header.c (host part, C++) compiles: $CXX -x c++"
    else
        cat "$tmp.log"
        echo "FAIL: test/tools/device_header.c does not compile as C++ ($CXX -x c++ -Wall -Wextra -Werror)"
        fail=1
    fi
else
    echo "NOTE: no C++ compiler found; the host part was compiled as C only"
fi

if test -z "$NVCC"; then
    test $fail = 0 || exit 1
    echo "SKIP: no nvcc (a build without CUDA): the device calls were listed, not compiled"
    exit 77
fi
# shellcheck disable=SC2086 # NVCCFLAGS is a word list
if $NVCC -I"$src/include" $NVCCFLAGS -Werror all-warnings -Xcompiler -Wall,-Wextra \
    -c "$cu" -o "$tmp.dev.o" >"$tmp.log" 2>&1; then
    cat "$tmp.log"
    echo "PASS: test/tools/device_header.cu compiles: $NVCC $NVCCFLAGS" \
        "-Werror all-warnings -Xcompiler -Wall,-Wextra"
else
    cat "$tmp.log"
    echo "FAIL: test/tools/device_header.cu, with nothing but <gpuport/gpuport_device.h>," \
        "does not compile with $NVCC $NVCCFLAGS (nvcc's warnings as errors)"
    fail=1
fi
test $fail = 0 && echo "PASS: every device call of gpuport_device.h compiles from the public header alone"
exit $fail
