// The hostile-kernel suite: VARIANT picks one behaviour. Only VARIANT 0 is honest; it does
// some useless arithmetic so that it is slower than every trick below - so a trick that
// slipped through validation would be reported as the best.
//
//  0 honest            5 out-of-bounds write     10 real work hidden on a side stream
//  1 compile error     6 writes nothing          11 caches its result across calls
//  2 trap              7 writes half             12 asks for too much dynamic shared memory
//  3 illegal address   8 mutates its input       13 too much static shared memory
//  4 infinite loop     9 right only on input 1   14 device-side launch (dynamic parallelism)
//                                                15 writes NaN
#include "inputs.hpp"

#if VARIANT == 1
this is not C++;
#endif

#if VARIANT == 11
__device__ int ktt_hostile_done;
__device__ float ktt_hostile_cache[N];
#endif

__device__ __forceinline__ float honest(float x) { return 2.0f * x + 1.0f; }

#if VARIANT == 14
extern "C" __global__ void child(const float* X, float* Y) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) Y[i] = honest(X[i]);
}
#endif

extern "C" __global__ void main_k(const float* __restrict__ X, float* __restrict__ Y) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
#if VARIANT == 13
    // 240000 B: over every target's static limit (48 KB for sm_90, 227 KB for sm_90a, where ptxas
    // takes static arrays up to the opt-in dynamic size)
    __shared__ float big[60000];
    big[threadIdx.x] = 0.0f;
    __syncthreads();
    if (big[threadIdx.x + 1] != 0.0f) return;
#endif
    if (i >= N) return;
#if VARIANT == 0 || VARIANT == 12 || VARIANT == 13
    float x = X[i];
    float acc = x;
#pragma unroll 1
    for (int k = 0; k < 1000; ++k) acc = fmaf(acc, 0.999f, 1e-3f);
    float y = honest(x);
    if (acc == 1234.5f) y = 0.0f;  // never true; keeps the loop
    Y[i] = y;
#elif VARIANT == 2
    if (i == 12345) __trap();
    Y[i] = honest(X[i]);
#elif VARIANT == 3
    if (i == 12345) *(volatile float*)(16) = 1.0f;
    Y[i] = honest(X[i]);
#elif VARIANT == 4
    while (*(volatile const float*)&X[0] != 12345.0f) {
    }
    Y[i] = honest(X[i]);
#elif VARIANT == 5
    Y[i] = honest(X[i]);
    if (i == 0) Y[N + 3] = 0.0f;
#elif VARIANT == 6
    (void)Y;
#elif VARIANT == 7
    if (i < N / 2) Y[i] = honest(X[i]);
#elif VARIANT == 8
    Y[i] = honest(X[i]);
    ((float*)X)[i] = 0.0f;
#elif VARIANT == 9
    // Right when the input is the one it was tuned on; on any other input, garbage.
    Y[i] = __float_as_int(X[0]) == X0BITS ? honest(X[i]) : 0.0f;
#elif VARIANT == 10
    (void)X;  // nothing on the main stream: the work is in side_k
#elif VARIANT == 11
    if (ktt_hostile_done) {
        Y[i] = ktt_hostile_cache[i];
    } else {
        float y = honest(X[i]);
        ktt_hostile_cache[i] = y;
        Y[i] = y;
        __threadfence();
        if (i == N - 1) ktt_hostile_done = 1;
    }
#elif VARIANT == 14
    if (i == 0) child<<<(N + 255) / 256, 256>>>(X, Y);
#elif VARIANT == 15
    Y[i] = __int_as_float(0x7fc00000);
#endif
}

// Launched on stream SIDE (1 for VARIANT 10, else the main stream). Does nothing except in
// VARIANT 10, where it does the real work and then keeps one block busy for ~5 ms.
extern "C" __global__ void side_k(const float* __restrict__ X, float* __restrict__ Y) {
#if VARIANT == 10
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) Y[i] = honest(X[i]);
    if (i == 0) {
        long long t0 = clock64();
        while (clock64() - t0 < 10000000) {
        }
    }
#else
    (void)X;
    (void)Y;
#endif
}
