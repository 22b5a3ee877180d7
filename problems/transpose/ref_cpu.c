/* Sequential reference. ROWS and COLS arrive as -D macros; the buffers in args order,
   read-only ones const. */
#include <stddef.h>

void transpose_ref(const float* A, float* B) {
    for (size_t r = 0; r < (size_t)ROWS; ++r)
        for (size_t c = 0; c < (size_t)COLS; ++c)
            B[c * (size_t)ROWS + r] = A[r * (size_t)COLS + c];
}
