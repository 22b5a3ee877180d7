/* Sequential reference. R and C arrive as -D macros; the buffers in args order,
   read-only ones const. */
#include <stddef.h>

void transpose_ref(const float* A, float* B) {
    for (size_t r = 0; r < (size_t)R; ++r)
        for (size_t c = 0; c < (size_t)C; ++c)
            B[c * (size_t)R + r] = A[r * (size_t)C + c];
}
