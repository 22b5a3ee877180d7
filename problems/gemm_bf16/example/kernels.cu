// gemm_tma_wgmma: C = A * B on Hopper (sm_90a) with TMA, wgmma and an mbarrier pipeline.
//
// A is DIM_M x DIM_K bf16, row-major; B is given as BT, DIM_N x DIM_K bf16 (B's columns
// contiguous, the layout both wgmma operands read best: K-major); C is DIM_M x DIM_N fp32.
// Accumulation is fp32 in the tensor cores.
//
// One CTA computes a BM x BN tile of C. Per k-tile of BK = 64 it receives, through the
// tensor memory accelerator (TMA), a BM x BK slice of A and a BN x BK slice of BT into
// shared memory, swizzled (SWIZZLE bytes per row: 32, 64 or 128; the same mode in the
// tensor map and in the wgmma descriptors). The k-tiles go through a ring of STAGES
// buffers, each with two mbarriers: `full` (the TMA's bytes have landed) and `empty`
// (every consumer has finished reading it).
//
// Roles (warp specialisation, PRODUCER = 1): warpgroup 0 is the producer, one of its
// threads issues the TMA loads, and it gives up registers (setmaxnreg) to the CONSUMERS
// warpgroups that follow; each consumer owns BM / CONSUMERS rows of the tile (MI stacked
// m64 sub-tiles) and issues wgmma.mma_async m64nBNk16 on descriptors of shared memory.
// With PRODUCER = 0 there is no producer warpgroup: thread 0 of the first consumer refills
// the stage the consumers have just released.
//
// Clusters (CLUSTER_M = 2): two CTAs of a cluster compute vertically adjacent tiles that
// share the BT slice; each loads half of it and multicasts it to both, so a stage is free
// only when the consumers of both CTAs released it (remote mbarrier arrives through mapa).
//
// Tiles are assigned in groups (RASTER 0: GROUP rows of clusters walked column by column;
// RASTER 1: GROUP columns walked row by row) so that CTAs running together share A and B
// slices in L2.
//
// The index arithmetic between "LAYOUT BEGIN" and "LAYOUT END" is plain C++; the test
// tests/problem/test_gemm_bf16_layout.py compiles it on the CPU and checks it against a
// model of the TMA swizzle, the wgmma descriptors and the accumulator fragments (PTX ISA).
#include "inputs.hpp"

// Tune parameters (tuning.yaml): BM, BN, CONSUMERS, STAGES, PRODUCER, CLUSTER_M, SWIZZLE, RASTER, GROUP.
#define BK 64
#define KB (SWIZZLE / 2)              // k elements per TMA box row: one swizzle span
#define MI (BM / (64 * CONSUMERS))    // m64 sub-tiles per consumer warpgroup
#define THREADS (128 * (CONSUMERS + PRODUCER))
#define A_BOX_BYTES (BM * SWIZZLE)
#define B_BOX_BYTES (BN * SWIZZLE)
#define STAGE_A_BYTES (BM * BK * 2)
#define STAGE_B_BYTES (BN * BK * 2)
#define STAGE_BYTES (STAGE_A_BYTES + STAGE_B_BYTES)
#define B_SLICE (BN / CLUSTER_M)      // rows of the BT slice this CTA loads and multicasts

// The driver's 128-byte CUtensorMap (<cuda.h> does not compile under NVRTC), encoded on the
// host by the tuner for the buffer's device address and passed by value.
struct alignas(64) CUtensorMap_st {
    unsigned long long opaque[16];
};
typedef struct CUtensorMap_st CUtensorMap;

#ifndef GEMM_HD
#define GEMM_HD __host__ __device__ __forceinline__
#endif

// LAYOUT BEGIN
typedef unsigned int u32;  // NVRTC has no <stdint.h>
typedef unsigned long long u64;

// Offsets are bytes from the 1024-aligned start of the dynamic shared memory.
GEMM_HD u32 swizzle_code(u32 swizzle) { return swizzle == 128 ? 1u : swizzle == 64 ? 2u : 3u; }

GEMM_HD u32 a_box_offset(u32 stage, u32 box) { return stage * STAGE_BYTES + box * A_BOX_BYTES; }

GEMM_HD u32 b_box_offset(u32 stage, u32 box) {
    return stage * STAGE_BYTES + STAGE_A_BYTES + box * B_BOX_BYTES;
}

// Where this CTA's rank-`rank` share of BT's box lands in every CTA of the cluster.
GEMM_HD u32 b_slice_offset(u32 stage, u32 box, u32 rank) {
    return b_box_offset(stage, box) + rank * B_SLICE * SWIZZLE;
}

// wgmma descriptor of a K-major operand laid out by the TMA: rows of SWIZZLE bytes, 8-row
// atoms SBO = 8 * SWIZZLE bytes apart. LBO (the distance between atoms along K) is never
// used: one k16 step (32 bytes) stays inside one swizzle row. Base offset 0: every atom
// starts on a multiple of 8 * SWIZZLE bytes, and a k step only moves within a row.
GEMM_HD u64 smem_desc(u32 addr) {
    return (u64)((addr & 0x3FFFF) >> 4)
         | ((u64)1 << 16)
         | ((u64)((8 * SWIZZLE) >> 4) << 32)
         | ((u64)swizzle_code(SWIZZLE) << 62);
}

// Start of k16 step `kk` (0 .. BK/16 - 1) of A's rows row0 .. row0+63 (row0 a multiple of 64).
GEMM_HD u32 a_step_offset(u32 stage, u32 row0, u32 kk) {
    const u32 k = kk * 16;
    return a_box_offset(stage, k / KB) + row0 * SWIZZLE + (k % KB) * 2;
}

GEMM_HD u32 b_step_offset(u32 stage, u32 kk) {
    const u32 k = kk * 16;
    return b_box_offset(stage, k / KB) + (k % KB) * 2;
}

// Accumulator register i of thread t (0..127 in its warpgroup) of wgmma m64nNk16 .f32:
// warp t/32 owns rows 16*(t/32) ..+15; in every 8-column block (i/4) a thread holds
// rows g and g+8 (g = lane/4), columns 2*(lane%4) and +1.
GEMM_HD u32 acc_row(u32 t, u32 i) { return (t / 32) * 16 + (t % 32) / 4 + 8 * ((i % 4) / 2); }

GEMM_HD u32 acc_col(u32 t, u32 i) { return 8 * (i / 4) + 2 * (t % 4) + (i % 2); }

// The C tile (in tile units) of a CTA: clusters of CLUSTER_M vertically adjacent tiles,
// ordered by RASTER and GROUP.
GEMM_HD void tile_of(u32 block, u32* tile_m, u32* tile_n) {
    const u32 rows = DIM_M / (BM * CLUSTER_M);  // cluster rows
    const u32 cols = DIM_N / BN;
    const u32 cluster = block / CLUSTER_M;
    const u32 rank = block % CLUSTER_M;
    u32 r, c;
    if (RASTER == 0) {  // GROUP cluster rows at a time, walked down each column
        const u32 span = GROUP * cols;
        const u32 first = (cluster / span) * GROUP;
        const u32 height = rows - first < GROUP ? rows - first : GROUP;
        r = first + (cluster % span) % height;
        c = (cluster % span) / height;
    } else {  // GROUP columns at a time, walked along each cluster row
        const u32 span = GROUP * rows;
        const u32 first = (cluster / span) * GROUP;
        const u32 width = cols - first < GROUP ? cols - first : GROUP;
        c = first + (cluster % span) % width;
        r = (cluster % span) / width;
    }
    *tile_m = r * CLUSTER_M + rank;
    *tile_n = c;
}

// The TMA copies of k-tile kt, box `box` (0 .. BK/KB - 1): where each lands (offset) and the
// tensor coordinates it starts at (k, row), innermost first as in the map. BT's copy is this
// CTA's share (rank) of the slice, multicast to the same offset in every CTA of the cluster.
GEMM_HD void a_copy(u32 kt, u32 box, u32 tile_m, u32* offset, int* k, int* row) {
    *offset = a_box_offset(kt % STAGES, box);
    *k = (int)(kt * BK + box * KB);
    *row = (int)(tile_m * BM);
}

GEMM_HD void b_copy(u32 kt, u32 box, u32 tile_n, u32 rank, u32* offset, int* k, int* row) {
    *offset = b_slice_offset(kt % STAGES, box, rank);
    *k = (int)(kt * BK + box * KB);
    *row = (int)(tile_n * BN + rank * B_SLICE);
}

// Bytes the TMA delivers into one CTA's stage: its A slice and the whole BT slice (its own
// share plus the multicast shares of the other CTAs of the cluster).
GEMM_HD u32 stage_tx_bytes() { return STAGE_A_BYTES + STAGE_B_BYTES; }

// The parity k-tile kt waits for: on its stage's full barrier (phase kt / STAGES), and on its
// empty barrier before refilling it (the release of the previous round, kt / STAGES - 1).
GEMM_HD u32 full_parity(u32 kt) { return (kt / STAGES) & 1u; }

GEMM_HD u32 empty_parity(u32 kt) { return ((kt / STAGES) - 1u) & 1u; }  // kt >= STAGES
// LAYOUT END

__device__ __forceinline__ u32 smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// Wait until the barrier's phase of the given parity has completed. The loop is in PTX: a
// C++ loop here is a divergent path to ptxas, which then serialises the wgmma around it.
// 2^26 failed tries (seconds at least) mean a lost arrival: trap, so the launch fails instead of
// hanging (ktt then reports a runtime error and restarts its worker).
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .u32 n;\n"
        "mov.u32 n, 0;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@p bra DONE_%=;\n"
        "add.u32 n, n, 1;\n"
        "setp.ne.u32 p, n, 67108864;\n"
        "@p bra WAIT_%=;\n"
        "trap;\n"
        "DONE_%=:\n}"
        ::"r"(bar), "r"(parity)
        : "memory");
}

// One arrival on the stage's `empty` barrier of every CTA of the cluster.
__device__ __forceinline__ void release_stage(u32 bar) {
#if CLUSTER_M == 1
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
#else
#pragma unroll
    for (u32 r = 0; r < CLUSTER_M; ++r) {
        u32 remote;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(r));
        asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
    }
#endif
}

__device__ __forceinline__ void tma_load(u32 dst, const CUtensorMap* map, int c0, int c1, u32 bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        ::"r"(dst), "l"((u64)map), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

__device__ __forceinline__ void tma_load_multicast(u32 dst, const CUtensorMap* map, int c0, int c1,
                                                   u32 bar, unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3}], [%4], %5;"
        ::"r"(dst), "l"((u64)map), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
        : "memory");
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

__device__ __forceinline__ u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// wgmma.mma_async m64nBNk16, f32 += bf16 * bf16, both operands K-major in shared memory.
#define WG_REGS_64 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WG_REGS_128 WG_REGS_64 ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define F16(i) F4(i), F4(i + 4), F4(i + 8), F4(i + 12)
#define F64(i) F16(i), F16(i + 16), F16(i + 32), F16(i + 48)

__device__ __forceinline__ void wgmma_step(float (&d)[BN / 2], u64 da, u64 db) {
#if BN == 256
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" WG_REGS_128 "}, %128, %129, 1, 1, 1, 0, 0;"
                 : F64(0), F64(64)
                 : "l"(da), "l"(db));
#elif BN == 128
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" WG_REGS_64 "}, %64, %65, 1, 1, 1, 0, 0;"
                 : F64(0)
                 : "l"(da), "l"(db));
#else
#error "BN must be 128 or 256"
#endif
}

// Keep the compiler from moving accumulator reads or writes across a wgmma fence or wait.
__device__ __forceinline__ void pin(float (&d)[BN / 2]) {
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Issue the TMA loads of k-tile kt into its stage (one thread).
__device__ __forceinline__ void produce(u32 base, u32 kt, u32 tile_m, u32 tile_n, u32 rank,
                                        const CUtensorMap* tmA, const CUtensorMap* tmB, u32 full) {
    const u32 s = kt % STAGES;
    mbar_expect_tx(full + 8 * s, stage_tx_bytes());
#pragma unroll
    for (u32 box = 0; box < BK / KB; ++box) {
        u32 offset;
        int k, row;
        a_copy(kt, box, tile_m, &offset, &k, &row);
        tma_load(base + offset, tmA, k, row, full + 8 * s);
        b_copy(kt, box, tile_n, rank, &offset, &k, &row);
#if CLUSTER_M == 1
        tma_load(base + offset, tmB, k, row, full + 8 * s);
#else
        tma_load_multicast(base + offset, tmB, k, row, full + 8 * s, (unsigned short)((1u << CLUSTER_M) - 1));
#endif
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_tma_wgmma(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
               float* __restrict__ C) {
    const CUtensorMap* tmA = &a_map;  // TMA reads the maps where the launch put them
    const CUtensorMap* tmB = &b_map;
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) u64 bars[2 * STAGES];  // full[0..STAGES), empty[STAGES..2*STAGES)

    const u32 base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const u32 full = smem_addr(bars);
    const u32 empty = full + 8 * STAGES;
    const u32 tid = threadIdx.x;
    const u32 KT = DIM_K / BK;
#if CLUSTER_M == 1
    const u32 rank = 0;
#else
    const u32 rank = cluster_rank();
#endif
    u32 tile_m, tile_n;
    tile_of(blockIdx.x, &tile_m, &tile_n);

    if (tid == 0) {
        for (u32 s = 0; s < STAGES; ++s) {
            mbar_init(full + 8 * s, 1);                          // the producer's arrive.expect_tx
            mbar_init(empty + 8 * s, CONSUMERS * CLUSTER_M);     // one arrival per consumer warpgroup of the cluster
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
#if CLUSTER_M == 1
    __syncthreads();
#else
    cluster_sync();  // every CTA's barriers exist before a multicast or a remote arrive reaches them
#endif

#if PRODUCER
    const u32 wg = tid / 128;  // 0: producer; 1..CONSUMERS: consumers
    if (wg == 0) {
#if CONSUMERS == 2
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
#endif
        if (tid == 0) {
            for (u32 kt = 0; kt < KT; ++kt) {
                if (kt >= STAGES) mbar_wait(empty + 8 * (kt % STAGES), empty_parity(kt));
                produce(base, kt, tile_m, tile_n, rank, tmA, tmB, full);
            }
        }
    } else {
#if CONSUMERS == 2
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
#endif
        const u32 w = wg - 1;
#else
    {
        const u32 w = tid / 128;
        if (tid == 0) {
            for (u32 kt = 0; kt < STAGES && kt < KT; ++kt) produce(base, kt, tile_m, tile_n, rank, tmA, tmB, full);
        }
#endif
        const u32 t = tid % 128;
        float acc[MI][BN / 2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) acc[mi][i] = 0.0f;
            pin(acc[mi]);
        }

        for (u32 kt = 0; kt < KT; ++kt) {
            const u32 s = kt % STAGES;
            mbar_wait(full + 8 * s, full_parity(kt));
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
            for (u32 kk = 0; kk < BK / 16; ++kk) {
                const u64 db = smem_desc(base + b_step_offset(s, kk));
#pragma unroll
                for (u32 mi = 0; mi < MI; ++mi)
                    wgmma_step(acc[mi], smem_desc(base + a_step_offset(s, (w * MI + mi) * 64, kk)), db);
            }
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // k-tile kt-1 is read: free its stage
            if (kt > 0 && t == 0) release_stage(empty + 8 * ((kt - 1) % STAGES));
#if !PRODUCER
            // No producer warpgroup: thread 0 refills the stage of k-tile kt-1 with k-tile kt-1+STAGES.
            // The first consumer warpgroup waits until every consumer of the cluster has released it.
            if (w == 0 && kt > 0 && kt - 1 + STAGES < KT) {
                mbar_wait(empty + 8 * ((kt - 1) % STAGES), empty_parity(kt - 1 + STAGES));
                if (t == 0) produce(base, kt - 1 + STAGES, tile_m, tile_n, rank, tmA, tmB, full);
            }
#endif
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) pin(acc[mi]);
        if (t == 0) release_stage(empty + 8 * ((KT - 1) % STAGES));

        // Epilogue: fp32 pairs straight from the fragments to C.
#pragma unroll
        for (u32 mi = 0; mi < MI; ++mi) {
            const u32 row0 = tile_m * BM + (w * MI + mi) * 64;
#pragma unroll
            for (u32 i = 0; i < BN / 2; i += 2) {
                const u64 row = row0 + acc_row(t, i);
                const u64 col = tile_n * BN + acc_col(t, i);
                *reinterpret_cast<float2*>(&C[row * DIM_N + col]) = make_float2(acc[mi][i], acc[mi][i + 1]);
            }
        }
    }
#if CLUSTER_M == 1
    __syncthreads();
#else
    cluster_sync();  // no CTA leaves while a peer may still arrive on its barriers
#endif
}

