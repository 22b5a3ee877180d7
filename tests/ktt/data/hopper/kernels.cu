// Y = 3 * X with the tensor memory accelerator: one TW x TH tile per block, loaded through a
// host-encoded tensor map of X into shared memory, scaled there, stored through a map of Y.
// Blocks run in clusters of CLUSTER_X; a block launched outside its cluster traps.
// TW, TH, CLUSTER_X and SWIZZLE (0 or 128: the maps' swizzle in bytes) are tune parameters.
// HOSTILE (0 by default) makes it misbehave: 1 stores through X's map (a read-only input);
// 2 fixes the cluster size at compile time to 2 blocks, which a launch with another size contradicts.
#include "inputs.hpp"

#ifndef HOSTILE
#define HOSTILE 0
#endif
#if HOSTILE == 2
#define CLUSTER_DIMS __cluster_dims__(2, 1, 1)
#else
#define CLUSTER_DIMS
#endif

// CUtensorMap as the driver lays it out: <cuda.h> does not compile under NVRTC.
struct alignas(64) CUtensorMap_st {
    unsigned long long opaque[16];
};
typedef struct CUtensorMap_st CUtensorMap;

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ bool mbar_try_wait(unsigned bar, unsigned parity) {
    unsigned done;
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    return done != 0;
}

extern "C" __global__ void CLUSTER_DIMS tma_scale(const __grid_constant__ CUtensorMap x_map,
                                     const __grid_constant__ CUtensorMap y_map) {
    // 128-byte swizzling repeats every 1024 bytes: the tile starts on such a boundary.
    __shared__ alignas(1024) float tile[TH * TW];
    __shared__ alignas(8) unsigned long long bar;
    const unsigned b = smem_u32(&bar);
    const int x0 = blockIdx.x * TW, y0 = blockIdx.y * TH;
    unsigned ranks;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(ranks));
    if (ranks != CLUSTER_X) __trap();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"((unsigned)sizeof(tile))
                     : "memory");
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
            ::"r"(smem_u32(tile)), "l"(&x_map), "r"(x0), "r"(y0), "r"(b)
            : "memory");
    }
    while (!mbar_try_wait(b, 0)) {
    }
    // The element-wise scale does not care where the swizzle put each element: the store undoes it.
    for (int i = threadIdx.x; i < TH * TW; i += blockDim.x) tile[i] *= 3.0f;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the threads' writes, seen by the TMA store
    __syncthreads();
    if (threadIdx.x == 0) {
#if HOSTILE == 1
        const CUtensorMap* out = &x_map;  // writes the read-only input
#else
        const CUtensorMap* out = &y_map;
#endif
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                     ::"l"(out), "r"(x0), "r"(y0), "r"(smem_u32(tile))
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
    asm volatile("barrier.cluster.arrive.release.aligned;\n barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
