"""A fused sequence with parameters in KernelBench's form, written for cacao_tui's GPU check
(bench/kernelbench): add a per-feature bias, GELU (exact, erf), multiply by a per-feature scale,
over a 4096 x 16384 float matrix. Eager runs three kernels; fused, the matrix is read and written
once."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.scale = nn.Parameter(torch.rand(features) + 0.5)

    def forward(self, x):
        return nn.functional.gelu(x + self.bias) * self.scale


batch_size = 4096
features = 16384


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
