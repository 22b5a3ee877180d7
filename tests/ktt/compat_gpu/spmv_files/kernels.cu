// Known-good kernel for tests/compat/problems/spmv_files: one thread per row (empty rows get 0).
extern "C" __global__ void spmv(const int nrows, const int nnz, const int* __restrict__ row_offsets,
                                const int* __restrict__ col_indices, const float* __restrict__ values,
                                const float* __restrict__ x, float* __restrict__ y) {
    (void)nnz;
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= nrows) return;
    float sum = 0.0f;
    for (int j = row_offsets[row]; j < row_offsets[row + 1]; ++j) sum += values[j] * x[col_indices[j]];
    y[row] = sum;
}
