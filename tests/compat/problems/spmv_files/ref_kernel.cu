// One thread per row. The boundary: runtime scalars and buffers in inputs.yaml order.
extern "C" __global__ void spmv_ref(const int nrows, const int nnz, const int* row_offsets,
                                    const int* col_indices, const float* values, const float* x,
                                    float* y) {
    (void)nnz;
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= nrows) return;
    float sum = 0.0f;
    for (int j = row_offsets[row]; j < row_offsets[row + 1]; ++j) sum += values[j] * x[col_indices[j]];
    y[row] = sum;
}
