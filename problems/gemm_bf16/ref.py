"""Reference for gemm_bf16: torch (cuBLAS on the GPU), bf16 inputs, fp32 accumulation and output.

A and BT arrive as int32 arrays holding two bf16 values each (inputs.yaml); viewed as 16-bit
they are the bf16 matrices. prepare_input (not timed) builds the torch tensors on the GPU, so
ktt times the product alone with CUDA events. torch is imported inside the functions, so the
problem loads (cacao --check) where torch is not installed; a run needs it.
"""

import numpy as np


def _bf16(torch, words, rows, cols):
    return torch.from_numpy(np.ascontiguousarray(words).view(np.int16).reshape(rows, cols)).view(torch.bfloat16)


def prepare_input(scalars, buffers):
    import torch

    m, n, k = scalars["DIM_M"], scalars["DIM_N"], scalars["DIM_K"]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return _bf16(torch, buffers["A"], m, k).to(device), _bf16(torch, buffers["BT"], n, k).to(device)


def gemm_bf16(inputs):
    import torch

    a, bt = inputs
    if a.is_cuda:  # cuBLAS: bf16 operands, fp32 accumulation, fp32 result
        return torch.mm(a, bt.t(), out_dtype=torch.float32).reshape(-1)
    # CPU (no GPU): the bf16 products are exact in fp32, so this is the same sum in fp32
    return torch.mm(a.float(), bt.float().t()).reshape(-1)
