/* Reference for the compat corpus's pair_sums_inline: 64-bit sums of neighbouring values.
   N arrives as -DN (every scalar is a macro for a cpu_c reference). */
void pair_sums(const long long* V, const short* W, long long* OUT) {
    for (long long i = 0; i < N / 2; ++i) OUT[i] = V[2 * i] + V[2 * i + 1] + (long long)W[2 * i];
}
