// Known-good kernels for the original's problems/student_2022_galaxies_gpt (cpu_c reference):
// result = sqrt(sum_{i<j} (dA_ij - dB_ij)^2 / (N * (N - 1))). galaxy_pairs gives each thread one
// star i and walks the stars j > i through shared-memory tiles; block sums go into a double
// scratch accumulator (zeroed before every run). galaxy_finish takes the square root.
extern "C" __global__ void galaxy_pairs(const float* __restrict__ Ax, const float* __restrict__ Ay,
                                        const float* __restrict__ Az, const float* __restrict__ Bx,
                                        const float* __restrict__ By, const float* __restrict__ Bz,
                                        double* __restrict__ acc) {
    __shared__ float sax[BLOCK], say[BLOCK], saz[BLOCK], sbx[BLOCK], sby[BLOCK], sbz[BLOCK];
    __shared__ double red[BLOCK];
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    const bool live = i < N;
    const float ax = live ? Ax[i] : 0.0f, ay = live ? Ay[i] : 0.0f, az = live ? Az[i] : 0.0f;
    const float bx = live ? Bx[i] : 0.0f, by = live ? By[i] : 0.0f, bz = live ? Bz[i] : 0.0f;
    double sum = 0.0;
    for (int j0 = blockIdx.x * BLOCK; j0 < N; j0 += BLOCK) {  // tiles before the block's first i hold no j > i
        const int j = j0 + threadIdx.x;
        if (j < N) {
            sax[threadIdx.x] = Ax[j]; say[threadIdx.x] = Ay[j]; saz[threadIdx.x] = Az[j];
            sbx[threadIdx.x] = Bx[j]; sby[threadIdx.x] = By[j]; sbz[threadIdx.x] = Bz[j];
        }
        __syncthreads();
        float part = 0.0f;
        const int count = min(BLOCK, N - j0);
        for (int t = 0; t < count; ++t) {
            if (live && j0 + t > i) {
                const float dax = ax - sax[t], day = ay - say[t], daz = az - saz[t];
                const float dbx = bx - sbx[t], dby = by - sby[t], dbz = bz - sbz[t];
                const float d = sqrtf(dax * dax + day * day + daz * daz) - sqrtf(dbx * dbx + dby * dby + dbz * dbz);
                part += d * d;
            }
        }
        sum += part;
        __syncthreads();
    }
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(acc, red[0]);
}

extern "C" __global__ void galaxy_finish(const double* __restrict__ acc, float* __restrict__ result) {
    result[0] = (float)sqrt(acc[0] / ((double)N * ((double)N - 1.0)));
}
