/* The benchmark's slow C reference: N * N pairs, one double-precision square root each.
   N arrives as -DN (every scalar is a macro for a cpu_c reference). */
#include <math.h>

void pair_ref(const float* X, const float* Y, float* OUT) {
    for (int i = 0; i < N; ++i) {
        double s = 0.0;
        for (int j = 0; j < N; ++j) {
            double dx = (double)X[i] - X[j], dy = (double)Y[i] - Y[j];
            s += sqrt(dx * dx + dy * dy + 1e-3);
        }
        OUT[i] = (float)(s / N);
    }
}
