"""Reference for the compat corpus's old_run: Y = max(X, 0)."""

import numpy as np


def relu(scalars, buffers):
    return np.maximum(buffers["X"], 0.0).astype(np.float32)
