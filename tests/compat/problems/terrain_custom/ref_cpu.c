/* Scalars MAP_W, MAP_H and LEVEL arrive as -D macros; buffers in inputs.yaml order. */
void below_level(const int* heights, int* mask) {
    for (long i = 0; i < (long)MAP_W * MAP_H; ++i) mask[i] = heights[i] <= LEVEL;
}
