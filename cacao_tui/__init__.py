"""cacao_tui: an LLM agent that searches for fast CUDA kernels, in the terminal."""

__version__ = "0.1.0"
