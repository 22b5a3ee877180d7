// Known-good kernel for the original's problems/conv2d_dw_gen (torch reference, four cases):
// depthwise convolution in whcn layout, one thread per output element, out-of-range taps
// skipped. Every dimension is a runtime argument; KERNEL_*, STRIDE, PADDING, DILATION are macros.
extern "C" __global__ void conv2d_dw(const int in_w, const int in_h, const int channels, const int batches,
                                     const int out_w, const int out_h, const float* __restrict__ input,
                                     const float* __restrict__ filter, float* __restrict__ output) {
    (void)batches;
    const int ox = blockIdx.x * blockDim.x + threadIdx.x;
    const int oy = blockIdx.y * blockDim.y + threadIdx.y;
    const int nc = blockIdx.z;  // n * channels + c
    if (ox >= out_w || oy >= out_h) return;
    const int c = nc % channels;
    const float* in = input + (long)nc * in_h * in_w;
    const float* w = filter + (long)c * KERNEL_H * KERNEL_W;
    float acc = 0.0f;
#pragma unroll
    for (int ky = 0; ky < KERNEL_H; ++ky) {
        const int iy = oy * STRIDE + ky * DILATION - PADDING;
        if (iy < 0 || iy >= in_h) continue;
#pragma unroll
        for (int kx = 0; kx < KERNEL_W; ++kx) {
            const int ix = ox * STRIDE + kx * DILATION - PADDING;
            if (ix < 0 || ix >= in_w) continue;
            acc += in[(long)iy * in_w + ix] * w[ky * KERNEL_W + kx];
        }
    }
    output[((long)nc * out_h + oy) * out_w + ox] = acc;
}
