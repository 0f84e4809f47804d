/*
 * Every device call of the public device API, called as a program calls it,
 * with nothing but the public header included: test/tools/device_header.sh
 * compiles this file (nvcc -c, include/ only on the include path; nothing
 * runs) and fails where include/gpuport/gpuport_device.h defines a device
 * call that this file does not call. A new call goes in below.
 */
#include <gpuport/gpuport_device.h>

/* Port channels: the handle by value, as the documentation passes it. */
__global__ void port_calls(gpuport_port_channel_dev_t ch, int *out)
{
    int i = 0;

    out[i++] = gpuport_put(&ch, 0, 0, 64);
    out[i++] = gpuport_signal(&ch);
    out[i++] = gpuport_put_with_signal(&ch, 64, 64, 64);
    out[i++] = gpuport_put_value(&ch, 128, 42);
    out[i++] = gpuport_put_value_with_signal(&ch, 136, 43);
    out[i++] = gpuport_get(&ch, 192, 256, 64);
    out[i++] = gpuport_atomic_add(&ch, 144, -1);
    out[i++] = gpuport_accumulate(&ch, 160, 0, 4, GPUPORT_FLOAT32);
    out[i++] = gpuport_flush(&ch);
    out[i++] = gpuport_wait(&ch);
    out[i++] = gpuport_poll(&ch);
    out[i++] = gpuport_wait_until(&ch, 3);
    {
        uint64_t count = 0;
        out[i++] = gpuport_signal_count(&ch, &count);
        out[i++] = (int)count;
    }
}

/* ... and in device memory. */
__device__ gpuport_port_channel_dev_t port_handle;

__global__ void port_calls_global(int *out)
{
    out[threadIdx.x] = gpuport_put(&port_handle, threadIdx.x * 8u, 0, 8);
}

/* Memory channels: a block's copy and packets, one thread's signal. */
__global__ void memory_calls(gpuport_memory_channel_dev_t ch, unsigned char *buf, int *out)
{
    int i = 0;
    uint64_t pb = gpuport_memory_packet_bytes(100);

    out[i++] = gpuport_memory_put(&ch, 0, 0, 4096, threadIdx.x, blockDim.x);
    out[i++] = gpuport_memory_put_value(&ch, 4096, 7);
    out[i++] = gpuport_memory_get(&ch, 0, 4096, 4096, threadIdx.x, blockDim.x);
    out[i++] = gpuport_memory_atomic_add(&ch, 4104, -7);
    out[i++] = gpuport_memory_accumulate(&ch, 4112, 0, 8, GPUPORT_BFLOAT16, threadIdx.x,
                                         blockDim.x);
    out[i++] = gpuport_memory_flush(&ch);
    __syncthreads();
    if (threadIdx.x == 0) {
        out[i++] = gpuport_memory_signal(&ch);
        out[i++] = gpuport_memory_put_with_signal(&ch, 0, 0, 64);
        out[i++] = gpuport_memory_wait(&ch);
        out[i++] = gpuport_memory_poll(&ch);
    }
    out[i++] = gpuport_memory_wait_until(&ch, 2); /* every thread of the block */
    {
        uint64_t count = 0;
        out[i++] = gpuport_memory_signal_count(&ch, &count);
        out[i++] = (int)count;
    }
    out[i++] = gpuport_memory_put_packets(&ch, 8192, 0, 100, 1, threadIdx.x, blockDim.x);
    out[i++] = gpuport_memory_read_packets(&ch, 8192, buf, 100, 1, threadIdx.x, blockDim.x);
    unsigned char *p = gpuport_memory_peer_ptr(&ch, 0);
    if (p)
        p[threadIdx.x] = (unsigned char)pb;
}

/* Peer channels: every call, one thread. */
__global__ void peer_calls(gpuport_peer_channel_dev_t ch, int *out)
{
    int i = 0;

    out[i++] = gpuport_peer_put(&ch, 0, 0, 64);
    out[i++] = gpuport_peer_put_with_signal(&ch, 0, 0, 1 << 20);
    out[i++] = gpuport_peer_put_value(&ch, 64, 7);
    out[i++] = gpuport_peer_get(&ch, 0, 128, 64);
    out[i++] = gpuport_peer_atomic_add(&ch, 256, 3);
    out[i++] = gpuport_peer_signal(&ch);
    out[i++] = gpuport_peer_flush(&ch);
    out[i++] = gpuport_peer_poll(&ch);
    out[i++] = gpuport_peer_wait(&ch);
    out[i++] = gpuport_peer_wait_until(&ch, gpuport_peer_received(&ch) + 1);
    out[i++] = gpuport_peer_put_warp(&ch, 0, 0, 64);
    out[i++] = gpuport_peer_put_block(&ch, 0, 0, 64);
    out[i++] = gpuport_peer_signal_warp(&ch);
    out[i++] = gpuport_peer_signal_block(&ch);
    out[i++] = gpuport_peer_put_with_signal_warp(&ch, 0, 0, 64);
    out[i++] = gpuport_peer_put_with_signal_block(&ch, 0, 0, 64);
    out[i++] = gpuport_peer_put_value_block(&ch, 64, 1);
    out[i++] = gpuport_peer_flush_warp(&ch);
    out[i++] = gpuport_peer_flush_block(&ch);
    out[i++] = gpuport_peer_wait_warp(&ch);
    out[i++] = gpuport_peer_wait_block(&ch);
    out[i++] = gpuport_peer_wait_until_block(&ch, 1);
    out[i++] = gpuport_peer_get_block(&ch, 0, 128, 64);
}

/* The warp- and block-scoped calls, every thread of the scope calling. */
__global__ void scoped_calls(gpuport_port_channel_dev_t ch, gpuport_memory_channel_dev_t mch,
                             const gpuport_port_channel_dev_t *chs,
                             const gpuport_memory_channel_dev_t *mchs, unsigned int *counter,
                             int *out)
{
    int i = 0;

    out[i++] = gpuport_put_warp(&ch, 0, 0, 64);
    out[i++] = gpuport_put_block(&ch, 0, 0, 64);
    out[i++] = gpuport_put_with_signal_warp(&ch, 64, 64, 64);
    out[i++] = gpuport_put_with_signal_block(&ch, 64, 64, 64);
    out[i++] = gpuport_put_value_warp(&ch, 128, 1);
    out[i++] = gpuport_put_value_block(&ch, 128, 2);
    out[i++] = gpuport_signal_warp(&ch);
    out[i++] = gpuport_signal_block(&ch);
    out[i++] = gpuport_get_warp(&ch, 192, 256, 64);
    out[i++] = gpuport_get_block(&ch, 192, 256, 64);
    out[i++] = gpuport_flush_warp(&ch);
    out[i++] = gpuport_flush_block(&ch);
    out[i++] = gpuport_wait_warp(&ch);
    out[i++] = gpuport_wait_block(&ch);
    out[i++] = gpuport_memory_put_warp(&mch, 0, 0, 4096);
    out[i++] = gpuport_memory_put_block(&mch, 0, 0, 4096);
    out[i++] = gpuport_memory_put_with_signal_warp(&mch, 0, 0, 4096);
    out[i++] = gpuport_memory_put_with_signal_block(&mch, 0, 0, 4096);
    out[i++] = gpuport_memory_put_value_warp(&mch, 4096, 3);
    out[i++] = gpuport_memory_put_value_block(&mch, 4096, 4);
    out[i++] = gpuport_memory_get_warp(&mch, 0, 4096, 4096);
    out[i++] = gpuport_memory_get_block(&mch, 0, 4096, 4096);
    out[i++] = gpuport_memory_signal_warp(&mch);
    out[i++] = gpuport_memory_signal_block(&mch);
    out[i++] = gpuport_memory_flush_warp(&mch);
    out[i++] = gpuport_memory_flush_block(&mch);
    out[i++] = gpuport_memory_wait_warp(&mch);
    out[i++] = gpuport_memory_wait_block(&mch);
    out[i++] = gpuport_barrier_block(chs, 4);
    out[i++] = gpuport_memory_barrier_block(mchs, 4);
    out[i++] = gpuport_last_block(counter);
}

/* The host part: the handles are filled by host code of the same file. */
gpuport_status_t fill_handles(gpuport_channel_t ch, gpuport_memory_channel_t mch,
                              gpuport_port_channel_dev_t *dev, gpuport_memory_channel_dev_t *mdev,
                              uint64_t *packet_bytes)
{
    gpuport_status_t st = gpuport_channel_device(ch, dev);

    *packet_bytes = gpuport_memory_packet_bytes(4096); /* a __host__ __device__ call */
    return st != GPUPORT_OK ? st : gpuport_memory_channel_device(mch, mdev);
}
