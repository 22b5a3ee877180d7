"""What every Kernel Tuner 1.5.0 run of the benchmarks shares: the launch-check patch and the wall clock.

Imported by bench/kernel_tuner_run.py (the shared GEMM space) and bench/large_space/kt_run.py
(the large space), each run as a script in a subprocess on the GPU machine; it needs
kernel_tuner installed, as they do.
"""

from __future__ import annotations

import time
from typing import Any

import kernel_tuner.backends.nvcuda as kt_backend
import kernel_tuner.utils.nvcuda as kt_utils
from kernel_tuner.observers.observer import BenchmarkObserver

_original_check = kt_utils.cuda_error_check


def _check_error_unpacked(error: Any) -> Any:
    if isinstance(error, tuple) and error:
        error = error[0]
    return _original_check(error)


def patch_launch_check() -> None:
    """Let Kernel Tuner see failed launches again (idempotent).

    Kernel Tuner 1.5.0's nvcuda backend hands cuLaunchKernel's return value, which cuda-bindings
    13 gives as a 1-tuple, to cuda_error_check, which only inspects a bare CUresult: a launch
    that fails (too many registers for the block) goes unnoticed, verification then fails on
    the untouched output and tune_kernel aborts. Unpacking the tuple restores Kernel Tuner's own
    handling (it skips such configurations); nothing else is changed.
    """
    kt_utils.cuda_error_check = _check_error_unpacked
    kt_backend.cuda_error_check = _check_error_unpacked


class WallClock(BenchmarkObserver):
    """Stamps each result with ``wall_s``, the seconds since ``t0`` (get_results runs once per configuration)."""

    def __init__(self, t0: float | None = None) -> None:
        self.t0 = time.perf_counter() if t0 is None else t0

    def get_results(self) -> dict:
        return {"wall_s": time.perf_counter() - self.t0}
