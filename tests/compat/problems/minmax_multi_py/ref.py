"""Both outputs from one function: called once per validated buffer, with its name as target."""

import numpy as np


def prepare_input(scalars, buffers):
    return buffers["data"].reshape(scalars["N_ROWS"], scalars["K_COLS"])


def minmax(matrix, target="lo"):
    reduce = np.max if target == "hi" else np.min
    return reduce(matrix, axis=1)
