"""Which GPUs this machine has, asked of nvidia-smi (the engine process never opens a CUDA context)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class DetectedGpu:
    index: int
    name: str
    compute_capability: str  # "9.0"

    @property
    def arch(self) -> str:
        return "sm_" + self.compute_capability.replace(".", "")


def detect_gpus(timeout_s: float = 20.0) -> list[DetectedGpu]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    gpus = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit():
            gpus.append(DetectedGpu(int(parts[0]), parts[1], parts[2]))
    return gpus


def arch_of(compute_capability: str | None) -> str:
    if not compute_capability:
        return "sm_90"
    return "sm_" + compute_capability.replace(".", "")



@dataclass(frozen=True)
class GpuProblem:
    kind: Literal["none", "missing", "mixed"]  # no GPU at all; a wanted index is not there; two kinds
    line: str


def gpu_problem(wanted: list[int], detected: list[DetectedGpu]) -> GpuProblem | None:
    """Why a run on the GPUs ``wanted`` cannot start on this machine; None when it can.

    The same check before the run archives anything (the home screen's run dialog) and when it
    starts (the launcher), so a machine without a GPU is told at once, not by a run that dies.
    Each caller adds the hint in its own words (a flag, a field of the dialog).
    """
    if not detected:
        return GpuProblem("none", "no NVIDIA GPU found (nvidia-smi lists none)")
    by_index = {g.index: g for g in detected}
    missing = [i for i in wanted if i not in by_index]
    if missing:
        have = ", ".join(str(i) for i in sorted(by_index))
        return GpuProblem("missing", f"GPU {missing[0]} does not exist on this machine (GPUs: {have})")
    arches = {by_index[i].arch for i in wanted}
    if len(arches) > 1:
        kinds = ", ".join(sorted(arches))
        return GpuProblem("mixed", f"GPUs {wanted} have different architectures ({kinds}); use GPUs of one kind")
    return None
