// Known-good kernel for bench/kernelbench/modules/bias_gelu_scale.py (imported by cacao import):
// out = gelu(x + bias[f]) * scale[f] with the exact (erf) GELU, f the feature (column), one
// float4 of a row per thread per step. Boundary: (x, bias, scale, out): the model's parameters
// arrive as inputs, after the forward's input, in state_dict order.
#include "inputs.hpp"

__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

extern "C" __global__ void bias_gelu_scale(const float* __restrict__ x, const float* __restrict__ bias,
                                           const float* __restrict__ scale, float* __restrict__ out) {
    const size_t n4 = (size_t)BATCH_SIZE * FEATURES / 4;
    const float4* in = reinterpret_cast<const float4*>(x);
    const float4* b4 = reinterpret_cast<const float4*>(bias);
    const float4* s4 = reinterpret_cast<const float4*>(scale);
    float4* o = reinterpret_cast<float4*>(out);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        const size_t f = i % (FEATURES / 4);
        float4 v = __ldg(&in[i]);
        float4 b = __ldg(&b4[f]);
        float4 s = __ldg(&s4[f]);
        o[i] = make_float4(gelu(v.x + b.x) * s.x, gelu(v.y + b.y) * s.y, gelu(v.z + b.z) * s.z, gelu(v.w + b.w) * s.w);
    }
}
