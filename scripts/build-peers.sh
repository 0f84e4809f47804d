#!/usr/bin/env bash
# Builds the peer-library baselines (workloads/peers/: the halo exchange,
# allreduce and MoE all-to-all written with NVSHMEM and with NCCL, and
# NVSHMEM's ping-pong and put + signal rate) outside gpuport's build, which
# never depends on them. Each library comes from NVSHMEM_HOME / NCCL_HOME
# (include/ and lib/) or else from its Python wheel (pip install
# nvidia-nvshmem-cu13 nvidia-nccl-cu13); a library not found skips its
# programs, said so, and the script still succeeds. MPI's
# flags come from mpicc. The programs find the libraries (and NVSHMEM its
# bootstrap plugins, through dlopen) by an rpath to the library's lib
# directory, then $ORIGIN/lib, where a copy carried elsewhere may put them.
#   usage: scripts/build-peers.sh [OUT_DIR]   (default _build/peers)
# NVCC: the compiler (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc);
# PEERS_ARCH: the GPU architecture's number (default 90: sm_90).
# PEERS_COPY_LIBS=1: also copy the libraries the programs load into
# OUT_DIR/lib, for a machine without the wheels (NCCL's alone is ~190 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-_build/peers}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
arch=${PEERS_ARCH:-90}
src=workloads/peers

# A wheel's directory: nvidia.* are namespace packages (no __file__).
wheel_dir() {
    python3 -c "import nvidia.$1 as m; print(list(m.__path__)[0])" 2>/dev/null || true
}

# The version of the wheel a directory came from, if it came from one.
wheel_version() {
    python3 -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null || echo '?'
}

# The first of DIR/lib/NAME.so* (the wheels ship only the versioned file,
# which nvcc takes as -l:FILE).
lib_file() {
    local f
    for f in "$1/lib/$2.so" "$1/lib/$2".so.*; do
        if [ -e "$f" ]; then echo "$f"; return 0; fi
    done
    return 0
}

# nvcc spells some of the flags mpicc shows differently.
to_nvcc() {
    local f
    for f in "$@"; do
        case $f in
            -Wl,*) printf '%s\n' -Xlinker "${f#-Wl,}" ;;
            -pthread) printf '%s\n' -Xcompiler -pthread ;;
            -I* | -D* | -L* | -l*) printf '%s\n' "$f" ;;
            *) ;; # the compiler's name and its other options (mpicc -show)
        esac
    done
}

command -v "$nvcc" >/dev/null || { echo "build-peers.sh: no nvcc ($nvcc)" >&2; exit 1; }
command -v mpicc >/dev/null || { echo "build-peers.sh: no mpicc on PATH" >&2; exit 1; }
if mpicc --showme:compile >/dev/null 2>&1; then # Open MPI
    read -r -a mpi_show <<<"$(mpicc --showme:compile) $(mpicc --showme:link)"
else # MPICH and its kin
    read -r -a mpi_show <<<"$(mpicc -show)"
fi
mapfile -t mpi_flags < <(to_nvcc "${mpi_show[@]}")

nvshmem=${NVSHMEM_HOME:-$(wheel_dir nvshmem)}
nccl=${NCCL_HOME:-$(wheel_dir nccl)}
nvshmem_host=${nvshmem:+$(lib_file "$nvshmem" libnvshmem_host)}
nccl_lib=${nccl:+$(lib_file "$nccl" libnccl)}
if [ -n "$nvshmem_host" ] && [ -f "$nvshmem/include/nvshmem.h" ] &&
    [ -f "$nvshmem/lib/libnvshmem_device.a" ]; then
    echo "NVSHMEM: $nvshmem ($(basename "$nvshmem_host")${NVSHMEM_HOME:+)}${NVSHMEM_HOME:-, wheel $(wheel_version nvidia-nvshmem-cu13))}"
else
    echo "NVSHMEM: not found (NVSHMEM_HOME, or pip install nvidia-nvshmem-cu13):" \
        "its programs skipped"
    nvshmem=
fi
if [ -n "$nccl_lib" ] && [ -f "$nccl/include/nccl.h" ]; then
    echo "NCCL: $nccl ($(basename "$nccl_lib")${NCCL_HOME:+)}${NCCL_HOME:-, wheel $(wheel_version nvidia-nccl-cu13))}"
else
    echo "NCCL: not found (NCCL_HOME, or pip install nvidia-nccl-cu13): its programs skipped"
    nccl=
fi

mkdir -p "$out"
# shellcheck disable=SC2054  # the commas belong to -gencode's value
common=(-O2 -std=c++17 -gencode "arch=compute_$arch,code=sm_$arch"
    -Xcompiler -Wall,-Wextra -Iworkloads/peers -Iworkloads -Iinclude)

# NVSHMEM's MPI bootstrap plugin is built against one MPI's libmpi: the
# default bootstrap is mpi only where a program of this MPI needs the same
# library, else uid (the programs' --bootstrap overrides either).
boot=0
if [ -n "$nvshmem" ]; then
    plugin=
    for f in "$nvshmem"/lib/nvshmem_bootstrap_mpi.so*; do
        if [ -e "$f" ]; then plugin=$f; break; fi
    done
    tmp=$(mktemp -d)
    printf '%s\n' '#include <mpi.h>' \
        'int main(int c, char **v) { MPI_Init(&c, &v); return MPI_Finalize(); }' >"$tmp/t.c"
    want='' have=''
    if [ -n "$plugin" ] && command -v readelf >/dev/null &&
        mpicc "$tmp/t.c" -o "$tmp/t" 2>/dev/null; then
        want=$(readelf -d "$plugin" | sed -n 's/.*NEEDED.*\[\(libmpi[^]]*\)\].*/\1/p' | head -n 1)
        have=$(readelf -d "$tmp/t" | sed -n 's/.*NEEDED.*\[\(libmpi[^]]*\)\].*/\1/p' | head -n 1)
    fi
    rm -rf "$tmp"
    if [ -n "$want" ] && [ "$want" = "$have" ]; then
        boot=1
        echo "NVSHMEM bootstrap: mpi (NVSHMEMX_INIT_WITH_MPI_COMM; $(basename "$plugin")" \
            "needs $want, as this MPI's programs do)"
    else
        echo "NVSHMEM bootstrap: uid (the MPI plugin ${plugin:+$(basename "$plugin") }needs" \
            "'${want:-?}', this MPI's programs '${have:-?}')"
    fi
fi

built=() skipped=()
build() { # NAME LIB_DIR FLAGS...
    local name=$1 dir=$2
    shift 2
    echo "  NVCC    $out/$name"
    "$nvcc" "${common[@]}" "$@" "$src/$name.cu" "$src/peer.cu" -o "$out/$name" \
        "${mpi_flags[@]}" -Xlinker --disable-new-dtags -Xlinker -rpath \
        -Xlinker "$dir/lib:\$ORIGIN/lib"
    built+=("$name")
}
for w in halo allreduce alltoall pingpong; do
    if [ -n "$nvshmem" ]; then
        # DT_RPATH (--disable-new-dtags above): NVSHMEM's dlopen of its
        # plugins searches it; it would not search a DT_RUNPATH
        build "${w}_nvshmem" "$nvshmem" -rdc=true -DPEER_NVSHMEM_MPI=$boot \
            -isystem "$nvshmem/include" -L"$nvshmem/lib" -l:"$(basename "$nvshmem_host")" \
            -lnvshmem_device
    else
        skipped+=("${w}_nvshmem")
    fi
    if [ "$w" = pingpong ]; then continue; fi # NVSHMEM's only
    if [ -n "$nccl" ]; then
        build "${w}_nccl" "$nccl" -isystem "$nccl/include" -L"$nccl/lib" \
            -l:"$(basename "$nccl_lib")"
    else
        skipped+=("${w}_nccl")
    fi
done
if [ "${PEERS_COPY_LIBS:-0}" = 1 ]; then
    mkdir -p "$out/lib"
    if [ -n "$nvshmem" ]; then
        cp -p "$nvshmem_host" "$nvshmem"/lib/nvshmem_bootstrap_mpi.so* \
            "$nvshmem"/lib/nvshmem_bootstrap_uid.so* "$out/lib/"
    fi
    if [ -n "$nccl" ]; then cp -p "$nccl_lib" "$out/lib/"; fi
    echo "libraries copied to $out/lib ($(du -sh "$out/lib" | cut -f1))"
fi
echo "built in $out: ${built[*]:-none}${skipped[*]:+; skipped: ${skipped[*]}}"
