// Tiled fp32 GEMM with more knobs, C[M,N] = A[M,K] * B[K,N], row-major (bench/search_large_space.py).
// The six parameters of bench/gemm_space/sgemm.cu (BLOCK_SIZE_X/Y threads, TILE_SIZE_X/Y outputs per
// thread, TILE_K, PAD) plus:
//   VEC_A, VEC_B  width of the global loads of A (along K) and B (along N): 1, 2 or 4 floats;
//   UNROLL_K      unroll factor of the inner k loop;
//   DOUBLE_BUF    1: two shared stages, the next tile is loaded while this one is used (one barrier a step);
//   SWIZZLE       blocks are walked in groups of SWIZZLE block rows (L2 reuse of B); 1 = row-major order.
// Vector loads are used only when the row length allows aligned access; otherwise element by element.
template <int W> struct Vec;
template <> struct Vec<1> { typedef float T; };
template <> struct Vec<2> { typedef float2 T; };
template <> struct Vec<4> { typedef float4 T; };

template <int W>
__device__ __forceinline__ void load_vec(const float* __restrict__ p, float* v) {
    typename Vec<W>::T x = *reinterpret_cast<const typename Vec<W>::T*>(p);
    const float* f = reinterpret_cast<const float*>(&x);
#pragma unroll
    for (int j = 0; j < W; j++) v[j] = f[j];
}

extern "C" __global__ void sgemm(const float* __restrict__ A, const float* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
    constexpr int BM = BLOCK_SIZE_Y * TILE_SIZE_Y;
    constexpr int BN = BLOCK_SIZE_X * TILE_SIZE_X;
    constexpr int NT = BLOCK_SIZE_X * BLOCK_SIZE_Y;
    constexpr int NBUF = DOUBLE_BUF ? 2 : 1;
    constexpr int UK = UNROLL_K;
    __shared__ float As[NBUF][TILE_K][BM + PAD];
    __shared__ float Bs[NBUF][TILE_K][BN + PAD];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * BLOCK_SIZE_X + tx;

    // Block swizzle: consecutive blocks cover SWIZZLE block rows before moving right.
    const int gx = gridDim.x, gy = gridDim.y;
    const int pid = blockIdx.y * gx + blockIdx.x;
    const int group = SWIZZLE * gx;
    const int first_m = (pid / group) * SWIZZLE;
    const int size_m = min(gy - first_m, SWIZZLE);
    const int bm = first_m + (pid % group) % size_m;
    const int bn = (pid % group) / size_m;
    const int row0 = bm * BM, col0 = bn * BN;
    const bool vec_a = (K % VEC_A) == 0, vec_b = (N % VEC_B) == 0;

    auto load_tiles = [&](int buf, int k0) {
        for (int i = tid; i < BM * (TILE_K / VEC_A); i += NT) {
            const int r = i / (TILE_K / VEC_A), kk = (i % (TILE_K / VEC_A)) * VEC_A;
            const int gr = row0 + r, gk = k0 + kk;
            float v[VEC_A];
            if (vec_a && gr < M && gk + VEC_A <= K) {
                load_vec<VEC_A>(A + (size_t)gr * K + gk, v);
            } else {
#pragma unroll
                for (int j = 0; j < VEC_A; j++) v[j] = (gr < M && gk + j < K) ? A[(size_t)gr * K + gk + j] : 0.0f;
            }
#pragma unroll
            for (int j = 0; j < VEC_A; j++) As[buf][kk + j][r] = v[j];
        }
        for (int i = tid; i < TILE_K * (BN / VEC_B); i += NT) {
            const int kk = i / (BN / VEC_B), c = (i % (BN / VEC_B)) * VEC_B;
            const int gk = k0 + kk, gc = col0 + c;
            float v[VEC_B];
            if (vec_b && gk < K && gc + VEC_B <= N) {
                load_vec<VEC_B>(B + (size_t)gk * N + gc, v);
            } else {
#pragma unroll
                for (int j = 0; j < VEC_B; j++) v[j] = (gk < K && gc + j < N) ? B[(size_t)gk * N + gc + j] : 0.0f;
            }
#pragma unroll
            for (int j = 0; j < VEC_B; j++) Bs[buf][kk][c + j] = v[j];
        }
    };

    float acc[TILE_SIZE_Y][TILE_SIZE_X];
#pragma unroll
    for (int y = 0; y < TILE_SIZE_Y; y++)
#pragma unroll
        for (int x = 0; x < TILE_SIZE_X; x++) acc[y][x] = 0.0f;

    int buf = 0;
    load_tiles(0, 0);
    __syncthreads();
    for (int k0 = 0; k0 < K; k0 += TILE_K) {
        if (DOUBLE_BUF && k0 + TILE_K < K) load_tiles(buf ^ 1, k0 + TILE_K);
#pragma unroll UK
        for (int kk = 0; kk < TILE_K; kk++) {
            float a[TILE_SIZE_Y], b[TILE_SIZE_X];
#pragma unroll
            for (int y = 0; y < TILE_SIZE_Y; y++) a[y] = As[buf][kk][ty + y * BLOCK_SIZE_Y];
#pragma unroll
            for (int x = 0; x < TILE_SIZE_X; x++) b[x] = Bs[buf][kk][tx + x * BLOCK_SIZE_X];
#pragma unroll
            for (int y = 0; y < TILE_SIZE_Y; y++)
#pragma unroll
                for (int x = 0; x < TILE_SIZE_X; x++) acc[y][x] += a[y] * b[x];
        }
        __syncthreads();
        if (DOUBLE_BUF) {
            buf ^= 1;
        } else if (k0 + TILE_K < K) {
            load_tiles(0, k0 + TILE_K);
            __syncthreads();
        }
    }
#pragma unroll
    for (int y = 0; y < TILE_SIZE_Y; y++)
#pragma unroll
        for (int x = 0; x < TILE_SIZE_X; x++) {
            const int r = row0 + ty + y * BLOCK_SIZE_Y, c = col0 + tx + x * BLOCK_SIZE_X;
            if (r < M && c < N) C[(size_t)r * N + c] = acc[y][x];
        }
}
