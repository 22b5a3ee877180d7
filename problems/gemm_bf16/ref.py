"""Reference for gemm_bf16: torch (cuBLAS on the GPU), bf16 inputs, fp32 accumulation and output.

ktt hands a bf16 buffer to a python reference as a float32 array of its values (numpy has no
bfloat16), so converting them back to torch.bfloat16 is exact. prepare_input (not timed) builds
the torch tensors on the GPU, so ktt times the product alone with CUDA events. torch is imported
inside the functions, so the problem loads (cacao --check) where torch is not installed; a run
needs it.
"""


def prepare_input(scalars, buffers):
    import torch

    m, n, k = scalars["DIM_M"], scalars["DIM_N"], scalars["DIM_K"]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    a = torch.from_numpy(buffers["A"]).reshape(m, k).to(torch.bfloat16)
    bt = torch.from_numpy(buffers["BT"]).reshape(n, k).to(torch.bfloat16)
    return a.to(device), bt.to(device)


def gemm_bf16(inputs):
    import torch

    a, bt = inputs
    if a.is_cuda:  # cuBLAS: bf16 operands, fp32 accumulation, fp32 result
        return torch.mm(a, bt.t(), out_dtype=torch.float32).reshape(-1)
    # CPU (no GPU): the bf16 products are exact in fp32, so this is the same sum in fp32
    return torch.mm(a.float(), bt.float().t()).reshape(-1)
