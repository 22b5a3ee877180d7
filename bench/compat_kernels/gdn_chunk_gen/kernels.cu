// Known-good kernel for the original's problems/gdn_chunk_gen (torch reference, a custom
// initialiser for g, two validated buffers o and state): the gated delta rule in its
// recurrent form, which the chunked oracle computes in blocks. One block per (value head h,
// DVT columns of the state); each thread keeps one column S[:, dv] of the head's HD x HD
// state in registers and walks the tokens in order:
//   S *= exp(g_t);  delta = beta_t * (v_t - S^T k_t);  S += k_t delta^T;  o_t = S^T q_t
// with q and k L2-normalised (eps 1e-6) and q scaled by 1/sqrt(HD). Value head h reads
// query/key head h / (kHv / kHk) (repeat_interleave). HD is the head size (restricted to kD).
extern "C" __global__ void gdn_recurrent(const int kT, const int kHk, const int kHv, const int kD,
                                         const float* __restrict__ q, const float* __restrict__ k,
                                         const float* __restrict__ v, const float* __restrict__ g,
                                         const float* __restrict__ beta, float* __restrict__ o,
                                         const float* __restrict__ s0, float* __restrict__ state) {
    (void)kD;
    __shared__ float qs[HD];
    __shared__ float ks[HD];
    __shared__ float norms[2];
    const int h = blockIdx.y;
    const int dv = blockIdx.x * DVT + threadIdx.x;
    const int hk = h / (kHv / kHk);
    float s[HD];
#pragma unroll
    for (int dk = 0; dk < HD; ++dk) s[dk] = s0[((long)h * HD + dk) * HD + dv];
    const float scale = rsqrtf((float)HD);
    for (int t = 0; t < kT; ++t) {
        const float* qt = q + ((long)t * kHk + hk) * HD;
        const float* kt = k + ((long)t * kHk + hk) * HD;
        for (int d = threadIdx.x; d < HD; d += DVT) {
            qs[d] = qt[d];
            ks[d] = kt[d];
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            float sq = 0.0f, sk = 0.0f;
            for (int d = 0; d < HD; ++d) {
                sq += qs[d] * qs[d];
                sk += ks[d] * ks[d];
            }
            norms[0] = scale / fmaxf(sqrtf(sq), 1e-6f);
            norms[1] = 1.0f / fmaxf(sqrtf(sk), 1e-6f);
        }
        __syncthreads();
        const float qn = norms[0], kn = norms[1];
        const float decay = expf(g[(long)t * kHv + h]);
        const float b = beta[(long)t * kHv + h];
        float kv = 0.0f;
#pragma unroll
        for (int dk = 0; dk < HD; ++dk) {
            s[dk] *= decay;
            kv += s[dk] * (ks[dk] * kn);
        }
        const float delta = (v[((long)t * kHv + h) * HD + dv] - kv) * b;
        float out = 0.0f;
#pragma unroll
        for (int dk = 0; dk < HD; ++dk) {
            s[dk] += (ks[dk] * kn) * delta;
            out += s[dk] * (qs[dk] * qn);
        }
        o[((long)t * kHv + h) * HD + dv] = out;
        __syncthreads();  // qs/ks are overwritten by the next token
    }
#pragma unroll
    for (int dk = 0; dk < HD; ++dk) state[((long)h * HD + dk) * HD + dv] = s[dk];
}
