// Reference: one thread per cell. Launched with grid ((NX+15)/16, (NY+15)/16) and block (16, 16).
extern "C" __global__ void stencil_ref(const float* IN, float* OUT) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= NX || y >= NY) return;
    size_t i = (size_t)y * NX + x;
    if (x == 0 || y == 0 || x == NX - 1 || y == NY - 1) {
        OUT[i] = IN[i];
        return;
    }
    float s = IN[i] + IN[i - NX] + IN[i + NX] + IN[i - 1] + IN[i + 1];
    OUT[i] = 0.2f * s;
}
