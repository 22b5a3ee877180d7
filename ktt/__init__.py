"""ktt: the kernel tuning toolkit (compile, validate, time, search and profile CUDA kernels)."""

__version__ = "0.1.0"
