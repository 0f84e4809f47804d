#!/bin/sh
# make installcheck, CMake part: a CMake project outside the tree finds the
# installed gpuport (under DESTDIR when one is given) with find_package and
# builds on its imported targets, as installcheck.sh does through pkg-config:
#   - find_package(gpuport VERSION EXACT REQUIRED [COMPONENTS mpi]) finds
#     gpuport-config.cmake in the installed CMAKECONFIGDIR, through
#     CMAKE_PREFIX_PATH=$DESTDIR$prefix, and gpuport_VERSION is this one;
#   - a version probe on gpuport::gpuport is built and run (its version must
#     be this one), and, with the MPI bootstrap, examples/host_channels.c on
#     gpuport::gpuport_mpi, run at 2 ranks through test/mpi/mpirun.sh (exit 0,
#     two OK lines); the programs must load libgpuport from the installed
#     libdir (the imported location; no LD_LIBRARY_PATH), or, linked
#     statically (gpuport_USE_STATIC_LIBS), need no libgpuport at all;
#   - with CUDA (gpuport built with it, and cmake can enable its CUDA
#     language with $NVCC, for NVCC_ARCH as configure chose it), in the same
#     project: COMPONENTS device, a device probe (.cu: a kernel on
#     gpuport_device.h, not launched; run: the version, and
#     gpuport_channel_device answering a NULL channel) on gpuport::device,
#     and, with the MPI bootstrap, examples/device_channels.cu on
#     gpuport::device and gpuport::gpuport_mpi, built, and run at 2 ranks
#     where nvidia-smi lists a GPU ("built, not run" otherwise);
#   - relocation: a copy of the installed files in another directory is found
#     and used there (the probe, linked and run against the copy);
#   - what must not be found is not, with the package's reason: COMPONENTS
#     mpi without the MPI bootstrap, COMPONENTS device without CUDA (or, with
#     it, in a project without the CUDA language), a component it does not
#     have, the next minor version (0.x) or major version, the static
#     libraries where none were built.
# Without cmake on PATH (or in $CMAKE) the whole part is skipped, saying so.
# Run by installcheck-local (Makefile.am), which sets the variables below.
set -u
: "${DESTDIR=}" "${prefix:?}" "${libdir:?}" "${includedir:?}" "${cmakeconfigdir:?}" "${CC:?}"
: "${CFLAGS=}" "${LDFLAGS=}" "${PACKAGE_VERSION:?}" "${have_mpi:?}" "${enable_shared:?}"
: "${enable_static:?}" "${top_srcdir:?}" "${top_builddir:?}"
: "${have_cuda=no}" "${NVCC=}" "${NVCC_ARCH=}"

fail=0
pass() { echo "PASS: cmake: $*"; }
failed() { echo "FAIL: cmake: $*"; fail=1; }

cmake=${CMAKE:-cmake}
if ! command -v "$cmake" >/dev/null 2>&1; then
    echo "SKIP: cmake: no $cmake on PATH: the CMake package is installed but not tested"
    exit 0
fi
cmake_version=$("$cmake" --version 2>/dev/null | sed -n '1s/^cmake version //p')
case $cmake_version in
    [0-2].* | 3.[0-8] | 3.[0-8].*)
        echo "SKIP: cmake: $cmake is $cmake_version; gpuport's CMake package needs 3.9 or newer"
        exit 0
        ;;
esac
cfgdir=$DESTDIR$cmakeconfigdir
lib=$DESTDIR$libdir
if test ! -f "$cfgdir/gpuport-config.cmake" || test ! -f "$cfgdir/gpuport-config-version.cmake"; then
    echo "FAIL: cmake: $cfgdir/gpuport-config.cmake or -version.cmake is not there: run make install${DESTDIR:+ DESTDIR=$DESTDIR} first"
    exit 1
fi
builddir=$(cd "$top_builddir" && pwd)
srcdir=$(cd "$top_srcdir" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuport_cmake_check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# How CMake is told where to look: the prefix, where find_package searches
# PREFIX/lib*/cmake/gpuport and PREFIX/share/cmake/gpuport; gpuport_DIR for
# another --with-cmakeconfigdir (or --libdir such as PREFIX/lib/mpich).
# where DIR PREFIX: the -D option that points CMake at DIR
where() {
    case $1 in
        "$2"/lib/cmake/gpuport | "$2"/lib64/cmake/gpuport | "$2"/lib32/cmake/gpuport | \
            "$2"/libx32/cmake/gpuport | "$2"/share/cmake/gpuport)
            echo "-DCMAKE_PREFIX_PATH=$2" ;;
        *) echo "-Dgpuport_DIR=$1" ;;
    esac
}
# installed path, made relative to the prefix (for the moved copy), or empty
# where it is not under the prefix
under_prefix() {
    case $1 in
        "$prefix"/*) echo "${1#"$prefix"/}" ;;
        *) echo "" ;;
    esac
}

# The probe: the version of the header and of the library must be this one.
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
# The device probe: a kernel on the device API (compiled, never launched: it
# runs without a GPU), and the host side of gpuport_channel_device.
cat >"$tmp/device_probe.cu" <<EOF
#include <gpuport/gpuport_device.h>
#include <stdio.h>
#include <string.h>

__global__ void put_one(gpuport_port_channel_dev_t ch, int *status)
{
    *status = gpuport_put_with_signal(&ch, 0, 0, 8);
    if (*status == GPUPORT_OK)
        *status = gpuport_flush(&ch);
}

int main(void)
{
    gpuport_port_channel_dev_t dev;
    gpuport_status_t st;

    if (strcmp(gpuport_version_string(), "$PACKAGE_VERSION") != 0) {
        printf("version %s, expected $PACKAGE_VERSION\n", gpuport_version_string());
        return 1;
    }
    st = gpuport_channel_device(NULL, &dev);
    if (st != GPUPORT_ERR_INVALID_ARG) {
        printf("gpuport_channel_device(NULL): %s, expected GPUPORT_ERR_INVALID_ARG\n",
               gpuport_status_string(st));
        return 1;
    }
    printf("gpuport %s: gpuport_channel_device(NULL): %s\n", gpuport_version_string(),
           gpuport_status_string(st));
    return 0;
}
EOF
mkdir "$tmp/proj" || exit 1
cat >"$tmp/proj/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.9)
if(NOT DEFINED PROJECT_LANGUAGES)
  set(PROJECT_LANGUAGES C)
endif()
project(gpuport_cmake_check ${PROJECT_LANGUAGES})
if(DEFINED FIND_ARGS)
  # the requests that must fail: REQUIRED, so that CMake stops with the reason
  find_package(gpuport ${FIND_ARGS} REQUIRED)
  message(STATUS "find_package(gpuport ${FIND_ARGS} REQUIRED) found gpuport ${gpuport_VERSION}")
  return()
endif()
set(components "")
if(WANT_CUDA)
  # CMAKE_CUDA_COMPILER and CMAKE_CUDA_ARCHITECTURES from the command line
  enable_language(CUDA)
  list(APPEND components device)
endif()
if(WANT_MPI)
  list(APPEND components mpi)
endif()
if(components)
  find_package(gpuport ${EXPECT_VERSION} EXACT REQUIRED COMPONENTS ${components})
else()
  find_package(gpuport ${EXPECT_VERSION} EXACT REQUIRED)
endif()
if(NOT gpuport_VERSION STREQUAL EXPECT_VERSION)
  message(FATAL_ERROR "gpuport_VERSION is '${gpuport_VERSION}', expected ${EXPECT_VERSION}")
endif()
get_filename_component(found_dir "${gpuport_DIR}" REALPATH)
get_filename_component(expect_dir "${EXPECT_DIR}" REALPATH)
if(NOT found_dir STREQUAL expect_dir)
  message(FATAL_ERROR "found gpuport in ${gpuport_DIR}, expected ${EXPECT_DIR}")
endif()
get_target_property(location gpuport::gpuport IMPORTED_LOCATION)
message(STATUS "gpuport ${gpuport_VERSION}: ${location}, static ${gpuport_STATIC}, headers in ${gpuport_INCLUDE_DIR}")
add_executable(probe "${PROBE}")
target_link_libraries(probe PRIVATE gpuport::gpuport)
if(WANT_MPI)
  if(NOT TARGET gpuport::gpuport_mpi)
    message(FATAL_ERROR "COMPONENTS mpi found, but no gpuport::gpuport_mpi target")
  endif()
  add_executable(host_channels "${EXAMPLE}")
  target_link_libraries(host_channels PRIVATE gpuport::gpuport_mpi)
endif()
if(WANT_CUDA)
  if(NOT TARGET gpuport::device)
    message(FATAL_ERROR "COMPONENTS device found, but no gpuport::device target")
  endif()
  get_target_property(device_inc gpuport::device INTERFACE_INCLUDE_DIRECTORIES)
  if(NOT device_inc STREQUAL gpuport_INCLUDE_DIR)
    message(FATAL_ERROR "gpuport::device's include directory is '${device_inc}', not ${gpuport_INCLUDE_DIR}")
  endif()
  message(STATUS "gpuport::device: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
  add_executable(device_probe "${DEVICE_PROBE}")
  target_link_libraries(device_probe PRIVATE gpuport::device)
  if(WANT_MPI)
    add_executable(device_channels "${DEVICE_EXAMPLE}")
    target_link_libraries(device_channels PRIVATE gpuport::device gpuport::gpuport_mpi)
  endif()
endif()
EOF

# configure NAME [OPTIONS]: cmake configures $tmp/proj in $tmp/NAME (output
# in $tmp/NAME.log); the exit status is cmake's
configure() {
    name=$1
    shift
    mkdir -p "$tmp/$name" &&
        (cd "$tmp/$name" && CC=$CC CFLAGS=$CFLAGS LDFLAGS=$LDFLAGS "$cmake" \
            -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON \
            -DEXPECT_VERSION="$PACKAGE_VERSION" -DEXPECT_DIR="$cfgdir" -DPROBE="$tmp/probe.c" \
            -DEXAMPLE="$srcdir/examples/host_channels.c" -DDEVICE_PROBE="$tmp/device_probe.cu" \
            -DDEVICE_EXAMPLE="$srcdir/examples/device_channels.cu" "$@" "$tmp/proj") \
            >"$tmp/$name.log" 2>&1
}

# checks a program's dynamic needs: PROGRAM shared|static LIBDIR
check_linked() {
    prog=$1 kind=$2 from=$3
    needed=$(readelf -d "$prog" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    if test "$kind" = shared; then
        case " $needed" in
            *" libgpuport.so."*) ;;
            *) failed "$(basename "$prog") does not need libgpuport.so (NEEDED: $needed)"; return 1 ;;
        esac
        where=$(LD_TRACE_LOADED_OBJECTS=1 "$prog" 2>&1 |
            sed -n 's/^[[:space:]]*libgpuport\.so\.[0-9]* => \([^ ]*\).*/\1/p')
        case $where in
            "$from"/*) ;;
            *) failed "$(basename "$prog") loads libgpuport from '${where:-nowhere}', not $from"; return 1 ;;
        esac
    else
        case " $needed" in
            *" libgpuport"*) failed "$(basename "$prog") links statically yet needs: $needed"; return 1 ;;
        esac
    fi
    return 0
}

# build_and_run NAME shared|static MPI(yes|no) CUDA(yes|no) LIBDIR [CMAKE OPTIONS]
build_and_run() {
    name=$1 kind=$2 mpi=$3 with_cuda=$4 from=$5
    shift 5
    shown=$*
    want=OFF
    test "$mpi" = yes && want=ON
    comps=
    test "$with_cuda" = yes && comps=" device"
    test "$mpi" = yes && comps="$comps mpi"
    if test "$with_cuda" = yes; then
        set -- "$@" -DWANT_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
            ${cuda_arch:+"-DCMAKE_CUDA_ARCHITECTURES=$cuda_arch"}
        shown="$shown and CUDA ($nvcc, architectures ${cuda_arch:-the default})"
    fi
    if ! configure "$name" -DWANT_MPI=$want "$@"; then
        cat "$tmp/$name.log"
        failed "$name: cmake $* could not configure a project on find_package(gpuport)"
        return 1
    fi
    found=$(sed -n 's/^-- gpuport [^:]*: //p' "$tmp/$name.log")
    if ! (cd "$tmp/$name" && "$cmake" --build .) >"$tmp/$name.build" 2>&1; then
        cat "$tmp/$name.build"
        failed "$name: the project on gpuport's imported targets does not build"
        return 1
    fi
    pass "$name: find_package(gpuport $PACKAGE_VERSION EXACT REQUIRED${comps:+ COMPONENTS$comps}) with $shown ($found)"
    check_linked "$tmp/$name/probe" "$kind" "$from" || return 1
    if "$tmp/$name/probe" >"$tmp/run.out" 2>&1; then
        pass "$name: a program on gpuport::gpuport links $kind and runs: $(cat "$tmp/run.out")"
    else
        cat "$tmp/run.out"
        failed "$name: the version probe did not run"
        return 1
    fi
    if test "$mpi" = yes; then
        prog=$tmp/$name/host_channels
        check_linked "$prog" "$kind" "$from" || return 1
        "$builddir/test/mpi/mpirun.sh" 2 "$prog" >"$tmp/run.out" 2>&1
        rc=$?
        oks=$(grep -c ': OK$' "$tmp/run.out")
        if test $rc -eq 0 && test "$oks" -eq 2; then
            pass "$name: examples/host_channels.c on gpuport::gpuport_mpi links $kind and runs at 2 ranks"
        else
            cat "$tmp/run.out"
            failed "$name: examples/host_channels at 2 ranks exited $rc with $oks OK lines (expected 0 and 2)"
        fi
    fi
    test "$with_cuda" = yes || return 0
    prog=$tmp/$name/device_probe
    check_linked "$prog" "$kind" "$from" || return 1
    # (stderr apart: gpuport logs the NULL channel it is given)
    if "$prog" >"$tmp/run.out" 2>"$tmp/run.err"; then
        pass "$name: a .cu program on gpuport::device (a kernel on gpuport_device.h) builds with CUDA, links $kind and runs: $(cat "$tmp/run.out")"
    else
        cat "$tmp/run.out" "$tmp/run.err"
        failed "$name: the device probe on gpuport::device did not run"
        return 1
    fi
    if test "$mpi" != yes; then
        echo "SKIP: cmake: $name: examples/device_channels.cu needs the MPI bootstrap: not built"
        return 0
    fi
    prog=$tmp/$name/device_channels
    check_linked "$prog" "$kind" "$from" || return 1
    pass "$name: examples/device_channels.cu on gpuport::device and gpuport::gpuport_mpi builds with CUDA and links $kind"
    if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU [0-9]'; then
        echo "SKIP: cmake: $name: examples/device_channels: built, not run: no GPU (nvidia-smi lists none)"
        return 0
    fi
    "$builddir/test/mpi/mpirun.sh" 2 "$prog" >"$tmp/run.out" 2>&1
    rc=$?
    oks=$(grep -c '^rank [01]: \(cudaMalloc\|VMM\) channel over [a-z_]*: received [0-9]* bytes from rank [01]: OK$' "$tmp/run.out")
    if test $rc -eq 0 && test "$oks" -eq 4; then
        pass "$name: examples/device_channels runs at 2 ranks on the GPU (4 OK lines)"
    elif test $rc -eq 77; then
        echo "SKIP: cmake: $name: examples/device_channels: built, not run: $(grep -m1 'SKIP' "$tmp/run.out")"
    else
        cat "$tmp/run.out"
        failed "$name: examples/device_channels at 2 ranks exited $rc with $oks OK lines (expected 0 and 4)"
    fi
}

# not_found NAME REQUEST REASON [CMAKE OPTIONS]: find_package(gpuport REQUEST
# REQUIRED) must stop cmake with a message that says REASON (CMake wraps its
# messages: they are read as one line)
not_found() {
    name=$1 request=$2 reason=$3
    shift 3
    shown=$(echo "$request" | tr ';' ' ')
    if configure "$name" -DFIND_ARGS="$request" "$@"; then
        failed "$name: find_package(gpuport $shown REQUIRED) found it; it must not"
        return 1
    fi
    said=$(tr '\n' ' ' <"$tmp/$name.log" | tr -s ' ')
    case $said in
        *"$reason"*)
            pass "$name: find_package(gpuport $shown REQUIRED) fails, saying '$reason'" ;;
        *)
            cat "$tmp/$name.log"
            failed "$name: find_package(gpuport $shown REQUIRED) failed, but without saying '$reason'" ;;
    esac
}

# CUDA: where gpuport was built with it and cmake can enable its CUDA
# language with configure's nvcc, for configure's NVCC_ARCH (sm_90: 90)
cuda=no
nvcc=
cuda_arch=${NVCC_ARCH#sm_}
if test "$have_cuda" = yes; then
    nvcc=$(command -v "$NVCC" 2>/dev/null)
    if test -z "$nvcc"; then
        echo "SKIP: cmake: CUDA: no nvcc ('$NVCC'): gpuport::device is not built on"
    else
        mkdir "$tmp/cudaproj" "$tmp/cuda" || exit 1
        printf 'cmake_minimum_required(VERSION 3.9)\nproject(gpuport_cuda_check CUDA)\n' \
            >"$tmp/cudaproj/CMakeLists.txt"
        if (cd "$tmp/cuda" && "$cmake" -DCMAKE_CUDA_COMPILER="$nvcc" \
            ${cuda_arch:+"-DCMAKE_CUDA_ARCHITECTURES=$cuda_arch"} "$tmp/cudaproj") \
            >"$tmp/cuda.log" 2>&1; then
            cuda=yes
        else
            echo "SKIP: cmake: CUDA: $cmake $cmake_version cannot enable its CUDA language with $nvcc: $(grep -m1 -A2 'Error' "$tmp/cuda.log" | tr '\n' ' ' | tr -s ' ')"
        fi
    fi
fi

here=$(where "$cfgdir" "$DESTDIR$prefix")
if test "$enable_shared" = yes; then default=shared; else default=static; fi
build_and_run "$default" "$default" "$have_mpi" "$cuda" "$lib" "$here"
if test "$enable_shared" = yes && test "$enable_static" = yes; then
    build_and_run static static "$have_mpi" no "$lib" "$here" -Dgpuport_USE_STATIC_LIBS=ON
elif test "$enable_static" != yes; then
    not_found static-missing "$PACKAGE_VERSION" "built without static libraries" "$here" \
        -Dgpuport_USE_STATIC_LIBS=ON
fi

# The installed files, moved: the package finds everything from its own place.
rel_cfg=$(under_prefix "$cmakeconfigdir")
rel_lib=$(under_prefix "$libdir")
rel_inc=$(under_prefix "$includedir")
if test -z "$rel_cfg" || test -z "$rel_lib" || test -z "$rel_inc"; then
    echo "SKIP: cmake: moved prefix: CMAKECONFIGDIR, LIBDIR or INCLUDEDIR is not under $prefix"
else
    moved=$tmp/moved/prefix
    mkdir -p "$moved/$rel_cfg" "$moved/$rel_lib" "$moved/$rel_inc" &&
        cp -P "$cfgdir"/gpuport-config*.cmake "$moved/$rel_cfg/" &&
        cp -P "$lib"/libgpuport* "$moved/$rel_lib/" &&
        cp -R "$DESTDIR$includedir/gpuport" "$moved/$rel_inc/" || exit 1
    build_and_run moved "$default" no no "$moved/$rel_lib" "$(where "$moved/$rel_cfg" "$moved")" \
        -DEXPECT_DIR="$moved/$rel_cfg"
    if grep -q "headers in $moved/$rel_inc\$" "$tmp/moved.log"; then
        pass "moved: the headers are taken from the moved copy"
    else
        failed "moved: the headers are not taken from $moved/$rel_inc: $(grep 'headers in' "$tmp/moved.log")"
    fi
fi

# What must not be found.
if test "$have_mpi" != yes; then
    not_found no-mpi "COMPONENTS;mpi" "was built without its MPI bootstrap" "$here"
fi
if test "$have_cuda" != yes; then
    not_found no-cuda "COMPONENTS;device" "was built without CUDA" "$here"
else
    not_found no-cuda-language "COMPONENTS;device" \
        "needs the CUDA language, which this project has not enabled" "$here"
fi
if test "$have_mpi" = yes && command -v "${CXX:-c++}" >/dev/null 2>&1; then
    # a C++ project without C: told to enable C, not failing inside FindMPI
    not_found no-c-language "COMPONENTS;mpi" \
        "which FindMPI makes only where the C language is enabled" "$here" \
        -DPROJECT_LANGUAGES=CXX
fi
not_found no-such-component "COMPONENTS;nope" "gpuport has no component 'nope'" "$here"
# 0.M.P answers 0.M only (the next minor version may change the interface);
# from 1.0 on, its major version
# shellcheck disable=SC2046  # major and minor: two words
set -- $(echo "$PACKAGE_VERSION" | sed 's/^\([0-9]*\)\.\([0-9]*\).*/\1 \2/')
if test "$1" = 0; then
    next=0.$(($2 + 1))
    if test "$2" -gt 0; then
        not_found older-minor "0.$(($2 - 1))" "version: $PACKAGE_VERSION" "$here"
    fi
else
    next=$(($1 + 1)).0
fi
not_found next-version "$next" "version: $PACKAGE_VERSION" "$here"

if test $fail -ne 0; then
    echo "installcheck (cmake): FAILED (the lines above say what)"
    exit 1
fi
echo "installcheck (cmake): the installed gpuport builds and runs programs through find_package(gpuport)"
