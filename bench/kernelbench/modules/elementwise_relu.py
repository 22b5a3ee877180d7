"""A single operator in KernelBench's form, written for cacao_tui's GPU check (bench/kernelbench):
ReLU over a 4096 x 16384 float matrix (256 MB): memory-bound, as torch's own kernel is."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 4096
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
