#!/bin/sh
# The GPU channel tests (test/gpu/test_gpu_channels: two processes, two GPUs,
# kernels pushing put / signal / flush / wait) over the ib transport. Needs
# an RDMA device and 2 GPUs; skips (77) and says why otherwise. GPU memory is
# registered through dmabuf or the peer-memory module (GPUPORT_LOG_LEVEL=info
# says which); neither available makes channel creation fail with a reason.
builddir=${top_builddir:-.}
devices=
if test -d /sys/class/infiniband; then
    devices=$(ls /sys/class/infiniband 2>/dev/null)
fi
if test -z "$devices"; then
    echo "SKIP: no RDMA device here (/sys/class/infiniband is empty or missing)"
    exit 77
fi
program="$builddir/test/gpu/test_gpu_channels"
if test ! -x "$program"; then
    echo "SKIP: $program is not built (configure found no CUDA)"
    exit 77
fi
echo "RDMA devices: $(echo $devices)"
GPUPORT_TRANSPORT=ib
export GPUPORT_TRANSPORT
exec "$program"
