"""Two outputs in KernelBench's form, written for cacao_tui's GPU check (bench/kernelbench): each
row's softmax and its log-sum-exp, over a 4096 x 8192 float matrix. Eager runs two kernels, each
reading the matrix; one kernel can produce both from one read."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1), torch.logsumexp(x, dim=1)


rows = 4096
cols = 8192


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
